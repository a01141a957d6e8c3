package lockrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A suspension is a key's fleet-wide pause (cronlock suspend), like a CronJob's
// spec.suspend: every backend keeps it beside the key's lock, and Acquire reads it in the
// step that claims the tick and the lock (on Redis inside the acquire script, so it costs
// no round trip), so that a run of a suspended key ends before its job starts, on every
// host. It never stops a job that is already running.

// Suspension says who paused a key, since when, until when and why.
type Suspension struct {
	By     string    `json:"by"`              // user@host of whoever ran cronlock suspend
	Since  time.Time `json:"since"`           // when it was made, on the suspending host's clock
	Until  time.Time `json:"until,omitzero"`  // when it lifts by itself; zero = only by resume
	Reason string    `json:"reason,omitzero"` // --reason, as given
}

// Lifted reports whether s has lifted by itself at now (its Until has come).
func (s *Suspension) Lifted(now time.Time) bool {
	return s != nil && !s.Until.IsZero() && !now.Before(s.Until)
}

// String is s for a person: "by alice@vm1 since 2026-12-02T06:00:00Z until … (why)".
func (s *Suspension) String() string {
	out := "by " + s.By + " since " + s.Since.UTC().Format(time.RFC3339)
	if s.Until.IsZero() {
		out += ", until resumed"
	} else {
		out += " until " + s.Until.UTC().Format(time.RFC3339)
	}
	if s.Reason != "" {
		out += ": " + strconv.Quote(s.Reason)
	}
	return out
}

// suspensionValue is a suspension as every backend stores it: times in decimal µs
// strings, so that Redis's Lua (whose numbers are doubles) reads them exactly.
type suspensionValue struct {
	By      string `json:"by"`
	SinceUS string `json:"since_us"`
	UntilUS string `json:"until_us,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// MaxReasonBytes bounds --reason: a suspension is read by every run of its key.
const MaxReasonBytes = 200

// EncodeSuspension is s as a backend stores it.
func EncodeSuspension(s *Suspension) []byte {
	v := suspensionValue{By: s.By, SinceUS: strconv.FormatInt(s.Since.UnixMicro(), 10), Reason: cutUTF8(s.Reason, MaxReasonBytes)}
	if !s.Until.IsZero() {
		v.UntilUS = strconv.FormatInt(s.Until.UnixMicro(), 10)
	}
	b, _ := json.Marshal(v)
	return b
}

// DecodeSuspension reads a stored suspension; an unreadable one is still a suspension
// (a key someone paused stays paused), by an unknown user.
func DecodeSuspension(b []byte) *Suspension {
	var v suspensionValue
	if json.Unmarshal(b, &v) != nil {
		return &Suspension{By: "(unreadable suspension record)"}
	}
	s := &Suspension{By: v.By, Reason: v.Reason}
	if us, err := strconv.ParseInt(v.SinceUS, 10, 64); err == nil && us > 0 {
		s.Since = time.UnixMicro(us).UTC()
	}
	if us, err := strconv.ParseInt(v.UntilUS, 10, 64); err == nil && us > 0 {
		s.Until = time.UnixMicro(us).UTC()
	}
	return s
}

// SuspendedError is returned by Acquire (and ClaimMissed) when the key is suspended: no
// lock was taken and the job must not start. The backend has recorded the tick in the
// fleet's record (once per tick, whichever host came first) where it keeps one.
type SuspendedError struct {
	Key        string
	Suspension *Suspension
	// RecordErr is why the fleet's record could not note it ('' = it did, or there is none).
	RecordErr string
}

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("%s is suspended %s", e.Key, e.Suspension)
}

// Suspender is a backend that keeps suspensions: Redis, etcd, local.
type Suspender interface {
	// Suspend pauses key fleet-wide until s.Until (zero: until Resume), replacing any
	// suspension it had.
	Suspend(ctx context.Context, key string, s *Suspension) error
	// Resume lifts key's suspension and returns it; *NotSuspendedError when it had none
	// (or it had lifted by itself).
	Resume(ctx context.Context, key string) (*Suspension, error)
	// ReadSuspension returns key's suspension in force at now, nil when there is none.
	// This is the reader for other commands (jobs, status, check).
	ReadSuspension(ctx context.Context, key string) (*Suspension, error)
}

// NotSuspendedError is returned by Resume for a key that is not suspended.
type NotSuspendedError struct {
	Key     string
	Backend string
}

func (e *NotSuspendedError) Error() string {
	return fmt.Sprintf("%s is not suspended on %s (never, or its --for/--until has passed): nothing to resume; see cronlock status --key %s", e.Key, e.Backend, e.Key)
}

// ErrNoSuspend is returned by ReadSuspensionOf for a backend that cannot keep suspensions.
var ErrNoSuspend = errors.New("this backend cannot suspend keys")

// ReadSuspensionOf is key's suspension in force on l (nil = none): the small reader that
// status, check and jobs share.
func ReadSuspensionOf(ctx context.Context, l Locker, key string) (*Suspension, error) {
	s, ok := l.(Suspender)
	if !ok {
		return nil, ErrNoSuspend
	}
	return s.ReadSuspension(ctx, key)
}

// SuspendedEntryID names the fleet's record of a suspended run: one entry per tick (the first
// host writes it, the others count themselves in it), or, without --schedule, one per
// suspension and host. The id keeps the entry unique without a round trip.
func SuspendedEntryID(tick time.Time, s *Suspension, node string) string {
	if !tick.IsZero() {
		return "suspended-" + strconv.FormatInt(tick.UnixMicro(), 10)
	}
	return "suspended-" + strconv.FormatInt(s.Since.UnixMicro(), 10) + "-" + node
}

// BatchSuspender is a Suspender that reads the suspensions of many keys at once (Redis: a
// pipeline), for a reader of a whole fleet (jobs).
type BatchSuspender interface {
	// Suspensions returns the suspensions in force of keys, by key; keys without one are
	// left out.
	Suspensions(ctx context.Context, keys []string) (map[string]*Suspension, error)
}

// SuspensionLister is a Suspender that finds its suspended keys by itself, without being
// told which keys to look at: `status` without --key lists every suspension, including
// those of keys that never ran or that no index knows.
type SuspensionLister interface {
	// AllSuspensions returns every suspension in force, by key.
	AllSuspensions(ctx context.Context) (map[string]*Suspension, error)
}

// AllSuspensionsOf is every suspension in force on l, by key; ErrNoSuspend for a backend
// that keeps none or cannot list them.
func AllSuspensionsOf(ctx context.Context, l Locker) (map[string]*Suspension, error) {
	sl, ok := l.(SuspensionLister)
	if !ok {
		return nil, ErrNoSuspend
	}
	return sl.AllSuspensions(ctx)
}

// SuspensionsOf is the suspensions in force of keys on l, by key (keys without one left
// out): one batch where l is a BatchSuspender, else one ReadSuspension per key.
// ErrNoSuspend for a backend that keeps none.
func SuspensionsOf(ctx context.Context, l Locker, keys []string) (map[string]*Suspension, error) {
	if b, ok := l.(BatchSuspender); ok {
		return b.Suspensions(ctx, keys)
	}
	s, ok := l.(Suspender)
	if !ok {
		return nil, ErrNoSuspend
	}
	out := map[string]*Suspension{}
	for _, k := range keys {
		v, err := s.ReadSuspension(ctx, k)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out[k] = v
		}
	}
	return out, nil
}
