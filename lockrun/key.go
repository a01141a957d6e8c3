package lockrun

import (
	"fmt"
	"unicode/utf8"
)

// MaxKeyLen is the longest key cronlock accepts.
const MaxKeyLen = 200

// keyChars is what a key may hold, as messages say it.
const keyChars = "A-Z a-z 0-9 . _ - : / @"

// ValidKey reports why key is not a usable lock name, or nil when it is.
// A key is 1–200 characters of A-Z a-z 0-9 . _ - : / @.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("the key is empty; give --key a name such as daily-billing")
	}
	// Characters before length: a key of 150 é is refused for its é, not as "300
	// characters long" (it is 300 bytes). The message names the character as the user
	// typed it and counts positions in characters, not bytes: the first byte of ï's
	// UTF-8 printed as 'Ã'.
	pos := 0
	for i, r := range key {
		pos++
		if r < utf8.RuneSelf && keyByte(byte(r)) {
			continue
		}
		what := fmt.Sprintf("%q", r)
		switch {
		case isInvalidAt(key, i):
			what = fmt.Sprintf("the byte %#02x (not UTF-8)", key[i])
		case r >= utf8.RuneSelf:
			what = fmt.Sprintf("%q (U+%04X)", r, r)
		}
		return fmt.Errorf("the key has %s at position %d; use only %s", what, pos, keyChars)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("the key is %d characters long; the limit is %d", len(key), MaxKeyLen)
	}
	return nil
}

// isInvalidAt reports whether key holds a byte at i that does not start valid UTF-8.
func isInvalidAt(key string, i int) bool {
	r, n := utf8.DecodeRuneInString(key[i:])
	return r == utf8.RuneError && n <= 1
}

func keyByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '.', '_', '-', ':', '/', '@':
		return true
	}
	return false
}
