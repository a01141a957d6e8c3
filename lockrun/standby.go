package lockrun

import (
	"context"
	"fmt"
	"time"
)

// Standbys (run --standby): a run that finds its tick claimed by a run that may still be
// running waits beside it, and takes the tick over only when that run is lost: its lock
// gone with no release, its lease over on the standby's own clock as well.

// StandbyRequest is what a standby adds to a Request. The zero value asks for nothing,
// and a run without --standby sends nothing more than before.
type StandbyRequest struct {
	// Mode is "" (no standby), "lost" (--standby) or "failed" (--standby=failed: a tick
	// whose run failed by its own exit is taken over too).
	Mode string
	// Slots is --standbys: at most this many standbys per tick and key; MaxAttempts is
	// --max-attempts: attempts of one tick, the first run included.
	Slots, MaxAttempts int
	// SlotTTL is how long a standby's slot lives without being renewed by its next ask:
	// a standby killed with SIGKILL frees its slot when it ends.
	SlotTTL time.Duration
	// LostRun is the run id of the tick's run whose lease this standby's own clock says
	// has ended ("" = not yet): only then does the backend take that run's tick over, and
	// only when it confirms the lock is gone.
	LostRun string
	// NonTakeable: this claim's holder may go on running after losing its lease
	// (--on-lock-lost continue, or no guard process): a standby never takes it over.
	NonTakeable bool
}

// StandbyWaitError is returned by Acquire with a standby Mode when the tick's run may
// still be running: this run holds a standby slot, and asks again.
type StandbyWaitError struct {
	Key     string
	RunID   string        // the tick's run
	Node    string        // where it runs
	Attempt int           // the tick's attempt that run is
	PTTL    time.Duration // the lock's remaining lease; < 0 when gone or not known
	Holder  *Holder       // the lock's holder, nil when the lock is gone
}

func (e *StandbyWaitError) Error() string {
	return fmt.Sprintf("%s: the tick's run %s on %s may still be running; waiting as a standby", e.Key, e.RunID, e.Node)
}

// StandbyEndError is returned by Acquire with a standby Mode when the standby ends
// without taking the tick over: Why is "done" (the tick's run completed it: Status),
// "nontakeable" (it may still be running after losing its lease), or "attempts" (the
// tick had --max-attempts attempts).
type StandbyEndError struct {
	Key, Why, Status, Node, RunID string
	Attempt                       int
}

func (e *StandbyEndError) Error() string {
	who := fmt.Sprintf("run %s on %s", e.RunID, e.Node)
	switch e.Why {
	case "done":
		return fmt.Sprintf("%s: the tick was completed by %s (%s)", e.Key, who, e.Status)
	case "nontakeable":
		return fmt.Sprintf("%s: the tick's %s is never taken over: it may go on running after losing its lock (--on-lock-lost continue, or no guard process)", e.Key, who)
	case "attempts":
		return fmt.Sprintf("%s: the tick had %d attempts, the last %s (--max-attempts); not taken over", e.Key, e.Attempt, who)
	}
	return fmt.Sprintf("%s: standby ended (%s) for %s", e.Key, e.Why, who)
}

// TickAttempter is a Lease that knows which attempt of its tick it is: 1 for the first
// run of a tick, 2 for the first takeover…, and the run it took over ("" = none).
type TickAttempter interface {
	TickAttempt() (attempt int, takeoverOf string)
}

// StandbyMargin is what a standby adds to a lost run's lease before it believes the
// lease over on its own clock: max(1s, ttl/10), for clock rates and the server's own
// expiry sweep.
func StandbyMargin(ttl time.Duration) time.Duration { return max(time.Second, ttl/10) }

// ReleaseWatcher is a backend that can wake a standby when a key's lock is let go (the
// Redis release channel), so that a completed or resumable tick is known at once rather
// than at the next poll. stop ends the watch; wake gets a value (without blocking) per
// release. A backend that cannot watch returns a nil stop.
type ReleaseWatcher interface {
	WatchRelease(ctx context.Context, key string) (wake <-chan struct{}, stop func())
}
