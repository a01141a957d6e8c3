// Package schedule: THROWAWAY STUB, replaced by the real package at merge (issue 12,
// another branch). It exists only so that the tick branch compiles and its tests run:
// 5 fields with *, numbers, lists and */n, the @ descriptors, a minute-by-minute scan, no
// names, no ranges, no DST rules. Do not build on it.
package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed crontab expression (stub).
type Schedule struct {
	expr   string
	loc    *time.Location
	fields [5]map[int]bool // nil = any
}

var descriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// Parse reads expr in zone tz ("" = /etc/localtime); a CRON_TZ= prefix wins (stub).
func Parse(expr, tz string) (*Schedule, error) {
	e := strings.TrimSpace(expr)
	if rest, ok := strings.CutPrefix(e, "CRON_TZ="); ok {
		z, r, _ := strings.Cut(rest, " ")
		tz, e = z, strings.TrimSpace(r)
	}
	loc := time.UTC
	if tz == "" {
		if l, err := time.LoadLocation("Local"); err == nil {
			loc = l
		}
	} else {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("--schedule %q: unknown zone %q", expr, tz)
		}
		loc = l
	}
	if d, ok := descriptors[e]; ok {
		e = d
	} else if strings.HasPrefix(e, "@") {
		return nil, fmt.Errorf("--schedule %q: %s has no tick; give 5 fields or @hourly, @daily, @weekly, @monthly, @yearly", expr, e)
	}
	f := strings.Fields(e)
	if len(f) != 5 {
		return nil, fmt.Errorf("--schedule %q: want 5 fields (minute hour day month weekday), got %d", expr, len(f))
	}
	s := &Schedule{expr: strings.Join(f, " "), loc: loc}
	lim := [5][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}}
	for i, fld := range f {
		if fld == "*" {
			continue
		}
		m := map[int]bool{}
		if step, ok := strings.CutPrefix(fld, "*/"); ok {
			n, err := strconv.Atoi(step)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("--schedule %q: bad step %q", expr, fld)
			}
			for v := lim[i][0]; v <= lim[i][1]; v += n {
				m[v] = true
			}
		} else {
			for _, p := range strings.Split(fld, ",") {
				n, err := strconv.Atoi(p)
				if err != nil || n < lim[i][0] || n > lim[i][1] {
					return nil, fmt.Errorf("--schedule %q: bad value %q in field %d", expr, p, i+1)
				}
				m[n] = true
			}
		}
		if i == 4 && m[7] {
			m[0] = true
		}
		s.fields[i] = m
	}
	return s, nil
}

func (s *Schedule) match(t time.Time) bool {
	t = t.In(s.loc)
	v := [5]int{t.Minute(), t.Hour(), t.Day(), int(t.Month()), int(t.Weekday())}
	for i, m := range s.fields {
		if m != nil && !m[v[i]] {
			return false
		}
	}
	return true
}

// Prev is the latest tick at or before now, in UTC (stub: scans back up to 400 days).
func (s *Schedule) Prev(now time.Time) time.Time {
	t := now.Truncate(time.Minute)
	for i := 0; i < 400*24*60; i++ {
		if s.match(t) {
			return t.UTC()
		}
		t = t.Add(-time.Minute)
	}
	return time.Time{}
}

// Next is the first tick strictly after after, in UTC (stub).
func (s *Schedule) Next(after time.Time) time.Time {
	t := after.Truncate(time.Minute).Add(time.Minute)
	for i := 0; i < 400*24*60; i++ {
		if s.match(t) {
			return t.UTC()
		}
		t = t.Add(time.Minute)
	}
	return time.Time{}
}

// String is the expression, normalised (stub: fields joined by one space).
func (s *Schedule) String() string { return s.expr }

// Zone is the zone's name.
func (s *Schedule) Zone() string { return s.loc.String() }
