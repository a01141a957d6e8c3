package cmd

// Fuzz targets for the parsers and renderers of the cmd package: durations, the config
// file and terminal escaping (the history table and JSON lines are fuzzed in package
// runview, sizes in package sizes). Without -fuzz they run their seeds (f.Add and
// testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzConfigFile$' -fuzztime 60s ./cmd/

import (
	"testing"
	"time"

	"cronlock/durations"
	"cronlock/internal/fuzzcheck"
)

// FuzzParseDuration: an accepted duration is ≥ 0 and reads back from its own String();
// a refused one gets a non-empty message that is safe to print whatever the input.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "30m", "1h30m", "0", " 60s ", "1.5h", "-1s", "-0", "+5s", "1", "",
		"s", "1e3s", "9223372036854775807ns", "9223372036854775808ns", "2562047h47m16.854775807s",
		"2562048h", "1µs", "1us", ".5s", "5.s", "\x1b[2J", "1s\x00", "1h\n", "0x10s", "∞",
		"2d", "1d12h", "-1d", "0d", "36500d", "1.5d", "d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := durations.Parse(s)
		var pos time.Duration
		perr := durationValue{d: &pos, positive: true}.Set(s)
		if err != nil {
			if msg := err.Error(); msg == "" || !fuzzcheck.Printable(msg, false) {
				t.Fatalf("durations.Parse(%q): error %q", s, msg)
			}
			if perr == nil {
				t.Fatalf("durationValue.Set(%q) accepted what durations.Parse refused", s)
			}
			return
		}
		if d < 0 {
			t.Fatalf("durations.Parse(%q) = %v", s, d)
		}
		if back, err := durations.Parse(d.String()); err != nil || back != d {
			t.Fatalf("durations.Parse(%q) = %v, whose String reads back as %v, %v", s, d, back, err)
		}
		if (perr == nil) != (d > 0) || perr == nil && pos != d {
			t.Fatalf("positive durationValue.Set(%q) = %v, %v; durations.Parse = %v", s, pos, perr, d)
		}
	})
}
