package schedule

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// upcomingText lists n ticks after from as "local [| note]" lines.
func upcomingText(t *testing.T, expr, zone, from string, n int) string {
	t.Helper()
	s, err := Parse(expr, zone)
	if err != nil {
		t.Fatal(err)
	}
	start := local(t, zone, from)
	var b strings.Builder
	for _, u := range s.Upcoming(start, n) {
		if !u.Local.Equal(u.Tick) || u.Tick.Location() != time.UTC || u.In != u.Tick.Sub(start) {
			t.Errorf("%q: tick %v, local %v, in %v: want the same instant, UTC, and the time from %v", expr, u.Tick, u.Local, u.In, start)
		}
		fmt.Fprintf(&b, "%s", u.Local.Format("01-02 15:04 MST"))
		if u.DST != "" {
			b.WriteString(" | " + u.DST)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestUpcoming: the next ticks and what daylight saving does to each, in zones that
// change by an hour (Berlin, New York), by half an hour (Lord Howe), by a day (Samoa,
// 2011), not at all (Tokyo, Kolkata, UTC), and Feb 29 schedules that skip years. The
// ticks are Next's (TestDST checks them against Debian's rules); the notes must say
// what those ticks do: runs at the end of a gap, skipped, runs once or twice.
func TestUpcoming(t *testing.T) {
	for _, c := range []struct {
		expr, zone, from string
		n                int
		want             string
	}{
		{"30 2 * * *", "Europe/Berlin", "2026-03-28 00:00", 3, `
03-28 02:30 CET
03-29 03:00 CEST | 02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00
03-30 02:30 CEST`},
		{"30 2 * * *", "Europe/Berlin", "2026-10-24 00:00", 3, `
10-24 02:30 CEST
10-25 02:30 CEST | 02:30 happens twice on 2026-10-25 in Europe/Berlin (CEST, then CET): runs once, at the first
10-26 02:30 CET`},
		{"*/30 2 * * *", "Europe/Berlin", "2026-03-29 00:00", 2, `
03-30 02:00 CEST | 02:00, 02:30 do not exist on 2026-03-29 in Europe/Berlin: skipped (a * in the minute or hour field: cron runs only wall-clock times that happen)
03-30 02:30 CEST`},
		{"*/30 2 * * *", "Europe/Berlin", "2026-10-25 00:00", 5, `
10-25 02:00 CEST | 02:00 happens twice on 2026-10-25 in Europe/Berlin (CEST, then CET): runs at both; this is the first
10-25 02:30 CEST | 02:30 happens twice on 2026-10-25 in Europe/Berlin (CEST, then CET): runs at both; this is the first
10-25 02:00 CET | 02:00 happens twice on 2026-10-25 in Europe/Berlin (CEST, then CET): runs at both; this is the second
10-25 02:30 CET | 02:30 happens twice on 2026-10-25 in Europe/Berlin (CEST, then CET): runs at both; this is the second
10-26 02:00 CET`},
		{"0,30 2,3 * * *", "Europe/Berlin", "2026-03-29 00:00", 3, `
03-29 03:00 CEST | 02:00, 02:30 do not exist on 2026-03-29 in Europe/Berlin: run once at 03:00, with 03:00's own tick
03-29 03:30 CEST
03-30 02:00 CEST`},
		{"*/20 2 * * *", "America/New_York", "2026-03-08 00:00", 1, `
03-09 02:00 EDT | 02:00, 02:20, 02:40 do not exist on 2026-03-08 in America/New_York: skipped (a * in the minute or hour field: cron runs only wall-clock times that happen)`},
		{"0-59/5 2 * * *", "America/New_York", "2026-03-08 00:00", 1, `
03-08 03:00 EDT | 02:00 to 02:55 (12 times) do not exist on 2026-03-08 in America/New_York: run once at 03:00`},
		{"30 1 * * *", "America/New_York", "2026-10-31 12:00", 2, `
11-01 01:30 EDT | 01:30 happens twice on 2026-11-01 in America/New_York (EDT, then EST): runs once, at the first
11-02 01:30 EST`},
		{"30 * * * *", "America/New_York", "2026-11-01 00:00", 4, `
11-01 00:30 EDT
11-01 01:30 EDT | 01:30 happens twice on 2026-11-01 in America/New_York (EDT, then EST): runs at both; this is the first
11-01 01:30 EST | 01:30 happens twice on 2026-11-01 in America/New_York (EDT, then EST): runs at both; this is the second
11-01 02:30 EST`},
		// Lord Howe: +10:30 ↔ +11 at 02:00, half an hour each way.
		{"15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00", 2, `
10-04 02:30 +11 | 02:15 does not exist on 2026-10-04 in Australia/Lord_Howe: runs at 02:30
10-05 02:15 +11`},
		{"45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00", 2, `
04-05 01:45 +11 | 01:45 happens twice on 2026-04-05 in Australia/Lord_Howe (+11, then +1030): runs once, at the first
04-06 01:45 +1030`},
		{"*/20 1 * * *", "Australia/Lord_Howe", "2026-04-05 00:00", 5, `
04-05 01:00 +11
04-05 01:20 +11
04-05 01:40 +11 | 01:40 happens twice on 2026-04-05 in Australia/Lord_Howe (+11, then +1030): runs at both; this is the first
04-05 01:40 +1030 | 01:40 happens twice on 2026-04-05 in Australia/Lord_Howe (+11, then +1030): runs at both; this is the second
04-06 01:00 +1030`},
		{"0 12 * * *", "Pacific/Apia", "2011-12-29 00:00", 2, `
12-29 12:00 -10
12-31 12:00 +14 | 12:00 does not exist on 2011-12-30 in Pacific/Apia: skipped (a change of more than 3 hours: cron runs only the time it lands on)`},
		// No daylight saving: nothing to say, in a whole and a half-hour offset.
		{"30 2 * * *", "Asia/Tokyo", "2026-03-28 00:00", 2, `
03-28 02:30 JST
03-29 02:30 JST`},
		{"30 2 * * *", "Asia/Kolkata", "2026-10-24 00:00", 2, `
10-24 02:30 IST
10-25 02:30 IST`},
		// Feb 29: only leap years; with a restricted weekday OR-ed (Vixie), every Monday
		// of February too; with a * weekday step AND-ed, only a Feb 29 that is a Sunday.
		{"0 0 29 2 *", "Asia/Tokyo", "2026-12-02 00:00", 3, `
02-29 00:00 JST
02-29 00:00 JST
02-29 00:00 JST`},
		{"0 0 29 2 1", "UTC", "2027-02-20 00:00", 3, `
02-22 00:00 UTC
02-07 00:00 UTC
02-14 00:00 UTC`},
	} {
		got := upcomingText(t, c.expr, c.zone, c.from, c.n)
		if want := strings.TrimPrefix(c.want, "\n") + "\n"; got != want {
			t.Errorf("%q in %s after %s:\n got:\n%s\nwant:\n%s", c.expr, c.zone, c.from, got, want)
		}
	}
}

// TestUpcomingYears: the years of the Feb 29 ticks (the format above hides them), and a
// Feb 29 that must be a Sunday, which comes every 28 years.
func TestUpcomingYears(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"0 0 29 2 *", "2028-02-29 2032-02-29 2036-02-29"},
		{"0 0 29 2 */7", "2032-02-29 2060-02-29 2088-02-29"},
	} {
		s, err := Parse(c.expr, "UTC")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range s.Upcoming(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), 3) {
			got = append(got, u.Local.Format("2006-01-02"))
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%q: %s, want %s", c.expr, g, c.want)
		}
	}
}

