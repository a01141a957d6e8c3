package tty

import (
	"os"
	"testing"
)

func TestWidth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"app-1", 5},
		{"東京", 4},                 // East Asian wide
		{"ｆｕｌｌ", 8},               // fullwidth forms
		{"한국", 4},                 // Hangul syllables
		{"\u1100\u1161\u11a8", 2}, // the same syllable as jamo: one wide lead, two joining
		{"naïve", 5},              // precomposed ï
		{"nai\u0308ve", 5},        // i + combining diaeresis
		{"e\u20dd", 1},            // enclosing mark
		{"a\u200db", 2},           // zero-width joiner
		{"▁▂█·", 4},               // the sparkline's marks: ambiguous width, one column here
		{"─│", 2},
		{"😀", 2},
		{`\x1b[2J`, 7}, // as Escape writes a control byte
	} {
		if got := Width(c.in); got != c.want {
			t.Errorf("Width(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPad(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"ab", 4, "ab  "},
		{"東京", 6, "東京  "},
		{"e\u0301", 3, "e\u0301  "},
		{"toolong", 3, "toolong"},
	} {
		if got := Pad(c.in, c.w); got != c.want {
			t.Errorf("Pad(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		w    int
		want string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdef", 5, "abcd…"},
		{"abcdef", 1, "…"},
		{"abcdef", 0, ""},
		{"東京都", 5, "東京…"},
		{"東京都", 4, "東…"}, // 京 would straddle the cut
		{"Ame\u0301lie!", 5, "Ame\u0301l…"},
		{"", 3, ""},
	} {
		got := Truncate(c.s, c.w)
		if got != c.want || Width(got) > max(c.w, 0) {
			t.Errorf("Truncate(%q, %d) = %q (%d columns), want %q", c.s, c.w, got, Width(got), c.want)
		}
	}
}

// TestColumnsFromEnvironment: COLUMNS wins over everything, whatever the file; a file
// that is no terminal has no width without it.
func TestColumnsFromEnvironment(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for env, want := range map[string]int{"": 0, "100": 100, " 90 ": 90, "0": 0, "-3": 0, "wide": 0} {
		t.Setenv("COLUMNS", env)
		if got := Columns(f); got != want {
			t.Errorf("COLUMNS=%q on a file: %d, want %d", env, got, want)
		}
	}
	t.Setenv("COLUMNS", "77")
	if got := Columns(nil); got != 77 {
		t.Errorf("COLUMNS=77, no file: %d", got)
	}
}
