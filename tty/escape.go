package tty

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes s safe to print on a terminal: control bytes, invalid UTF-8 and other
// non-printing runes become Go escapes (\x1b, \u202e), so that a job's name or output
// cannot drive the reader's terminal. Printable text, spaces included, is left alone.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[0])|0x100, 16)[1:])
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[:n])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}
