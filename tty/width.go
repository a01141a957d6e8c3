package tty

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// Width is how many terminal columns s takes: East Asian wide and fullwidth characters
// (東京, ｆｕｌｌ) take two, combining marks (the ́ of é written as e + U+0301) and
// zero-width joiners none, everything else one. Tables are aligned by it, since a
// column padded by counting characters comes out short by one for every wide one.
// Other non-printing runes count one: Escape has replaced them by then.
func Width(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	if r < utf8.RuneSelf {
		return 1 // ASCII, the common case, without a table lookup
	}
	switch {
	case unicode.In(r, unicode.Mn, unicode.Me), r == '\u200b', r == '\u200d':
		return 0
	case r >= 0x1160 && r <= 0x11ff:
		return 0 // Hangul jungseong and jongseong: they join the syllable before them
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// Pad returns s followed by spaces up to w columns (by Width); s as it is if it is
// already that wide.
func Pad(s string, w int) string {
	return s + strings.Repeat(" ", max(w-Width(s), 0))
}

// Ellipsis ends text that Truncate cut.
const Ellipsis = "…"

// Truncate returns s cut to at most w columns (by Width), ending in Ellipsis when it was
// cut; s as it is when it fits. A wide character that would straddle the cut is left out.
// w below 1 gives "".
func Truncate(s string, w int) string {
	if Width(s) <= w {
		return s
	}
	if w < 1 {
		return ""
	}
	n := 0
	for i, r := range s {
		rw := runeWidth(r)
		if n+rw > w-1 {
			return s[:i] + Ellipsis
		}
		n += rw
	}
	return s + Ellipsis // not reached: Width(s) > w
}
