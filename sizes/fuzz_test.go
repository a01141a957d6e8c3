package sizes

// A fuzz target for Parse and Format: without -fuzz it runs its seeds as an ordinary,
// fast test.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s ./sizes/

import (
	"testing"

	"cronlock/internal/fuzzcheck"
)

// FuzzParse: an accepted size is 0 to the limit and reads back from Format; a refused
// one gets a non-empty message that is safe to print.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "65536", "64KiB", "64K", "64k", "1MiB", "1M", "64MiB", "65MiB", "1GiB",
		"1GB", "10B", " 8 KiB ", "KiB", "-1", "+1", "1.5K", "1e3", "", "9223372036854775807",
		"9223372036854775807KiB", "67108864", "67108865", "0x10", "64kib", "1KiBB", "1 K i B", "\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s, limit)
		if err != nil {
			if msg := err.Error(); msg == "" || !fuzzcheck.Printable(msg, false) {
				t.Fatalf("Parse(%q): error %q", s, msg)
			}
			return
		}
		if n < 0 || n > limit {
			t.Fatalf("Parse(%q) = %d", s, n)
		}
		if back, err := Parse(Format(n), limit); err != nil || back != n {
			t.Fatalf("Parse(%q) = %d, formatted %q, reads back as %d, %v", s, n, Format(n), back, err)
		}
	})
}
