package durations

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Table tests of the parsers. FuzzParseDuration (cmd/fuzz_test.go) adds what no table
// can: any input at all is refused with a printable message or accepted as a duration ≥ 0,
// and the flag agrees with the parser.

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"90s", 90 * time.Second, ""},
		{"30m", 30 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{" 60s ", time.Minute, ""},
		{"0", 0, ""},
		{"0s", 0, ""},
		{"2562047h47m16.854775807s", math.MaxInt64, ""},
		{"-1s", 0, `"-1s" is negative`},
		{"90", 0, `"90" is not a duration; write it like 90s, 30m, 1h30m, 2d or 1d12h`},
		{"banana", 0, "not a duration"},
		{"", 0, "not a duration"},
		{"2562048h", 0, "not a duration"},
		// Every duration takes days too, as --since does.
		{"2d", 48 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{" 1d ", 24 * time.Hour, ""},
		{"0d", 0, ""},
		{"7d30m15s", 7*24*time.Hour + 30*time.Minute + 15*time.Second, ""},
		{"36500d", 36500 * 24 * time.Hour, ""},
		{"-1d", 0, `"-1d" is negative`},
		{"-1d12h", 0, "negative"},
		{"1.5d", 0, "not a duration"},
		{"1h2d", 0, "not a duration"},
		{"2 d", 0, "not a duration"},
		{"1w", 0, "not a duration"},
		{"36501d", 0, `"36501d" is more than 100 years`},
		{"99999999999999999999d", 0, "more than 100 years"},
		{"36500d2562047h", 0, "not a duration"},
	} {
		got, err := Parse(c.in)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Parse(%q) = %v, %v; want an error saying %q", c.in, got, err, c.err)
		}
	}
}

func TestParseAgo(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * day, true},
		{"1d12h", 36 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"2d30m15s", 2*day + 30*time.Minute + 15*time.Second, true},
		{"0d", 0, true},
		{"0s", 0, true},
		{"0", 0, true},
		{"36500d", 36500 * day, true}, // 100 years, the most days it takes
		{"36501d", 0, false},
		{"99999999999999999999d", 0, false},
		{"36500d1686047h", 36500*day + 1686047*time.Hour, true},
		{"36500d1686048h", 0, false}, // beyond time.Duration: it would wrap round to negative
		{"36500d2562047h", 0, false},
		{"", 0, false},
		{"d", 0, false},
		{"7", 0, false},
		{"7x", 0, false},
		{"1.5d", 0, false},
		{"-1h", 0, false},
		{"-3d", 0, false},
		{"1d-1h", 0, false},
		{"1d 12h", 0, false},
		{"1w", 0, false},
		{"yesterday", 0, false},
		{"garbage", 0, false},
	} {
		got, ok := parseAgo(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("parseAgo(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2025, 6, 10, 12, 0, 0, 0, time.UTC)
	cest := time.FixedZone("CEST", 2*3600)
	// Every layout of whenLayouts, read in a local zone (CEST) and in UTC; RFC 3339 keeps
	// its own zone in both.
	for _, c := range []struct {
		in         string
		local, utc time.Time
	}{
		{"2025-06-01T15:04:05Z", time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC), time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC)},
		{"2025-06-01T15:04:05.25+05:00", time.Date(2025, 6, 1, 10, 4, 5, 25e7, time.UTC), time.Date(2025, 6, 1, 10, 4, 5, 25e7, time.UTC)},
		{"2025-06-01", time.Date(2025, 6, 1, 0, 0, 0, 0, cest), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"2025-06-01 15:04", time.Date(2025, 6, 1, 15, 4, 0, 0, cest), time.Date(2025, 6, 1, 15, 4, 0, 0, time.UTC)},
		{"2025-06-01T15:04", time.Date(2025, 6, 1, 15, 4, 0, 0, cest), time.Date(2025, 6, 1, 15, 4, 0, 0, time.UTC)},
		{"2025-06-01 15:04:05", time.Date(2025, 6, 1, 15, 4, 5, 0, cest), time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC)},
		{"2025-06-01T15:04:05", time.Date(2025, 6, 1, 15, 4, 5, 0, cest), time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC)},
		{" 2025-06-01 ", time.Date(2025, 6, 1, 0, 0, 0, 0, cest), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		// A duration is that long before now, whatever the zone.
		{"36h", now.Add(-36 * time.Hour), now.Add(-36 * time.Hour)},
		{" 1d12h ", now.Add(-36 * time.Hour), now.Add(-36 * time.Hour)},
		// Beyond what the history stores (Unix nanoseconds): the farthest storable time.
		{"2999-01-01", time.Unix(0, math.MaxInt64), time.Unix(0, math.MaxInt64)},
		{"1000-01-01", time.Unix(0, math.MinInt64), time.Unix(0, math.MinInt64)},
	} {
		for _, z := range []struct {
			loc  *time.Location
			want time.Time
		}{{cest, c.local}, {time.UTC, c.utc}} {
			got, err := parseWhen(c.in, now, z.loc)
			if err != nil || !got.Equal(z.want) {
				t.Errorf("parseWhen(%q) in %v = %v, %v; want %v", c.in, z.loc, got, err, z.want)
			}
		}
	}
	for _, in := range []string{"", "yesterday", "-1h", "7", "2025-13-01", "2025-06-31", "2025-06-01 25:00",
		"2025/06/01", "01.06.2025", "2025-06-01 15", "2025-06-01T15:04:05+2"} {
		if got, err := parseWhen(in, now, cest); err == nil || !strings.HasPrefix(err.Error(), "want a duration ago (36h") {
			t.Errorf("parseWhen(%q) = %v, %v; want an error listing the forms", in, got, err)
		}
	}
	if _, err := parseWhen("1000000d", now, cest); err == nil || !strings.HasPrefix(err.Error(), "more than 100 years ago") {
		t.Errorf("parseWhen(1000000d): %v; want it to say more than 100 years ago", err)
	}
}

