// Package suspend makes, lifts and describes a key's fleet-wide suspension (cronlock
// suspend and resume): it turns --for, --until and --reason into a lockrun.Suspension,
// refuses what cannot be meant (both bounds, a past --until), names who suspended, and
// hands the suspension to the backend (a lockrun.Suspender). It does not decide whether a
// run starts: each backend's Acquire reads the suspension in the step that claims the
// lock, so that a suspended key costs a run no round trip of its own.
package suspend

import (
	"context"
	"cronlock/userdb"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"cronlock/durations"
	"cronlock/lockrun"
)

// Options are what `cronlock suspend` was given.
type Options struct {
	Key    string
	For    time.Duration // --for; 0 = not given
	Until  string        // --until as typed; "" = not given
	Reason string
	UTC    bool             // --until without a zone is UTC, not local time
	Now    func() time.Time // nil = time.Now
	By     string           // user@host; "" = this process's user and host
}

// UsageError is a mistake in the flags: the caller's usage exit code.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// New is the suspension o asks for, or a *UsageError: --for and --until together, an
// --until that has passed, a --for that is not positive, a reason too long.
func New(o Options) (*lockrun.Suspension, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	t := now()
	s := &lockrun.Suspension{By: o.By, Since: t.UTC(), Reason: o.Reason}
	if s.By == "" {
		s.By = Who()
	}
	if len(o.Reason) > lockrun.MaxReasonBytes {
		return nil, &UsageError{fmt.Sprintf("--reason is %d bytes long; at most %d", len(o.Reason), lockrun.MaxReasonBytes)}
	}
	switch {
	case o.For != 0 && o.Until != "":
		return nil, &UsageError{"--for and --until do not go together: give one (how long, or until when), or neither to suspend until cronlock resume"}
	case o.For < 0:
		return nil, &UsageError{fmt.Sprintf("--for %s is negative: give how long the key stays suspended, such as 2h or 1d", o.For)}
	case o.For > 0:
		s.Until = t.Add(o.For).UTC()
	case o.Until != "":
		loc := time.Local
		if o.UTC {
			loc = time.UTC
		}
		u, err := durations.ParseTime(o.Until, loc)
		if err != nil {
			return nil, &UsageError{fmt.Sprintf("--until %q: %v", o.Until, err)}
		}
		if !u.After(t) {
			return nil, &UsageError{fmt.Sprintf("--until %s has already passed (it is %s now): give a time to come, or --for a duration", u.Format(time.RFC3339), t.In(u.Location()).Format(time.RFC3339))}
		}
		s.Until = u.UTC()
	}
	return s, nil
}

// Who names this process's user and host as user@host, for the record of who suspended.
func Who() string {
	name := ""
	if u, err := userdb.LookupID(os.Getuid()); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("LOGNAME")
	}
	if name == "" {
		name = "uid" + strconv.Itoa(os.Getuid())
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host
}

// Suspend stores s for key on l: every run of key, on every host using l, ends suspended
// from now until s.Until (or resume).
func Suspend(ctx context.Context, l lockrun.Locker, key string, s *lockrun.Suspension) error {
	sp, ok := l.(lockrun.Suspender)
	if !ok {
		return fmt.Errorf("%s cannot suspend keys", l.Describe())
	}
	return sp.Suspend(ctx, key, s)
}

// Resume lifts key's suspension on l and returns it; *lockrun.NotSuspendedError when
// there was none.
func Resume(ctx context.Context, l lockrun.Locker, key string) (*lockrun.Suspension, error) {
	sp, ok := l.(lockrun.Suspender)
	if !ok {
		return nil, fmt.Errorf("%s cannot suspend keys", l.Describe())
	}
	return sp.Resume(ctx, key)
}

// IsNotSuspended reports whether err says the key was not suspended.
func IsNotSuspended(err error) bool {
	var ns *lockrun.NotSuspendedError
	return errors.As(err, &ns)
}

// Made is the line `cronlock suspend` prints: what now holds, and how it ends.
func Made(key string, s *lockrun.Suspension, backend string) string {
	line := fmt.Sprintf("%s suspended on %s %s", key, backend, s)
	if s.Until.IsZero() {
		line += fmt.Sprintf("; no --for or --until was given, so it lasts until cronlock resume --key %s", key)
	} else {
		line += "; it lifts by itself then, or at cronlock resume --key " + key
	}
	return line + ". Running jobs go on; skipped ticks are not run on resume."
}

// Lifted is the line `cronlock resume` prints.
func Lifted(key string, s *lockrun.Suspension, backend string, now time.Time) string {
	return fmt.Sprintf("%s resumed on %s: it was suspended %s, for %s. The next tick runs; the ticks skipped meanwhile are not run.",
		key, backend, s, Age(now.Sub(s.Since)))
}

// Age is d for people, at a precision that fits its size: 45s, 12m, 3h20m, 2d4h.
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// StatusLine is the line `cronlock status --key` adds for a suspended key.
func StatusLine(key string, s *lockrun.Suspension, now time.Time) string {
	return fmt.Sprintf("%s is suspended %s (for %s so far): its runs do not start; cronlock resume --key %s lifts it",
		key, s, Age(max(now.Sub(s.Since), 0)), key)
}
