package tty

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"daily-billing", "daily-billing"},
		{"sh -c 'echo hi'", "sh -c 'echo hi'"},
		{"héllo wörld", "héllo wörld"},
		{"\x1b[31mred", `\x1b[31mred`},
		{"a\nb\tc\r", `a\nb\tc\r`},
		{"bell\a", `bell\a`},
		{"\xff\xfe", `\xff\xfe`},
		{"rtl\u202eevil", `rtl\u202eevil`},
		{"\x00", `\x00`},
		{"\u009b2J", `\u009b2J`}, // C1 CSI as a rune
		{"\x9b2J", `\x9b2J`},     // the same byte alone is invalid UTF-8
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
