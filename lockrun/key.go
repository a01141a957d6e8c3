package lockrun

import "fmt"

// MaxKeyLen is the longest key cronlock accepts.
const MaxKeyLen = 200

// ValidKey reports why key is not a usable lock name, or nil when it is.
// A key is 1–200 characters of A-Z a-z 0-9 . _ - : / @.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("the key is empty; give --key a name such as daily-billing")
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("the key is %d characters long; the limit is %d", len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if !keyByte(key[i]) {
			return fmt.Errorf("the key has %q at position %d; use only A-Z a-z 0-9 . _ - : / @", key[i], i+1)
		}
	}
	return nil
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
