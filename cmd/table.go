package cmd

import "cronlock/table"

// formatTable lays rows out for people (table.Format): columns in right are
// right-aligned; paint, when not nil, may colour a cell (row 0 is the header) after its
// width was counted. It never cuts a cell: tables that fit the terminal call table.Format
// with a Width.
func formatTable(rows [][]string, right map[int]bool, paint func(row, col int, cell string) string) string {
	return table.Format(rows, table.Options{Right: right, Paint: paint})
}
