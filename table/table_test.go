package table

import (
	"strings"
	"testing"

	"cronlock/tty"
)

func TestFormatAligns(t *testing.T) {
	got := Format([][]string{{"A", "NUM", "TEXT"}, {"東京", "7", "x"}, {"b", "123", ""}}, Options{Right: map[int]bool{1: true}})
	want := "A     NUM  TEXT\n東京    7  x\nb     123\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

// TestFormatFits: the cut columns share the room the others leave, a narrow one keeps its
// width and leaves the rest to the wide one, none goes below its header or MinCut, and
// a table that fits is left alone.
func TestFormatFits(t *testing.T) {
	rows := [][]string{
		{"ID", "COMMAND", "NOTE"},
		{"abc", "/opt/jobs/" + strings.Repeat("x", 40), strings.Repeat("n", 50)},
		{"def", "true", ""},
	}
	for _, c := range []struct {
		width int
		cut   []int
		want  []string
	}{
		{0, []int{1, 2}, nil}, // no limit
		{200, []int{1, 2}, nil},
		{45, []int{1, 2}, []string{
			"ID   COMMAND              NOTE",
			"abc  /opt/jobs/xxxxxxxx…  nnnnnnnnnnnnnnnnnn…",
			"def  true",
		}},
		{45, []int{2}, []string{ // only NOTE may be cut: the line stays long
			"ID   COMMAND" + strings.Repeat(" ", 45) + "NOTE",
			"abc  /opt/jobs/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx  nnnnnnn…",
			"def  true",
		}},
		{10, []int{1, 2, 7, -1}, []string{ // floors: the header, MinCut
			"ID   COMMAND   NOTE",
			"abc  /opt/jo…  nnnnnnn…",
			"def  true",
		}},
	} {
		got := Format(rows, Options{Width: c.width, Cut: c.cut})
		want := Format(rows, Options{})
		if c.want != nil {
			want = strings.Join(c.want, "\n") + "\n"
		}
		if got != want {
			t.Errorf("width %d, cut %v: got\n%s\nwant\n%s", c.width, c.cut, got, want)
		}
		for _, l := range strings.Split(got, "\n") {
			if c.width >= 45 && len(c.cut) == 2 && tty.Width(l) > c.width {
				t.Errorf("width %d: line %q is %d wide", c.width, l, tty.Width(l))
			}
		}
	}
	if rows[1][1] != "/opt/jobs/"+strings.Repeat("x", 40) {
		t.Errorf("Format changed the caller's rows: %q", rows[1][1])
	}
}
