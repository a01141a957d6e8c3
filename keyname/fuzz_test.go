package keyname

// Fuzz targets proving that Encode and Decode write and read exactly the names that
// cronlock's two encoders did before this package existed: frozenLockName,
// frozenLockKey and frozenMetricsName below are those encoders as they were, unchanged
// but for their names and the key validation lockrun still does itself. Do not edit them:
// they are the reference the names on disk were made with.
//
//	go test -run '^$' -fuzz '^FuzzEncode$' -fuzztime 60s ./keyname/

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
)

// frozenLockName is lockrun's localFileName as it was.
func frozenLockName(key string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key) + 5)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if frozenLockPlainByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	enc := b.String()
	if len(enc)+len(".lock") <= 255 {
		return enc + ".lock"
	}
	cut := 200
	// Do not split a %XX triple.
	for cut > 0 && (enc[cut-1] == '%' || (cut >= 2 && enc[cut-2] == '%')) {
		cut--
	}
	sum := sha256.Sum256([]byte(key))
	return enc[:cut] + "=" + hex.EncodeToString(sum[:16]) + ".lock"
}

func frozenLockPlainByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// frozenLockKey is lockrun's localKeyFromName as it was, without its ValidKey check.
func frozenLockKey(name string) (key string, ok bool) {
	enc, found := strings.CutSuffix(name, ".lock")
	if !found || strings.Contains(enc, "=") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(enc) {
			return "", false
		}
		v, err := strconv.ParseUint(enc[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	key = b.String()
	if frozenLockName(key) != name {
		return "", false
	}
	return key, true
}

// frozenMetricsName is cmd's metricsFileName as it was.
func frozenMetricsName(key string) string {
	const hexdigits = "0123456789ABCDEF"
	const maxEncoded = 200
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	enc := b.String()
	if len(enc) > maxEncoded {
		cut := maxEncoded - 33
		for cut >= 2 && (enc[cut-1] == '%' || enc[cut-2] == '%') { // do not split a %XX
			cut--
		}
		sum := sha256.Sum256([]byte(key))
		enc = enc[:cut] + "=" + hex.EncodeToString(sum[:16])
	}
	return "cronlock_" + enc + ".prom"
}

// TestEncodeMatchesFrozen sweeps the lengths around both limits and every alignment of
// the cuts with %XX triples, for keys of plain, escaped and scheme-dependent bytes, and
// compares both schemes with the frozen encoders.
func TestEncodeMatchesFrozen(t *testing.T) {
	for _, head := range []string{"", "a", "ab", ".", "a.", "/", "=", "%"} {
		for _, fill := range []string{"/", ".", "a", "a/", "/.", "\xff"} {
			for n := 0; len(head)+n*len(fill) <= 260; n++ {
				for _, tail := range []string{"", "b", "/", "."} {
					key := head + r(fill, n) + tail
					if got, want := lockFiles.Encode(key), frozenLockName(key); got != want {
						t.Fatalf("lock files: Encode(%q) = %q, was %q", key, got, want)
					}
					if got, want := metricsFiles.Encode(key), frozenMetricsName(key); got != want {
						t.Fatalf("metrics files: Encode(%q) = %q, was %q", key, got, want)
					}
				}
			}
		}
	}
}

// FuzzEncode: both schemes name every key exactly as the frozen encoders did, and a
// whole (unhashed) name decodes back to its key.
func FuzzEncode(f *testing.F) {
	for _, tt := range nameTests {
		f.Add(tt.key)
	}
	f.Add(r("%", 100))
	f.Add(r("ab/", 70))
	f.Add(r("/", 80) + "=")
	f.Fuzz(func(t *testing.T, key string) {
		for _, c := range []struct {
			s      Scheme
			frozen func(string) string
		}{{lockFiles, frozenLockName}, {metricsFiles, frozenMetricsName}} {
			name := c.s.Encode(key)
			if want := c.frozen(key); name != want {
				t.Fatalf("%+v: Encode(%q) = %q, was %q", c.s, key, name, want)
			}
			back, ok := c.s.Decode(name)
			if hashed := strings.Contains(name, "="); ok == hashed || ok && back != key {
				t.Fatalf("%+v: Decode(Encode(%q) = %q) = %q, %v", c.s, key, name, back, ok)
			}
		}
	})
}

// FuzzDecode: lock file names decode exactly as they did; under either scheme, a name
// decodes only to a key whose name it is.
func FuzzDecode(f *testing.F) {
	for _, tt := range nameTests {
		f.Add(tt.lock)
		f.Add(tt.prom)
	}
	for _, s := range []string{"a%2fb.lock", "a%2F.lock", "%.lock", "%2.lock", "%zz.lock", "%+1.lock",
		"a/b.lock", "a.b.lock", "billing", "x=0123.lock", "%00.lock", "%C3%A9.lock", "a.lock.lock",
		"cronlock_a%2fb.prom", "cronlock_%2E.prom", "cronlock_cronlock_.prom.prom"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		key, ok := lockFiles.Decode(name)
		if fkey, fok := frozenLockKey(name); key != fkey || ok != fok {
			t.Fatalf("lock files: Decode(%q) = %q, %v; was %q, %v", name, key, ok, fkey, fok)
		}
		for _, s := range []Scheme{lockFiles, metricsFiles} {
			key, ok := s.Decode(name)
			if !ok && key != "" || ok && s.Encode(key) != name {
				t.Fatalf("%+v: Decode(%q) = %q, %v", s, name, key, ok)
			}
		}
	})
}
