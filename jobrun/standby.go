package jobrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cronlock/child"
	"cronlock/lockrun"
	"cronlock/runstatus"
	"cronlock/tty"
)

// A standby (--standby) is a run that found its tick claimed by a run that may still be
// running. It waits beside that run, asking the backend again at most every poll and
// just after the lock's lease would end, and takes the tick over only when the run is
// lost: its lock gone with no release, and its lease over on this host's own
// CLOCK_BOOTTIME as well (the last lease it saw, plus lockrun.StandbyMargin). The
// backend confirms the loss in the same step that claims the tick and the lock, so two
// standbys can never both take it.

// standbyBound is when a standby gives up: tick + --start-deadline when given, else the
// schedule's next tick (a standby never outlives its tick).
func (r *runner) standbyBound() time.Time {
	if r.o.StartDeadline > 0 {
		return r.tick.Add(r.o.StartDeadline)
	}
	return r.o.Schedule.Next(r.tick)
}

// standby waits as a standby after the first ask found w. It returns the lease of a
// claim (a takeover, or a tick given back, claimed as attempt 1), or ends the run (done)
// with code, its row recorded.
func (r *runner) standby(sig *child.Signals, req lockrun.Request, w *lockrun.StandbyWaitError) (lockrun.Lease, int, bool) {
	o := r.o
	req.Wait, req.OnTry = 0, nil // each ask is one round trip; the waiting is here
	bound := r.standbyBound()
	now := lockrun.Boottime
	margin := lockrun.StandbyMargin(o.TTL)
	poll := min(time.Second, max(o.TTL/3, 10*time.Millisecond))
	r.verbosef("%s: the %s tick is run by %s (run %s); waiting as a standby until %s", o.Key, r.tickName(), tty.Escape(w.Node), tty.Escape(w.RunID), r.zoned(bound))
	// leaseEnd is when the tick's run's lease ends at the latest on this host's clock:
	// from the last time its lock was seen alive, else from the first sighting of it gone.
	var leaseEnd time.Duration
	lostRun := ""
	// silentSince is when the backend stopped answering (0 while it answers). A failover
	// or a restart is ridden out for rideOut: asking again is no guess, as a takeover
	// still needs the backend's own confirmation; past it, the backend is gone.
	var silentSince time.Duration
	rideOut := 2*o.TTL + margin
	// The release channel wakes the standby when the tick's run lets go; polling covers
	// a message lost and a lease that ended, which publishes nothing.
	var wake <-chan struct{}
	if rw, ok := r.locker.(lockrun.ReleaseWatcher); ok {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if c, stop := rw.WatchRelease(ctx, o.Key); stop != nil {
			defer stop()
			wake = c
		}
	}
	for {
		seen := now()
		switch {
		case w.Holder != nil && w.Holder.RunID == w.RunID && w.PTTL >= 0:
			leaseEnd = seen + w.PTTL + margin
			lostRun = ""
		case w.Holder == nil && leaseEnd == 0:
			leaseEnd = seen + o.TTL + margin // never seen alive: a whole lease of ours
		}
		d := poll
		if w.Holder == nil {
			if left := leaseEnd - seen; left <= 0 {
				lostRun = w.RunID // over on this host's clock: the backend may confirm it
				d = 0
			} else {
				d = min(d, left)
			}
		} else if w.PTTL >= 0 {
			d = min(d, w.PTTL+margin/2)
		}
		if silentSince != 0 {
			d = max(d, poll) // a silent backend is asked again once a poll, not in a spin
		}
		left := bound.Sub(wallNow())
		if left <= 0 {
			return nil, r.standbyGiveUp(w, bound), true
		}
		d = min(d, left)
		if d > 0 {
			if s := sleepWake(sig, d, wake); s != nil {
				return nil, r.interrupted(s), true
			}
			// The bound again, on waking: a standby that was frozen (SIGSTOP, a suspended
			// VM) past it must not take the tick over late.
			if !wallNow().Before(bound) {
				return nil, r.standbyGiveUp(w, bound), true
			}
		}
		if lostRun != "" && w.Holder == nil {
			req.Standby.LostRun = lostRun
		} else {
			req.Standby.LostRun = ""
		}
		res, s := r.tryAcquire(sig, req)
		if s != nil {
			return nil, r.interrupted(s), true
		}
		var nw *lockrun.StandbyWaitError
		var end *lockrun.StandbyEndError
		var tick *lockrun.TickError
		var held *lockrun.HeldError
		var susp *lockrun.SuspendedError
		switch {
		case res.err == nil:
			return res.lease, 0, false
		case errors.As(res.err, &susp):
			// Suspended while this run waited: no takeover, whatever became of the tick.
			return nil, r.suspended(susp), true
		case errors.As(res.err, &nw):
			silentSince = 0
			if nw.RunID != w.RunID {
				leaseEnd = 0 // another attempt of the tick: its own lease
			}
			w = nw
		case errors.As(res.err, &end):
			return nil, r.standbyEnd(end), true
		case errors.As(res.err, &tick):
			return nil, r.tickSkip(tick), true
		case errors.As(res.err, &held):
			silentSince = 0
			// The tick is free (given back) but another run holds the key's lock: wait on.
			w = &lockrun.StandbyWaitError{Key: o.Key, Holder: held.Holder, PTTL: -1}
			if held.Holder != nil {
				w.PTTL = held.Holder.TTLLeft
			}
		case !lockrun.IsRefusal(res.err) && (silentSince == 0 || now()-silentSince < rideOut):
			if silentSince == 0 {
				silentSince = now()
			}
			r.verbosef("%s: standby for the %s tick: %v; asking again", o.Key, r.tickName(), res.err)
		default:
			// The backend went away while this run waited: never a takeover on a guess.
			return nil, r.fail(ExitFailed, "%s: standby for the %s tick: %v; not taken over", o.Key, r.tickName(), res.err), true
		}
	}
}

// standbyEnd records a standby that ends without taking the tick over.
func (r *runner) standbyEnd(e *lockrun.StandbyEndError) int {
	o := r.o
	r.row.Status = runstatus.Skipped
	r.row.Holder = fmt.Sprintf("%s (run %s)", e.Node, e.RunID)
	r.row.Error = e.Error()
	code := o.ConflictExitCode
	r.row.Exit = &code
	r.recordInsert()
	if e.Why == "done" {
		r.verbosef("skipped: %s", tty.Escape(e.Error()))
	} else {
		r.errorf("%s", tty.Escape(e.Error())) // a tick nobody completes is news
	}
	return code
}

// standbyGiveUp records a standby whose bound passed while the tick's run was alive.
func (r *runner) standbyGiveUp(w *lockrun.StandbyWaitError, bound time.Time) int {
	o := r.o
	r.row.Status = runstatus.Skipped
	r.row.Holder = fmt.Sprintf("%s (run %s)", w.Node, w.RunID)
	r.row.Error = fmt.Sprintf("%s: standby for the %s tick ended at %s (--start-deadline, else the next tick) before run %s on %s was known to be lost; not taken over",
		o.Key, r.tickName(), r.zoned(bound), w.RunID, w.Node)
	code := o.ConflictExitCode
	r.row.Exit = &code
	r.recordInsert()
	r.errorf("%s", tty.Escape(r.row.Error))
	return code
}

// sleepWake is sleepOrStop that also ends when wake gets a value.
func sleepWake(sig *child.Signals, d time.Duration, wake <-chan struct{}) os.Signal {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-wake:
			return nil
		case s := <-sig.C:
			if child.IsStopSignal(s) {
				return s
			}
		}
	}
}
