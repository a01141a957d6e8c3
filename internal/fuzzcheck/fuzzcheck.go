// Package fuzzcheck holds the oracles that the fuzz targets of several packages share.
package fuzzcheck

import (
	"unicode"
	"unicode/utf8"
)

// HasControl reports whether s holds a byte a terminal would act on: C0, DEL, or a C1
// control as a rune.
func HasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	for _, r := range s {
		if 0x80 <= r && r <= 0x9f {
			return true
		}
	}
	return false
}

// Printable reports whether s is valid UTF-8 made only of printable runes, spaces and
// (when newlines) '\n': nothing a terminal would act on.
func Printable(s string, newlines bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !(r == '\n' && newlines || r == ' ' || unicode.IsPrint(r)) {
			return false
		}
	}
	return true
}
