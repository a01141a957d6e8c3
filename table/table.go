// Package table lays rows of text out in aligned columns for people, and fits them into
// a terminal's width by cutting the cells of free-text columns (a command, a note) with
// an ellipsis, as ps cuts its COMMAND column. It measures text in terminal columns
// (tty.Width) but does not escape it: cells come in ready to print. It does not decide
// how wide the terminal is (tty.Columns does) nor whether to colour.
package table

import (
	"slices"
	"strings"

	"cronlock/tty"
)

// Options say how Format lays rows out. The zero value aligns every column left and
// never cuts.
type Options struct {
	// Right lists the columns aligned right (numbers).
	Right map[int]bool
	// Paint, when not nil, may colour a cell (row 0 is the header) after its width was
	// counted, so that colour codes never count as columns; the last column is padded
	// only when it is right-aligned, so a cell whose codes tty.Width cannot see through
	// (a coloured sparkline) belongs there.
	Paint func(row, col int, cell string) string
	// Width, when above 0, is the width lines should fit in: the cells of the Cut
	// columns are shortened (ending in "…") until they do, but no Cut column becomes
	// narrower than its header or MinCut, whichever is more; lines stay longer than
	// Width when the other columns alone do not fit.
	Width int
	// Cut lists the columns that may be cut to fit Width: free text, never an id or a
	// time, which must be read whole.
	Cut []int
}

// MinCut is the narrowest a cut column becomes (or its header, when wider), so that a
// cut command still says which it is.
const MinCut = 8

// Format lays rows out: each column as wide as its widest cell (tty.Width: a wide
// character takes two columns, a combining mark none), two blanks between columns, no
// trailing blanks, every line ending in a newline. Rows may have fewer cells than
// others.
func Format(rows [][]string, o Options) string {
	widths := widthsOf(rows)
	if o.Width > 0 && len(o.Cut) > 0 {
		if fit := fitWidths(rows, widths, o); fit != nil {
			rows = cutRows(rows, fit, o.Cut)
			widths = widthsOf(rows)
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
			if i < len(row)-1 || o.Right[i] {
				pad = strings.Repeat(" ", widths[i]-tty.Width(cell))
			}
			if o.Paint != nil {
				cell = o.Paint(n, i, cell)
			}
			if o.Right[i] {
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

// widthsOf returns the width of each column: its widest cell.
func widthsOf(rows [][]string) []int {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], tty.Width(cell))
		}
	}
	return widths
}

// fitWidths returns the widths the Cut columns must be cut to so that lines fit o.Width
// (indexed like widths; only Cut columns matter), or nil when they fit already. The room
// left by the other columns is shared evenly among the Cut columns; one that needs less
// than its share keeps its width and leaves the rest to the others.
func fitWidths(rows [][]string, widths []int, o Options) []int {
	total := 2 * max(len(widths)-1, 0)
	for _, w := range widths {
		total += w
	}
	if total <= o.Width {
		return nil
	}
	cut := slices.DeleteFunc(slices.Clone(o.Cut), func(c int) bool { return c < 0 || c >= len(widths) })
	slices.Sort(cut)
	cut = slices.Compact(cut)
	room := o.Width - total
	for _, c := range cut {
		room += widths[c]
	}
	// Narrowest first: each takes its whole width if that is within an even share of
	// what is left.
	slices.SortFunc(cut, func(a, b int) int { return widths[a] - widths[b] })
	fit := slices.Clone(widths)
	for i, c := range cut {
		share := max(room, 0) / (len(cut) - i)
		fit[c] = min(widths[c], share)
		floor := MinCut
		if len(rows) > 0 && c < len(rows[0]) {
			floor = max(floor, tty.Width(rows[0][c]))
		}
		fit[c] = max(fit[c], min(widths[c], floor))
		room -= fit[c]
	}
	return fit
}

// cutRows returns rows with the cells of the cut columns cut to fit; the header row is
// never cut (its width is a floor of fitWidths).
func cutRows(rows [][]string, fit []int, cut []int) [][]string {
	out := make([][]string, len(rows))
	for n, row := range rows {
		out[n] = row
		if n == 0 {
			continue
		}
		for _, c := range cut {
			if c < 0 || c >= len(row) || tty.Width(row[c]) <= fit[c] {
				continue
			}
			if &out[n][0] == &row[0] {
				out[n] = slices.Clone(row) // the caller's rows stay as they were
			}
			out[n][c] = tty.Truncate(row[c], fit[c])
		}
	}
	return out
}
