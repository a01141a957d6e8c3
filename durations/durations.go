// Package durations reads the durations and points in time that people write on
// cronlock's command line and in its settings: Go syntax with an optional leading day
// part (2d, 1d12h) for every duration, and for --since and --until also a date or a time.
// It is pure: the clock and the zone are given, and it knows no flags but the names of
// --since and --until in its messages; what a value is for (a flag, a setting) and which
// exit code a bad one gets are the caller's.
package durations

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Parse accepts Go durations ("90s", "1h30m"), a bare "0", and a leading day part ("2d",
// "1d12h"), as every duration of the command line and the settings does: a --timeout of
// a day should not have to be written 24h when --since takes 1d. Its errors quote s and
// say what a duration looks like.
func Parse(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	if d, ok := parseAgo(v); ok {
		return d, nil
	}
	if rest, ok := strings.CutPrefix(v, "-"); ok {
		if _, ok := parseAgo(rest); ok {
			return 0, fmt.Errorf("%q is negative", s)
		}
	}
	if TooManyDays(v) {
		return 0, fmt.Errorf("%q is more than 100 years", s)
	}
	return 0, fmt.Errorf("%q is not a duration; write it like 90s, 30m, 1h30m, 2d or 1d12h", s)
}

// TooManyDays reports a day part beyond the 100 years the parsers take, so that a
// message can say what is wrong with a well-formed "50000d".
func TooManyDays(v string) bool {
	m := daysPrefix.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err != nil || n > 100*365
}

// ParseAge reads an age, for --older-than and CRONLOCK_HISTORY_RETENTION: Go syntax with
// an optional day part (90d, 1d12h, 36h), as --since takes it. Its errors quote s.
func ParseAge(s string) (time.Duration, error) {
	d, ok := parseAgo(strings.TrimSpace(s))
	if !ok {
		if TooManyDays(strings.TrimSpace(s)) {
			return 0, fmt.Errorf("%q is more than 100 years", s)
		}
		return 0, fmt.Errorf("%q is not a duration; write it like 90d, 36h or 1d12h", s)
	}
	return d, nil
}

// whenForms is what --since and --until accept, for the error message.
const whenForms = "a duration ago (36h, 90m, 7d, 1d12h) or a time (2025-06-01, 2025-06-01 15:04, 2025-06-01T15:04:05, or RFC 3339 like 2025-06-01T15:04:05+02:00)"

// SinceUntil reads --since and --until ("" = no bound) as times in local time, or in UTC
// when utc is set, relative to now; it refuses a window that ends before it starts. Its
// errors name the flag and the value.
func SinceUntil(since, until string, utc bool, now time.Time) (time.Time, time.Time, error) {
	loc := time.Local
	if utc {
		loc = time.UTC
	}
	var s, u time.Time
	var err error
	if since != "" {
		if s, err = parseWhen(since, now, loc); err != nil {
			return s, u, fmt.Errorf("--since %q: %v", since, err)
		}
	}
	if until != "" {
		if u, err = parseWhen(until, now, loc); err != nil {
			return s, u, fmt.Errorf("--until %q: %v", until, err)
		}
	}
	if !s.IsZero() && !u.IsZero() && !s.Before(u) {
		return s, u, fmt.Errorf("--since %s is not before --until %s: no run can match", since, until)
	}
	return s, u, nil
}

// daysPrefix is the day part of a duration like 7d or 1d12h, which Go's syntax lacks.
var daysPrefix = regexp.MustCompile(`^([0-9]+)d`)

// minStored and maxStored are the earliest and latest start times the history can hold.
var minStored, maxStored = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// whenLayouts are the times --since and --until take, tried in this order.
var whenLayouts = []string{time.RFC3339Nano, "2006-01-02", "2006-01-02 15:04", "2006-01-02T15:04",
	"2006-01-02 15:04:05", "2006-01-02T15:04:05"}

// parseWhen reads one --since or --until value: a duration meaning that long before now,
// or a time in loc (an RFC 3339 time carries its own zone).
func parseWhen(v string, now time.Time, loc *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	if d, ok := parseAgo(v); ok {
		return now.Add(-d), nil
	}
	for _, layout := range whenLayouts {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			// The history keeps Unix nanoseconds (years 1678 to 2262): a time beyond
			// them bounds nothing, so it becomes the farthest one that can be stored.
			switch {
			case t.Before(minStored):
				t = minStored
			case t.After(maxStored):
				t = maxStored
			}
			return t, nil
		}
	}
	if TooManyDays(v) {
		return time.Time{}, errors.New("more than 100 years ago; give a date instead")
	}
	return time.Time{}, fmt.Errorf("want %s", whenForms)
}

// parseAgo reads a non-negative duration in Go syntax with an optional leading day part
// (7d, 1d12h).
func parseAgo(v string) (time.Duration, bool) {
	var days time.Duration
	if m := daysPrefix.FindStringSubmatch(v); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 100*365 {
			return 0, false
		}
		days = time.Duration(n) * 24 * time.Hour
		v = v[len(m[0]):]
		if v == "" {
			return days, true
		}
	}
	d, err := time.ParseDuration(v)
	// A sum beyond time.Duration (about 292 years) would wrap round to a negative age.
	if err != nil || d < 0 || d > math.MaxInt64-days {
		return 0, false
	}
	return days + d, true
}

// Format writes d as a person would on the command line: in one unit where one fits
// (60s, 5m, 2h, 7d), "0" for none, else Go's form (1m30s); Parse reads each back. Go's
// own form says 1m0s for a minute and 24h0m0s for a day.
func Format(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return d.String()
	case d%day == 0 && d >= 2*day:
		return strconv.FormatInt(int64(d/day), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0 && d >= 2*time.Minute:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// ParseTime reads a point in time (not a duration ago): one of the layouts --since and
// --until take, in loc unless it carries its own zone (RFC 3339).
func ParseTime(v string, loc *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	for _, layout := range whenLayouts {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("want a time (2025-06-01, 2025-06-01 15:04, 2025-06-01T15:04:05, or RFC 3339 like 2025-06-01T15:04:05+02:00)")
}
