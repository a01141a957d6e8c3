package schedule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Zones for the property and fuzz tests: whole-minute offsets since 1990 (the oracle
// steps by UTC minutes), with hour, half-hour and midnight transitions and a skipped day.
var propertyZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu",
	"America/Sao_Paulo", "Pacific/Apia", "Europe/London", "America/Santiago",
}

const oracleWindow = 2 * 24 * time.Hour

// checkTick holds Prev and Next against the oracle at now.
func checkTick(t *testing.T, s *Schedule, o *oracle, now time.Time) {
	t.Helper()
	where := fmt.Sprintf("%q in %s at %s (%s)", s.String(), s.Zone(), now.UTC().Format(time.RFC3339), now.In(s.Location()).Format("2006-01-02 15:04:05 MST"))
	p := s.Prev(now)
	switch want := o.prevWithin(now, oracleWindow); {
	case p.IsZero():
		t.Fatalf("%s: Prev is zero", where)
	case p.After(now):
		t.Fatalf("%s: Prev %s is after now", where, p)
	case !want.IsZero() && !p.Equal(want):
		t.Fatalf("%s: Prev %s (%s), oracle %s (%s)", where, p, p.In(s.Location()), want, want.In(s.Location()))
	case want.IsZero() && (!p.Before(now.Add(-oracleWindow)) || !o.isTick(p)):
		t.Fatalf("%s: Prev %s (%s), but the oracle finds no tick in the window or says it is none", where, p, p.In(s.Location()))
	}
	n := s.Next(now)
	switch want := o.nextWithin(now, oracleWindow); {
	case n.IsZero():
		t.Fatalf("%s: Next is zero", where)
	case !n.After(now):
		t.Fatalf("%s: Next %s is not after now", where, n)
	case !want.IsZero() && !n.Equal(want):
		t.Fatalf("%s: Next %s (%s), oracle %s (%s)", where, n, n.In(s.Location()), want, want.In(s.Location()))
	case want.IsZero() && (!n.After(now.Add(oracleWindow)) || !o.isTick(n)):
		t.Fatalf("%s: Next %s (%s), but the oracle finds no tick in the window or says it is none", where, n, n.In(s.Location()))
	}
	// No tick lies in (Prev, now] nor in (now, Next): beyond the oracle's window too.
	if got := s.Next(p); !got.Equal(n) {
		t.Fatalf("%s: Next(Prev) = %s, want Next(now) = %s", where, got, n)
	}
	if got := s.Prev(n); !got.Equal(n) {
		t.Fatalf("%s: Prev(Next) = %s, want %s", where, got, n)
	}
}

// randomExpr makes a valid expression, biased towards ones that fire at least daily so
// that the oracle's window covers the search.
func randomExpr(r *rand.Rand) string {
	if r.IntN(12) == 0 {
		d := []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
		return d[r.IntN(len(d))]
	}
	f := []string{
		randomField(r, 0, 59, nil, 0.3),
		randomHour(r),
		randomField(r, 1, 31, nil, 0.7),
		randomField(r, 1, 12, monthNames, 0.8),
		randomField(r, 0, 7, dowNames, 0.6),
	}
	return strings.Join(f, " ")
}

// randomHour often picks the hours around midnight and 01:00-03:00, where zones change
// offset, so that fixed-time expressions meet repeated and skipped hours.
func randomHour(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		near := []string{"0", "1", "2", "3", "23", "0-3", "1-2", "2,3", "22-23", "1-3/2", "0,2"}
		return near[r.IntN(len(near))]
	}
	return randomField(r, 0, 23, nil, 0.4)
}

