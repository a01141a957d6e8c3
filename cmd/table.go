package cmd

import (
	"strings"

	"cronlock/tty"
)

// formatTable lays rows out for people: each column as wide as its widest cell on a
// terminal (tty.Width: a wide character takes two columns, a combining mark none), two
// blanks between columns, no trailing blanks. Columns in right are right-aligned. paint,
// when not nil, may colour a cell (row 0 is the header) after its width was counted, so
// that colour codes never count as columns; the last column is padded only when it is
// right-aligned, so a cell whose codes tty.Width cannot see through (a coloured
// sparkline) belongs there.
func formatTable(rows [][]string, right map[int]bool, paint func(row, col int, cell string) string) string {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], tty.Width(cell))
		}
	}
	var b, line strings.Builder
	for n, row := range rows {
		line.Reset()
		for i, cell := range row {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := ""
			if i < len(row)-1 || right[i] {
				pad = strings.Repeat(" ", widths[i]-tty.Width(cell))
			}
			if paint != nil {
				cell = paint(n, i, cell)
			}
			if right[i] {
				line.WriteString(pad + cell)
			} else {
				line.WriteString(cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