func TestFormatIn(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"}, {45 * time.Second, "45s"}, {25*time.Minute + 20*time.Second, "25m"},
		{time.Hour, "1h"}, {2*time.Hour + 30*time.Minute, "2h 30m"}, {26 * time.Hour, "1d 2h"},
		{400 * 24 * time.Hour, "1y 35d"}, {math.MaxInt64, "over 292y"},
	} {
		if got := FormatIn(c.d); got != c.want {
			t.Errorf("FormatIn(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestParseFrom(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct{ in, want string }{
		{"", "2026-12-02T06:00:00Z"},
		{"now", "2026-12-02T06:00:00Z"},
		{"2026-03-29T01:00:00Z", "2026-03-29T01:00:00Z"},
		{"2026-03-29T03:00:00+02:00", "2026-03-29T01:00:00Z"},
		{"2026-03-29 01:30", "2026-03-29T00:30:00Z"},
		{"2026-03-29T01:30:15", "2026-03-29T00:30:15Z"},
		{"2026-07-01", "2026-06-30T22:00:00Z"},
		{"2026-10-25 02:30", "2026-10-25T00:30:00Z"}, // twice: the first, CEST
		{"2026-10-25 03:00", "2026-10-25T02:00:00Z"},
		{"2026-10-25 01:59", "2026-10-24T23:59:00Z"},
		{"tomorrow", ""},
		{"2026-13-01", ""},
	} {
		got, err := ParseFrom(c.in, berlin, now)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("ParseFrom(%q) = %v, want an error", c.in, got)
		case c.want == "" && !strings.Contains(err.Error(), "RFC 3339"):
			t.Errorf("ParseFrom(%q): %v, want the forms listed", c.in, err)
		case c.want != "" && (err != nil || got.UTC().Format(time.RFC3339) != c.want):
			t.Errorf("ParseFrom(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
}

// TestNotesComplete checks Note against the zone itself, over years of change days: a
// tick whose wall-clock minute happens twice says so, and which of the two it is; every
// matching wall-clock minute that does not exist is named by the note of a tick.
func TestNotesComplete(t *testing.T) {
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Apia", "Asia/Tokyo"}
	exprs := []string{"30 2 * * *", "*/15 * * * *", "0 * * * *", "45 1 * * *", "@daily", "*/20 1-3 * * *", "0,30 0-3 * * 0"}
	// March 2011 to March 2012: Samoa's skipped day, Sao Paulo's midnight changes, and a
	// spring and an autumn in each other zone.
	from, to := time.Date(2011, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2012, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, zone := range zones {
		for _, expr := range exprs {
			s, err := Parse(expr, zone)
			if err != nil {
				t.Fatal(err)
			}
			var notes strings.Builder
			for tick := s.Next(from); tick.Before(to); tick = s.Next(tick) {
				note := s.Note(tick)
				if note != "" {
					notes.WriteString(note + "\n")
				}
				local := tick.In(s.Location())
				hm := local.Format("15:04")
				_, off := local.Zone()
				_, before := tick.Add(-3 * time.Hour).In(s.Location()).Zone()
				_, after := tick.Add(3 * time.Hour).In(s.Location()).Zone()
				if before == off && after == off {
					continue // no change of offset near: no wall-clock minute repeats
				}
				// The same wall-clock minute an offset change away, within 3 hours.
				for _, d := range []time.Duration{-3 * time.Hour, -2 * time.Hour, -time.Hour, -30 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour} {
					other := tick.Add(d).In(s.Location())
					if other.Format("2006-01-02 15:04") != local.Format("2006-01-02 15:04") {
						continue
					}
					which := "this is the first"
					if d < 0 {
						which = "this is the second"
					}
					if !strings.Contains(note, hm+" happens twice") || !strings.Contains(note, which) && !strings.Contains(note, "runs once, at the first") {
						t.Errorf("%q in %s, tick %s: note %q; want %s happens twice, %s", expr, zone, local, note, hm, which)
					}
				}
			}
			// Each matching wall-clock minute that no instant shows.
			for day := from; day.Before(to); day = day.Add(24 * time.Hour) {
				a, b := day.In(s.Location()), day.Add(24*time.Hour).In(s.Location())
				if _, oa := a.Zone(); func() bool { _, ob := b.Zone(); return oa >= ob }() {
					continue // no forward change this day
				}
				y, m, d := a.Date()
				for min := 0; min < 48*60; min++ {
					w := time.Date(y, m, d, 0, min, 0, 0, time.UTC)
					if !s.matchesWall(w.Unix()) {
						continue
					}
					in := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, s.Location())
					if in.Format("2006-01-02 15:04") == w.Format("2006-01-02 15:04") {
						continue // it exists
					}
					if !namesMinute(notes.String(), w.Format("2006-01-02"), w.Format("15:04")) {
						t.Errorf("%q in %s: no note names %s, which does not exist", expr, zone, w.Format("2006-01-02 15:04"))
					}
				}
			}
		}
	}
}

// namesMinute reports whether notes name the minute hm of date as not existing: listed,
// or inside a range "A to B (N times)".
func namesMinute(notes, date, hm string) bool {
	for _, n := range strings.Split(notes, "\n") {
		for _, part := range strings.Split(n, "; ") {
			what, rest, ok := strings.Cut(part, " do")
			if !ok || !strings.Contains(rest, "not exist on "+date) {
				continue
			}
			if a, b, ok := strings.Cut(what, " to "); ok {
				b, _, _ = strings.Cut(b, " (")
				if a <= hm && hm <= b {
					return true
				}
			}
			for _, m := range strings.Split(what, ", ") {
				if m == hm {
					return true
				}
			}
		}
	}
	return false
}

// TestUpcomingStopsAtYear9999: no tick past what RFC 3339 writes, and how long until a tick
// centuries away is not a wrapped-around duration.
func TestUpcomingStopsAtYear9999(t *testing.T) {
	s, err := Parse("0 0 29 2 */7", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	ticks := s.Upcoming(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), MaxUpcoming)
	last := ticks[len(ticks)-1]
	if last.Tick.Year() > 9999 || len(ticks) == MaxUpcoming {
		t.Errorf("%d ticks, the last %v: want them to stop before the year 10000", len(ticks), last.Tick)
	}
	if got := FormatIn(last.In); got != "over 292y" {
		t.Errorf("in %s to %v", got, last.Tick)
	}
}