var (
	monthNames = []string{"jan", "FEB", "Mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dowNames   = []string{"sun", "mon", "Tue", "wed", "thu", "fri", "SAT"}
)

func randomField(r *rand.Rand, lo, hi int, names []string, star float64) string {
	if r.Float64() < star {
		if r.IntN(3) == 0 {
			return fmt.Sprintf("*/%d", 1+r.IntN(hi-lo+1))
		}
		return "*"
	}
	val := func() (int, string) {
		v := lo + r.IntN(hi-lo+1)
		if names != nil && v-lo < len(names) && r.IntN(2) == 0 {
			return v, names[v-lo]
		}
		if names != nil && lo == 0 && v == 0 && r.IntN(2) == 0 {
			return 7, "7" // Sunday as 7: sorts last in a range
		}
		return v, fmt.Sprint(v)
	}
	items := make([]string, 1+r.IntN(3))
	for i := range items {
		a, at := val()
		switch r.IntN(3) {
		case 0:
			items[i] = at
		default:
			b, bt := val()
			if b < a {
				a, at, b, bt = b, bt, a, at
			}
			items[i] = at + "-" + bt
			if r.IntN(2) == 0 {
				items[i] += fmt.Sprintf("/%d", 1+r.IntN(hi-lo+1))
			}
		}
	}
	return strings.Join(items, ",")
}

// randomInstant picks an instant in 1990-2040, half of them near an offset change.
func randomInstant(r *rand.Rand, loc *time.Location) time.Time {
	t := time.Unix(631152000+r.Int64N(50*365*86400), int64(r.IntN(1e9))).In(loc)
	if r.IntN(2) == 0 {
		if _, end := t.ZoneBounds(); !end.IsZero() {
			t = end.Add(time.Duration(r.Int64N(int64(8*time.Hour))) - 4*time.Hour)
		}
	}
	if r.IntN(4) == 0 {
		t = t.Truncate(time.Minute) // exactly on a minute: a tick at now itself
	}
	return t
}

func TestPrevNextAgainstOracle(t *testing.T) {
	cases := 1500
	if testing.Short() {
		cases = 300
	}
	r := rand.New(rand.NewPCG(12, 2026))
	for i := 0; i < cases; i++ {
		expr := randomExpr(r)
		zone := propertyZones[r.IntN(len(propertyZones))]
		s, err := Parse(expr, zone)
		if err != nil {
			if strings.Contains(err.Error(), "never meet") {
				continue
			}
			t.Fatalf("Parse(%q): %v", expr, err)
		}
		checkTick(t, s, newOracle(t, expr, s.Location()), randomInstant(r, s.Location()))
	}
}

// FuzzTick checks Prev and Next against the oracle for any expression Parse accepts.
//
//	go test -run '^$' -fuzz '^FuzzTick$' -fuzztime 60s ./schedule/
func FuzzTick(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, e := range []string{
		"30 2 * * *", "*/15 * * * *", "0 * * * *", "@hourly", "@daily", "0 0 29 2 *", "0 0 31 * *",
		"0 9 * * 1-5", "0 0 13 * 5", "*/7 */3 * * *", "0-59/20 1-3 * * *", "59 23 * * 7",
		"0 0 */2 * 1", "CRON_TZ=Europe/Berlin 30 2 * * *", "0 0,12 1 jan,jul sun",
	} {
		for range 3 {
			f.Add(e, r.Int64(), uint8(r.Uint32()))
		}
	}
	// The last day of a leap year in Europe/London, where go1.26's ZoneBounds is wrong.
	f.Add("*/15 * * * *", int64(2240524800-631152000), uint8(7))
	f.Fuzz(func(t *testing.T, expr string, at int64, zone uint8) {
		loc := propertyZones[int(zone)%len(propertyZones)]
		if strings.Contains(strings.ToLower(expr), "cron_tz=") {
			// Only the test's zones: the oracle needs whole-minute offsets.
			if !strings.HasPrefix(expr, "CRON_TZ=Europe/Berlin ") || strings.Count(strings.ToLower(expr), "cron_tz=") != 1 {
				return
			}
		}
		s, err := Parse(expr, loc)
		if err != nil {
			return
		}
		if at < 0 {
			at = -at
		}
		now := time.Unix(631152000+at%(50*365*86400), at%1e9)
		checkTick(t, s, newOracle(t, expr, s.Location()), now)
	})
}

// FuzzParse: Parse never panics, its errors are one line, and String parses back to the
// same schedule.
func FuzzParse(f *testing.F) {
	for _, e := range []string{
		"* * * * *", "@daily", "5/10 * * * *", "0 0 * * 7", "CRON_TZ=UTC 0 0 1 1 *", "TZ=UTC * * * * *",
		"1-5,10-20/3 */2 1,15 jan-mar mon-fri", "@every 5m", "0 0 30 2 *", "? * * * *", "*-5 * * * *",
		"99999999999999999999 * * * *", "* * * * */0", "\x00 * * * *", "@DAILY", "0 0 * * sun-sat",
	} {
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := Parse(expr, "UTC")
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("Parse(%q): error %q is not one line", expr, msg)
			}
			return
		}
		again, err := Parse(s.String(), s.Zone())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", expr, s.String(), err)
		}
		if !sameSchedule(again, s) {
			t.Fatalf("Parse(%q) = %+v, but its String %q parses to %+v", expr, *s, s.String(), *again)
		}
	})
}

// sameSchedule compares two schedules, their zones by name.
func sameSchedule(a, b *Schedule) bool {
	x, y := *a, *b
	x.loc, y.loc = nil, nil
	return x == y && a.loc.String() == b.loc.String()
}
