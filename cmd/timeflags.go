package cmd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"cronlock/durations"
	"cronlock/history"
)

// The flags and settings of time and age (package durations reads them): the plain
// durations of --ttl, --wait, --timeout, --grace, --min-hold, --stale-after and
// --redis-timeout (durationValue), --older-than of history prune (ageValue), --since and
// --until (parseSinceUntil), and CRONLOCK_HISTORY_RETENTION (parseRetention).

// durationValue is a time.Duration flag whose errors say what a duration looks like.
type durationValue struct {
	d        *time.Duration
	positive bool // 0 not allowed
}

func (v durationValue) String() string { return durations.Format(*v.d) }
func (v durationValue) Type() string   { return "duration" }
func (v durationValue) Set(s string) error {
	d, err := durations.Parse(s)
	if err != nil {
		return err
	}
	if v.positive && d == 0 {
		return errors.New("must be more than 0")
	}
	*v.d = d
	return nil
}

// parseSinceUntil is durations.SinceUntil, its errors a mistake on the command line.
func parseSinceUntil(since, until string, utc bool, now time.Time) (time.Time, time.Time, error) {
	s, u, err := durations.SinceUntil(since, until, utc, now)
	if err != nil {
		return s, u, &usageError{err}
	}
	return s, u, nil
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
	d, err := durations.ParseAge(s)
	if err != nil {
		return err
	}
	if d == 0 {
		return errors.New("must be more than 0")
	}
	*v.d = d
	return nil
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
	d, err := durations.ParseAge(v)
	if err != nil {
		where := ""
		if !strings.HasPrefix(source, "environment") {
			where = " in " + source
		}
		if durations.TooManyDays(v) {
			return 0, fmt.Errorf("invalid %s%s: %v; set off to keep every run; no old runs are deleted until it is fixed", retentionName, where, err)
		}
		return 0, fmt.Errorf("invalid %s%s: %v, or off to keep every run; no old runs are deleted until it is fixed", retentionName, where, err)
	}
	return d, nil
}
