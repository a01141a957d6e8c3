package cmd

import (
	"errors"
	"strings"
	"testing"
	"time"

	"cronlock/history"
)

// Tests of the duration flags and settings; the parsers' own tables are in package
// durations.

func TestDurationValue(t *testing.T) {
	for _, c := range []struct {
		in       string
		positive bool
		want     time.Duration
		err      string
	}{
		{"90s", false, 90 * time.Second, ""},
		{"90s", true, 90 * time.Second, ""},
		{"0", false, 0, ""},
		{"0", true, 0, "must be more than 0"},
		{"0s", true, 0, "must be more than 0"},
		{"-5s", false, 0, "negative"},
		{"soon", true, 0, "not a duration"},
		{"1d", true, 24 * time.Hour, ""},
		{"0d", true, 0, "must be more than 0"},
	} {
		d := 7 * time.Second // what a failed Set must leave alone
		err := durationValue{d: &d, positive: c.positive}.Set(c.in)
		switch {
		case c.err == "" && (err != nil || d != c.want):
			t.Errorf("Set(%q), positive %v: %v, %v; want %v", c.in, c.positive, d, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || d != 7*time.Second):
			t.Errorf("Set(%q), positive %v: %v, %v; want an error saying %q and 7s kept", c.in, c.positive, d, err, c.err)
		}
	}
	d := 90 * time.Minute
	if v := (durationValue{d: &d}); v.String() != "90m" || v.Type() != "duration" {
		t.Errorf("String %q, Type %q", v.String(), v.Type())
	}
}

func TestParseRetention(t *testing.T) {
	for _, c := range []struct {
		in, source string
		want       time.Duration
		err        string
	}{
		{"", "", history.DefaultRetention, ""},
		{"off", "environment variable CRONLOCK_HISTORY_RETENTION", 0, ""},
		{"OFF", "", 0, ""},
		{"0", "", 0, ""},
		{"30d", "", 30 * 24 * time.Hour, ""},
		{"12h", "", 12 * time.Hour, ""},
		{"never", "environment variable CRONLOCK_HISTORY_RETENTION",
			0, `invalid CRONLOCK_HISTORY_RETENTION: "never" is not a duration; write it like 90d, 36h or 1d12h, or off to keep every run`},
		{"1000000d", "environment variable CRONLOCK_HISTORY_RETENTION",
			0, `invalid CRONLOCK_HISTORY_RETENTION: "1000000d" is more than 100 years; set off to keep every run`},
		{"2w", "/etc/cronlock/cronlock.conf line 3",
			0, `invalid CRONLOCK_HISTORY_RETENTION in /etc/cronlock/cronlock.conf line 3: "2w" is not a duration`},
	} {
		got, err := parseRetention(c.in, c.source)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("parseRetention(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("parseRetention(%q) error %v, want one starting %q", c.in, err, c.err)
		}
	}
}

func TestAgeValue(t *testing.T) {
	var d time.Duration
	v := ageValue{&d}
	if v.String() != "" || v.Type() != "duration" {
		t.Errorf("unset: String %q, Type %q", v.String(), v.Type())
	}
	for _, c := range []struct {
		in, err, str string
		want         time.Duration
	}{
		{in: "90d", want: 90 * 24 * time.Hour, str: "90d"},
		{in: "1d12h", want: 36 * time.Hour, str: "36h0m0s"},
		{in: "48h", want: 48 * time.Hour, str: "2d"},
		{in: "0", err: "must be more than 0"},
		{in: "0d", err: "must be more than 0"},
		{in: "soon", err: `"soon" is not a duration; write it like 90d, 36h or 1d12h`},
	} {
		d = time.Minute // what a failed Set must leave alone
		err := v.Set(c.in)
		switch {
		case c.err == "" && (err != nil || d != c.want || v.String() != c.str):
			t.Errorf("Set(%q): %v (String %q), %v; want %v (%q)", c.in, d, v.String(), err, c.want, c.str)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || d != time.Minute):
			t.Errorf("Set(%q): %v, %v; want an error saying %q and 1m kept", c.in, d, err, c.err)
		}
	}
}

// TestParseSinceUntilUsage: a --since or --until that does not read is a mistake on the
// command line (exit 125, with usage), whatever is wrong with it.
func TestParseSinceUntilUsage(t *testing.T) {
	now := time.Date(2025, 6, 10, 12, 0, 0, 0, time.UTC)
	for _, c := range [][2]string{{"yesterday", ""}, {"", "soon"}, {"2025-06-02", "2025-06-01"}} {
		_, _, err := parseSinceUntil(c[0], c[1], false, now)
		var ue *usageError
		if err == nil || !errors.As(err, &ue) {
			t.Errorf("--since %q --until %q: %v, want a usage error", c[0], c[1], err)
		}
	}
}
