package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

func standbyReq(run string, tick time.Time, mode string) lockrun.Request {
	req := localReq("bill", run)
	req.Tick, req.Schedule, req.Zone = tick, "* * * * *", "UTC"
	req.Standby = lockrun.StandbyRequest{Mode: mode, Slots: 1, MaxAttempts: 3}
	return req
}

// TestLocalStandby: a standby waits while the tick's run holds the flock, ends skipped
// when that run completed, and takes over (attempt 2) a run whose holder died (its flock
// freed with its tick still running); a second standby finds no slot.
func TestLocalStandby(t *testing.T) {
	tick := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	for _, died := range []bool{false, true} {
		l := newTestLocker(t)
		holder := mustAcquire(t, l, standbyReq("runA", tick, ""))
		sb := &Locker{dir: l.dir}
		defer sb.Close()
		var w *lockrun.StandbyWaitError
		if _, err := sb.Acquire(context.Background(), standbyReq("runB", tick, "lost")); !errors.As(err, &w) || w.RunID != "runA" {
			t.Fatalf("standby beside a live holder: %v; want a wait for runA", err)
		}
		var te *lockrun.TickError
		if _, err := (&Locker{dir: l.dir}).Acquire(context.Background(), standbyReq("runC", tick, "lost")); !errors.As(err, &te) {
			t.Fatalf("a second standby with --standbys 1: %v; want a tick skip", err)
		}
		if died {
			unix.Close(holder.(*localLease).File()) // the holder's process is gone: no release
		} else {
			holder.SetRecord(&lockrun.RunRecord{Status: "succeeded"})
			holder.Release(context.Background())
		}
		lease, err := sb.Acquire(context.Background(), standbyReq("runB", tick, "lost"))
		var end *lockrun.StandbyEndError
		switch {
		case !died && (!errors.As(err, &end) || end.Why != "done" || end.Status != "succeeded"):
			t.Fatalf("after a completed run: %v; want the standby's end naming succeeded", err)
		case died && err != nil:
			t.Fatalf("after the holder died: %v; want a takeover", err)
		case died:
			if at, of := lease.(lockrun.TickAttempter).TickAttempt(); at != 2 || of != "runA" {
				t.Fatalf("takeover is attempt %d of %q; want 2 of runA", at, of)
			}
			lease.Release(context.Background())
		}
	}
}
