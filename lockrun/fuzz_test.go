package lockrun

// Fuzz targets for every parser of the lockrun package: keys, Redis URLs (and their
// redaction), lock values read from Redis, local lock records and lock file names.
// Without -fuzz they run their seeds (f.Add and testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzRedisURLPassword$' -fuzztime 60s ./lockrun/

import (
	"strings"
	"testing"
	"unicode/utf8"

	"cronlock/internal/fuzzcheck"
)

// FuzzValidKey: an accepted key is 1–200 bytes of the charset (so it makes exactly one
// Redis hash tag and a lock file name that stays in its folder); a refused one gets a
// non-empty message that is safe to print.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"billing", "a", "daily/billing@host:1.0_x-y", "", " ", "a b",
		"../../etc/x", "{tag}", "a\x00b", "\x1b[2J", "é", "\xff", strings.Repeat("k", MaxKeyLen),
		strings.Repeat("k", MaxKeyLen+1), strings.Repeat("/", MaxKeyLen), "*", "a?b", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidKey(key)
		if err != nil {
			if err.Error() == "" || fuzzcheck.HasControl(err.Error()) || !utf8.ValidString(err.Error()) {
				t.Fatalf("ValidKey(%q) error not printable: %q", key, err.Error())
			}
			return
		}
		if len(key) < 1 || len(key) > MaxKeyLen {
			t.Fatalf("ValidKey accepted %q of length %d", key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-:/@", rune(key[i])) {
				t.Fatalf("ValidKey accepted %q with %q", key, key[i])
			}
		}
	})
}
