package cmd

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cronlock/history"
)

// The time and age values of the command line and the settings: --since and --until of
// history and history stats (parseSinceUntil), --older-than of history prune (ageValue),
// CRONLOCK_HISTORY_RETENTION (parseRetention), and the plain durations of --ttl, --wait,
// --timeout, --grace, --min-hold, --stale-after and --redis-timeout (durationValue) and
// their settings. Every one of them takes Go syntax with an optional leading day part.

// durationValue is a time.Duration flag whose errors say what a duration looks like.
type durationValue struct {
	d        *time.Duration
	positive bool // 0 not allowed
}

func (v durationValue) String() string { return v.d.String() }
func (v durationValue) Type() string   { return "duration" }
func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if v.positive && d == 0 {
		return errors.New("must be more than 0")
	}
	*v.d = d
	return nil
}

// parseDuration accepts Go durations ("90s", "1h30m"), a bare "0", and a leading day
// part ("2d", "1d12h"), as every duration of the command line and the settings does: a
// --timeout of a day should not have to be written 24h when --since takes 1d.
func parseDuration(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	if d, ok := parseAgo(v); ok {
		return d, nil
	}
	if rest, ok := strings.CutPrefix(v, "-"); ok {
		if _, ok := parseAgo(rest); ok {
			return 0, fmt.Errorf("%q is negative", s)
		}
	}
	if tooManyDays(v) {
		return 0, fmt.Errorf("%q is more than 100 years", s)
	}
	return 0, fmt.Errorf("%q is not a duration; write it like 90s, 30m, 1h30m, 2d or 1d12h", s)
}

// tooManyDays reports a day part beyond parseAgo's 100 years, so that the message says
// what is wrong with a well-formed "50000d".
func tooManyDays(v string) bool {
	m := daysPrefix.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err != nil || n > 100*365
}

// whenForms is what --since and --until accept, for the error message.
const whenForms = "a duration ago (36h, 90m, 7d, 1d12h) or a time (2025-06-01, 2025-06-01 15:04, 2025-06-01T15:04:05, or RFC 3339 like 2025-06-01T15:04:05+02:00)"

// parseSinceUntil reads --since and --until ("" = no bound) as times in local time, or
// in UTC when utc is set, relative to now; it refuses a window that ends before it starts.
func parseSinceUntil(since, until string, utc bool, now time.Time) (time.Time, time.Time, error) {
	loc := time.Local
	if utc {
		loc = time.UTC
	}
	var s, u time.Time
	var err error
	if since != "" {
		if s, err = parseWhen(since, now, loc); err != nil {
			return s, u, &usageError{fmt.Errorf("--since %q: %v", since, err)}
		}
	}
	if until != "" {
		if u, err = parseWhen(until, now, loc); err != nil {
			return s, u, &usageError{fmt.Errorf("--until %q: %v", until, err)}
		}
	}
	if !s.IsZero() && !u.IsZero() && !s.Before(u) {
		return s, u, &usageError{fmt.Errorf("--since %s is not before --until %s: no run can match", since, until)}
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
	if tooManyDays(v) {
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

// ageValue is a duration flag that also takes days: 90d.
type ageValue struct{ d *time.Duration }

func (v ageValue) String() string {
	if *v.d == 0 {
		return ""
	}
	return history.FormatAge(*v.d)
}
func (v ageValue) Type() string { return "duration" }
func (v ageValue) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	if d == 0 {
		return errors.New("must be more than 0")
	}
	*v.d = d
	return nil
}

// parseAge reads a duration for --older-than and CRONLOCK_HISTORY_RETENTION: Go syntax
// with an optional day part (90d, 1d12h, 36h), as --since takes it (parseAgo).
func parseAge(s string) (time.Duration, error) {
	d, ok := parseAgo(strings.TrimSpace(s))
	if !ok {
		if tooManyDays(strings.TrimSpace(s)) {
			return 0, fmt.Errorf("%q is more than 100 years", s)
		}
		return 0, fmt.Errorf("%q is not a duration; write it like 90d, 36h or 1d12h", s)
	}
	return d, nil
}

// retentionName is the setting of automatic retention.
const retentionName = "CRONLOCK_HISTORY_RETENTION"

// parseRetention reads a value of CRONLOCK_HISTORY_RETENTION (how old a finished run
// gets before `cronlock run` deletes it) found in source: empty =
// history.DefaultRetention; 0 or off = keep every run.
func parseRetention(v, source string) (time.Duration, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return history.DefaultRetention, nil
	case "0", "off":
		return 0, nil
	}
	d, err := parseAge(v)
	if err != nil {
		where := ""
		if !strings.HasPrefix(source, "environment") {
			where = " in " + source
		}
		if tooManyDays(v) {
			return 0, fmt.Errorf("invalid %s%s: %v; set off to keep every run; no old runs are deleted until it is fixed", retentionName, where, err)
		}
		return 0, fmt.Errorf("invalid %s%s: %v, or off to keep every run; no old runs are deleted until it is fixed", retentionName, where, err)
	}
	return d, nil
}
