package schedule

import (
	"strings"
	"testing"
	"time"
)

// ticks lists the ticks in (from, to] as local times with their offsets, by Next; and
// checks that Prev agrees at each tick and just before the next.
func ticks(t *testing.T, s *Schedule, from, to time.Time) string {
	t.Helper()
	var out []string
	prev := s.Prev(from)
	for tick := s.Next(from); !tick.After(to); tick = s.Next(tick) {
		if got := s.Prev(tick); !got.Equal(tick) {
			t.Errorf("%q: Prev(%s) = %s, want the tick itself", s, tick, got)
		}
		if got := s.Prev(tick.Add(-time.Second)); !got.Equal(prev) {
			t.Errorf("%q: Prev(%s - 1s) = %s, want the tick before, %s", s, tick, got, prev)
		}
		out = append(out, tick.In(s.Location()).Format("01-02 15:04Z07:00"))
		prev = tick
	}
	return strings.Join(out, " ")
}

func local(t *testing.T, zone, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDST: Debian cron's rules on the days the clocks change. Berlin 2026: 02:00 CET →
// 03:00 CEST on Mar 29, 03:00 CEST → 02:00 CET on Oct 25. New York 2026: 02:00 EST →
// 03:00 EDT on Mar 8, 02:00 EDT → 01:00 EST on Nov 1.
func TestDST(t *testing.T) {
	tests := []struct {
		name, expr, zone, from, to, want string
	}{
		// A fixed-time job runs once on both days: at the end of the gap, and at the first
		// of the two 02:30s.
		{"daily 02:30, spring", "30 2 * * *", "Europe/Berlin", "2026-03-28 00:00", "2026-03-31 00:00",
			"03-28 02:30+01:00 03-29 03:00+02:00 03-30 02:30+02:00"},
		{"daily 02:30, fall", "30 2 * * *", "Europe/Berlin", "2026-10-24 00:00", "2026-10-27 00:00",
			"10-24 02:30+02:00 10-25 02:30+02:00 10-26 02:30+01:00"},
		{"daily 02:30, spring", "30 2 * * *", "America/New_York", "2026-03-07 00:00", "2026-03-10 00:00",
			"03-07 02:30-05:00 03-08 03:00-04:00 03-09 02:30-04:00"},
		{"daily 01:30, fall", "30 1 * * *", "America/New_York", "2026-10-31 00:00", "2026-11-03 00:00",
			"10-31 01:30-04:00 11-01 01:30-04:00 11-02 01:30-05:00"},
		{"daily 02:30 untouched by fall", "30 2 * * *", "America/New_York", "2026-10-31 00:00", "2026-11-03 00:00",
			"10-31 02:30-04:00 11-01 02:30-05:00 11-02 02:30-05:00"},
		// Several skipped times become one tick.
		{"02:00, 02:59 and 03:00 in spring", "0,59 2,3 * * *", "Europe/Berlin", "2026-03-29 00:00", "2026-03-29 05:00",
			"03-29 03:00+02:00 03-29 03:59+02:00"},
		{"every minute of 2 fixed, fall", "0-59/20 2 * * *", "Europe/Berlin", "2026-10-25 00:00", "2026-10-25 05:00",
			"10-25 02:00+02:00 10-25 02:20+02:00 10-25 02:40+02:00"},
		// Wildcards match wall times as they happen: both passes of the repeated hour,
		// nothing in the skipped one.
		{"*/15, fall", "*/15 * * * *", "Europe/Berlin", "2026-10-25 01:50", "2026-10-25 03:10",
			"10-25 02:00+02:00 10-25 02:15+02:00 10-25 02:30+02:00 10-25 02:45+02:00 " +
				"10-25 02:00+01:00 10-25 02:15+01:00 10-25 02:30+01:00 10-25 02:45+01:00 10-25 03:00+01:00"},
		{"*/15, spring", "*/15 * * * *", "Europe/Berlin", "2026-03-29 01:20", "2026-03-29 03:20",
			"03-29 01:30+01:00 03-29 01:45+01:00 03-29 03:00+02:00 03-29 03:15+02:00"},
		{"*/15, fall", "*/15 * * * *", "America/New_York", "2026-11-01 00:50", "2026-11-01 02:10",
			"11-01 01:00-04:00 11-01 01:15-04:00 11-01 01:30-04:00 11-01 01:45-04:00 " +
				"11-01 01:00-05:00 11-01 01:15-05:00 11-01 01:30-05:00 11-01 01:45-05:00 11-01 02:00-05:00"},
		{"*/15, spring", "*/15 * * * *", "America/New_York", "2026-03-08 01:40", "2026-03-08 03:20",
			"03-08 01:45-05:00 03-08 03:00-04:00 03-08 03:15-04:00"},
		{"*/30 in hour 2, fall", "*/30 2 * * *", "Europe/Berlin", "2026-10-25 00:00", "2026-10-25 05:00",
			"10-25 02:00+02:00 10-25 02:30+02:00 10-25 02:00+01:00 10-25 02:30+01:00"},
		{"*/30 in hour 2, spring", "*/30 2 * * *", "Europe/Berlin", "2026-03-28 12:00", "2026-03-30 12:00",
			"03-30 02:00+02:00 03-30 02:30+02:00"},
		{"30 past every hour, spring", "30 * * * *", "Europe/Berlin", "2026-03-29 00:00", "2026-03-29 04:00",
			"03-29 00:30+01:00 03-29 01:30+01:00 03-29 03:30+02:00"},
		{"@hourly, fall", "@hourly", "Europe/Berlin", "2026-10-25 01:30", "2026-10-25 03:30",
			"10-25 02:00+02:00 10-25 02:00+01:00 10-25 03:00+01:00"},
		// A zone that changes at midnight: @daily in the gap runs at 01:00.
		{"@daily, spring at midnight", "@daily", "America/Sao_Paulo", "2018-11-03 12:00", "2018-11-05 12:00",
			"11-04 01:00-02:00 11-05 00:00-02:00"},
		{"@daily, fall at midnight", "@daily", "America/Sao_Paulo", "2019-02-16 12:00", "2019-02-18 12:00",
			"02-17 00:00-03:00 02-18 00:00-03:00"},
		{"23:30, fall at midnight", "30 23 * * *", "America/Sao_Paulo", "2019-02-16 12:00", "2019-02-17 12:00",
			"02-16 23:30-02:00"},
		// Half-hour changes (Lord Howe: +10:30 ↔ +11 at 02:00).
		{"02:15 in a half-hour gap", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00", "2026-10-05 12:00",
			"10-04 02:30+11:00 10-05 02:15+11:00"},
		{"01:45 in a half-hour repeat", "45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00", "2026-04-06 12:00",
			"04-05 01:45+11:00 04-06 01:45+10:30"},
		// Samoa skipped Dec 30, 2011: a jump of more than 3 hours is a clock change to
		// Debian's cron, which then runs nothing of the skipped day.
		{"a skipped day", "0 12 * * *", "Pacific/Apia", "2011-12-29 00:00", "2011-12-31 23:00",
			"12-29 12:00-10:00 12-31 12:00+14:00"},
		{"hourly over a skipped day", "0 */8 * * *", "Pacific/Apia", "2011-12-29 15:00", "2011-12-31 09:00",
			"12-29 16:00-10:00 12-31 00:00+14:00 12-31 08:00+14:00"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, tc.zone)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ticks(t, s, local(t, tc.zone, tc.from), local(t, tc.zone, tc.to))
		if got != tc.want {
			t.Errorf("%s: %q in %s from %s to %s:\n got %s\nwant %s", tc.name, tc.expr, tc.zone, tc.from, tc.to, got, tc.want)
		}
	}
}

// TestPrevDST: the tick of a run that starts at now, on change days.
func TestPrevDST(t *testing.T) {
	tests := []struct{ expr, zone, now, want string }{
		// Spring, Berlin: 02:30 does not exist; the run at 03:00 and later has the 03:00 tick.
		{"30 2 * * *", "Europe/Berlin", "2026-03-29T00:59:59Z", "2026-03-28T01:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z", "2026-03-29T01:00:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-03-29T12:00:00Z", "2026-03-29T01:00:00Z"},
		// Fall, Berlin: a run during the second 02:30-03:00 still has the first 02:30.
		{"30 2 * * *", "Europe/Berlin", "2026-10-25T01:45:00Z", "2026-10-25T00:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-10-25T01:30:00Z", "2026-10-25T00:30:00Z"},
		{"*/15 * * * *", "Europe/Berlin", "2026-10-25T01:10:00Z", "2026-10-25T01:00:00Z"}, // 02:00 CET
		{"*/15 * * * *", "Europe/Berlin", "2026-10-25T00:59:00Z", "2026-10-25T00:45:00Z"}, // 02:45 CEST
		{"55 * * * *", "Europe/Berlin", "2026-10-25T01:10:00Z", "2026-10-25T00:55:00Z"},   // 02:55 CEST, civil later than now's 02:10
		{"55 2 * * *", "Europe/Berlin", "2026-10-25T01:10:00Z", "2026-10-25T00:55:00Z"},
		{"5 2 * * *", "Europe/Berlin", "2026-10-25T01:10:00Z", "2026-10-25T00:05:00Z"}, // not 02:05 CET
		// New York.
		{"30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z"}, // 03:00 EDT
		{"30 1 * * *", "America/New_York", "2026-11-01T06:45:00Z", "2026-11-01T05:30:00Z"}, // 01:45 EST → 01:30 EDT
		{"*/15 * * * *", "America/New_York", "2026-11-01T06:20:00Z", "2026-11-01T06:15:00Z"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.Prev(mustTime(t, tc.now)), mustTime(t, tc.want); !got.Equal(want) {
			t.Errorf("%q in %s: Prev(%s) = %s (%s), want %s (%s)", tc.expr, tc.zone, tc.now,
				got, got.In(s.Location()), want, want.In(s.Location()))
		}
	}
}

// TestRuleYears: past a zone file's last transition Go computes offsets from the zone's
// rule, and go1.26's ZoneBounds ends a leap year a day early there (2040-12-31T00:00Z in
// Europe/London), which once made Next loop forever.
func TestRuleYears(t *testing.T) {
	tests := []struct{ expr, zone, now, prev, next string }{
		{"*/15 * * * *", "Europe/London", "2040-12-31T00:00:00Z", "2040-12-31T00:00:00Z", "2040-12-31T00:15:00Z"},
		{"*/15 * * * *", "Europe/London", "2040-12-31T12:07:00Z", "2040-12-31T12:00:00Z", "2040-12-31T12:15:00Z"},
		{"0 0 * * *", "Europe/London", "2040-12-30T23:59:59Z", "2040-12-30T00:00:00Z", "2040-12-31T00:00:00Z"},
		{"0 0 1 1 *", "Europe/Berlin", "2040-12-31T12:00:00Z", "2039-12-31T23:00:00Z", "2040-12-31T23:00:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2044-03-27T12:00:00Z", "2044-03-27T01:00:00Z", "2044-03-28T00:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2044-10-30T01:45:00Z", "2044-10-30T00:30:00Z", "2044-10-31T01:30:00Z"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		now := mustTime(t, tc.now)
		if got := s.Prev(now); !got.Equal(mustTime(t, tc.prev)) {
			t.Errorf("%q in %s: Prev(%s) = %s, want %s", tc.expr, tc.zone, tc.now, got, tc.prev)
		}
		if got := s.Next(now); !got.Equal(mustTime(t, tc.next)) {
			t.Errorf("%q in %s: Next(%s) = %s, want %s", tc.expr, tc.zone, tc.now, got, tc.next)
		}
	}
}
