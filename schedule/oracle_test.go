package schedule

// An independent reading of crontab(5) and Debian cron's DST rules, for the property and
// fuzz tests: it shares no code with the package. It reads the expression text item by
// item for every wall-clock minute, and decides whether an instant is a tick from
// time.Time.In alone, minute by minute, without zone segments or field jumps. It is slow
// on purpose.

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

type oracle struct {
	fields [5]string
	wild   bool
	loc    *time.Location
}

var oracleDescriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var oracleNames = map[string]int{
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
}

// newOracle reads expr already accepted by Parse; loc is used unless expr has CRON_TZ=.
func newOracle(t testing.TB, expr string, loc *time.Location) *oracle {
	f := strings.Fields(strings.ToLower(expr))
	if strings.HasPrefix(f[0], "cron_tz=") {
		z, err := time.LoadLocation(strings.Fields(expr)[0][len("cron_tz="):])
		if err != nil {
			t.Fatalf("oracle: %v", err)
		}
		loc, f = z, f[1:]
	}
	o := &oracle{loc: loc}
	if d, ok := oracleDescriptors[f[0]]; ok {
		f = strings.Fields(d)
		o.wild = f[1] == "*"
	} else {
		o.wild = f[0][0] == '*' || f[1][0] == '*'
	}
	copy(o.fields[:], f)
	return o
}

// itemHas reports whether one list item (*, */n, a, a-b, a-b/n) takes the value v.
func itemHas(item string, v, lo, hi int) bool {
	rng, stepText, _ := strings.Cut(item, "/")
	step := 1
	if stepText != "" {
		step, _ = strconv.Atoi(stepText)
	}
	a, b := lo, hi
	if rng != "*" {
		x, y, isRange := strings.Cut(rng, "-")
		a = oracleValue(x)
		b = a
		if isRange {
			b = oracleValue(y)
		}
	}
	return v >= a && v <= b && (v-a)%step == 0
}

func oracleValue(s string) int {
	if n, ok := oracleNames[s]; ok {
		return n
	}
	n, _ := strconv.Atoi(s)
	return n
}

func fieldHas(field string, v, lo, hi int) bool {
	for _, item := range strings.Split(field, ",") {
		if itemHas(item, v, lo, hi) {
			return true
		}
	}
	return false
}

// matches reports whether the wall-clock minute w (read as UTC fields) matches.
func (o *oracle) matches(y int, mo time.Month, d, h, mi int, wd time.Weekday) bool {
	if !fieldHas(o.fields[0], mi, 0, 59) || !fieldHas(o.fields[1], h, 0, 23) || !fieldHas(o.fields[3], int(mo), 1, 12) {
		return false
	}
	dom := fieldHas(o.fields[2], d, 1, 31)
	dow := fieldHas(o.fields[4], int(wd), 0, 7) || (wd == time.Sunday && fieldHas(o.fields[4], 7, 0, 7))
	if o.fields[2][0] == '*' || o.fields[4][0] == '*' {
		return dom && dow
	}
	return dom || dow
}

func (o *oracle) matchesTime(w time.Time) bool {
	return o.matches(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Weekday())
}

// wallOf returns t's wall clock, to the minute, as a UTC time: comparable and steppable.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
}

// isTick decides whether the instant t (on a whole UTC minute, in a zone whose offsets
// are whole minutes) is a tick.
func (o *oracle) isTick(t time.Time) bool {
	lt := t.In(o.loc)
	m := o.matchesTime(lt)
	if o.wild {
		return m
	}
	if m {
		// A repeat: the same wall clock at an earlier instant within six hours.
		_, offNow := lt.Zone()
		_, offThen := t.Add(-6 * time.Hour).In(o.loc).Zone()
		if offThen == offNow {
			return true
		}
		// Debian's cron repeats nothing after a jump back of more than 3 h (a minute's
		// wake-up finding the clock more than 180 minutes back): then it is no repeat.
		if time.Duration(offThen-offNow)*time.Second-time.Minute > 3*time.Hour {
			return true
		}
		w := wallOf(lt)
		for u := t.Add(-time.Minute); u.After(t.Add(-6 * time.Hour)); u = u.Add(-time.Minute) {
			if wallOf(u.In(o.loc)).Equal(w) {
				return false
			}
		}
		return true
	}
	// A gap ending at t: the wall clock jumped over minutes, any of which matching ticks at t.
	before := wallOf(t.Add(-time.Minute).In(o.loc))
	now := wallOf(lt)
	if now.Sub(before) > 3*time.Hour {
		return false // a clock change to Debian's cron, not daylight saving: nothing skipped runs
	}
	for c := before.Add(time.Minute); c.Before(now); c = c.Add(time.Minute) {
		if o.matchesTime(c) {
			return true
		}
	}
	return false
}

// prevWithin returns the latest tick at or before now within window, by walking back
// minute by minute, or the zero time.
func (o *oracle) prevWithin(now time.Time, window time.Duration) time.Time {
	for t := now.Truncate(time.Minute); !t.Before(now.Add(-window)); t = t.Add(-time.Minute) {
		if o.isTick(t) {
			return t
		}
	}
	return time.Time{}
}

// nextWithin returns the first tick strictly after after within window, or the zero time.
func (o *oracle) nextWithin(after time.Time, window time.Duration) time.Time {
	for t := after.Truncate(time.Minute).Add(time.Minute); !t.After(after.Add(window)); t = t.Add(time.Minute) {
		if o.isTick(t) {
			return t
		}
	}
	return time.Time{}
}
