// Package keyname names files after lock keys, and reads keys back from those names.
//
// Its one job is the encoding shared by cronlock's per-key files (the local backend's
// lock files and the metrics files): every byte of the key outside A-Z a-z 0-9 and a
// scheme's few plain punctuation bytes is written as %XX (uppercase hex), so that "/"
// cannot make a sub-folder, "." and ".." cannot name the folder or its parent, and two
// keys never share a name. A key whose encoding is too long for a file name keeps its
// first encoded bytes (never half of a %XX), then "=" and 32 lowercase hex digits of the
// key's SHA-256; "=" is never plain, so a hashed name cannot equal a whole one.
//
// The names are on disk, and an older and a newer cronlock on one host must agree on
// them: a Scheme's output must never change. The package does not validate keys, create
// files or choose folders; its callers do.
package keyname

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// HashLen is the length of what a hashed name has after its first encoded bytes: "="
// and 32 hex digits (the first 16 bytes of the key's SHA-256).
const HashLen = 1 + 32

// A Scheme is one way of naming files after keys: Prefix, the encoded key, Suffix.
type Scheme struct {
	// Prefix and Suffix surround the encoded key, e.g. "cronlock_" and ".prom".
	Prefix, Suffix string
	// Plain lists the bytes, besides A-Z a-z 0-9, that are written as they are. It must
	// not hold '%' or '=', which the encoding itself uses, nor '/' or NUL.
	Plain string
	// MaxLen is the longest encoded key written whole; a longer one is hashed.
	MaxLen int
	// HashedCut is how many encoded bytes a hashed name keeps (one or two fewer when the
	// cut would split a %XX) before its "=" and hex digits. It is below MaxLen.
	HashedCut int
}

// Encode returns the file name of key under s.
func (s Scheme) Encode(key string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if s.plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	enc := b.String()
	if len(enc) > s.MaxLen {
		cut := min(s.HashedCut, len(enc))
		for cut > 0 && (enc[cut-1] == '%' || cut >= 2 && enc[cut-2] == '%') { // do not split a %XX
			cut--
		}
		sum := sha256.Sum256([]byte(key))
		enc = enc[:cut] + "=" + hex.EncodeToString(sum[:16])
	}
	return s.Prefix + enc + s.Suffix
}

// Decode returns the key whose file name under s is name. ok is false for a hashed name
// (only the file's content can tell its key) and for any name Encode does not return.
func (s Scheme) Decode(name string) (key string, ok bool) {
	enc, ok := strings.CutPrefix(name, s.Prefix)
	if ok {
		enc, ok = strings.CutSuffix(enc, s.Suffix)
	}
	if !ok || strings.Contains(enc, "=") {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(enc))
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(enc) {
			return "", false
		}
		hi, lo := unhex(enc[i+1]), unhex(enc[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	// The check refuses whatever Encode would write otherwise: lowercase hex, a plain
	// byte escaped, an escaped byte left plain.
	if key = b.String(); s.Encode(key) != name {
		return "", false
	}
	return key, true
}

// plain reports whether c is written as it is.
func (s Scheme) plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(s.Plain, c) >= 0
}

// unhex is the value of hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	}
	return -1
}
