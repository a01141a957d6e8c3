package tty

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// printable reports whether s is valid UTF-8 of printable runes and spaces only.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// FuzzEscape: whatever the bytes, Escape returns valid UTF-8 with no control byte, no
// ESC, no C1 control and nothing else unicode calls non-printing; printable text comes
// back unchanged, and escaping twice changes nothing more.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"daily-billing", "sh -c 'echo hi'", "héllo wörld", "\x1b[31mred", "a\nb\tc\r",
		"bell\a", "\xff\xfe", "rtl\u202eevil", "\x00", "\u009b2J", "\x9b2J", "\uFFFD", "\xef\xbf\xbd\xef\xbf",
		"\u2028\u2029", "\u200b\ufeff", "\U0010FFFF", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\u0301", "\u00a0", "\x7f",
		"\\x1b", "", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !utf8.ValidString(e) {
			t.Fatalf("Escape(%q) = %q: invalid UTF-8", s, e)
		}
		for i, r := range e {
			if r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f || r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("Escape(%q) = %q: %U at byte %d", s, e, r, i)
			}
		}
		if printable(s) && e != s {
			t.Fatalf("Escape(%q) = %q: printable text changed", s, e)
		}
		if e2 := Escape(e); e2 != e {
			t.Fatalf("Escape(Escape(%q)) = %q, not %q", s, e2, e)
		}
	})
}