func TestSinceUntil(t *testing.T) {
	now := time.Date(2025, 6, 10, 12, 0, 0, 0, time.UTC)
	cest := time.FixedZone("CEST", 2*3600)
	saved := time.Local
	time.Local = cest
	t.Cleanup(func() { time.Local = saved })
	for _, c := range []struct {
		in   string
		utc  bool
		want time.Time
	}{
		{"36h", false, now.Add(-36 * time.Hour)},
		{"90m", false, now.Add(-90 * time.Minute)},
		{"7d", false, now.Add(-7 * 24 * time.Hour)},
		{"1d12h", false, now.Add(-36 * time.Hour)},
		{"0s", false, now},
		{"2025-06-01", false, time.Date(2025, 6, 1, 0, 0, 0, 0, cest)},
		{"2025-06-01", true, time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"2025-06-01 15:04", false, time.Date(2025, 6, 1, 15, 4, 0, 0, cest)},
		{"2025-06-01T15:04", true, time.Date(2025, 6, 1, 15, 4, 0, 0, time.UTC)},
		{"2025-06-01T15:04:05", false, time.Date(2025, 6, 1, 15, 4, 5, 0, cest)},
		{"2025-06-01T15:04:05Z", false, time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC)},
		{"2025-06-01T15:04:05.5+05:00", true, time.Date(2025, 6, 1, 10, 4, 5, 5e8, time.UTC)},
		{"2999-01-01", false, time.Unix(0, math.MaxInt64)}, // beyond what the history stores
		{"1000-01-01", false, time.Unix(0, math.MinInt64)},
	} {
		got, _, err := SinceUntil(c.in, "", c.utc, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("--since %q (utc %v) = %v, %v; want %v", c.in, c.utc, got, err, c.want)
		}
		if _, got, err := SinceUntil("", c.in, c.utc, now); err != nil || !got.Equal(c.want) {
			t.Errorf("--until %q = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, c := range [][2]string{
		{"yesterday", ""}, {"-1h", ""}, {"7", ""}, {"7x", ""}, {"d", ""}, {"2025-13-01", ""},
		{"2025-06-01 25:00", ""}, {"", "soon"}, {"1h", "2h"}, {"2025-06-02", "2025-06-01"},
	} {
		_, _, err := SinceUntil(c[0], c[1], false, now)
		if err == nil {
			t.Errorf("--since %q --until %q: no error", c[0], c[1])
		}
	}
	_, _, err := SinceUntil("yesterday", "", false, now)
	if msg := err.Error(); !strings.HasPrefix(msg, `--since "yesterday": want a duration ago (36h`) || !strings.Contains(msg, "2025-06-01 15:04") {
		t.Errorf("message: %s", msg)
	}
}

func TestParseAge(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"90d", 90 * 24 * time.Hour, ""},
		{" 1d ", 24 * time.Hour, ""},
		{"0d", 0, ""},
		{"36h", 36 * time.Hour, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"0", 0, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"1.5d", 0, "not a duration"},
		{"-3d", 0, "not a duration"},
		{"-1h", 0, "not a duration"},
		{"99999999d", 0, "more than 100 years"},
		{"36500d2562047h", 0, "not a duration"},
		{"d", 0, "not a duration"},
		{"90", 0, "not a duration"},
		{"soon", 0, "not a duration"},
	} {
		got, err := ParseAge(c.in)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseAge(%q) error %v, want one saying %q", c.in, err, c.err)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {time.Minute, "60s"}, {2 * time.Second, "2s"}, {5 * time.Minute, "5m"},
		{time.Hour, "1h"}, {24 * time.Hour, "24h"}, {7 * 24 * time.Hour, "7d"},
		{90 * time.Second, "90s"}, {1500 * time.Millisecond, "1.5s"}, {36 * time.Hour, "36h"},
	} {
		got := Format(tc.d)
		if got != tc.want {
			t.Errorf("Format(%v) = %q; want %q", tc.d, got, tc.want)
		}
		if back, err := Parse(got); err != nil || back != tc.d {
			t.Errorf("Parse(Format(%v)) = %v, %v; want it back", tc.d, back, err)
		}
	}
}
