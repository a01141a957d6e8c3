package tty

import "testing"

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
