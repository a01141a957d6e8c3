package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

func standbyTestReq(run string, mode string) lockrun.Request {
	req := redisTestReq("bill")
	req.RunID, req.Node = run, "host-"+run
	req.Tick, req.Schedule, req.Zone = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), "0 9 * * *", "UTC"
	req.Entry = &lockrun.RunRecord{RunID: run, Node: req.Node, Status: "running", Tick: req.Tick, Tries: 1}
	req.Standby = lockrun.StandbyRequest{Mode: mode, Slots: 2, MaxAttempts: 3, SlotTTL: time.Minute}
	return req
}

// TestStandbyNeverOnAGuess: the acquire script takes a lost run's tick over only when the
// lock is gone AND the standby's own clock says its lease ended (LostRun); a lock gone
// without that is waited for, and a live lock is never taken, whatever LostRun says.
func TestStandbyNeverOnAGuess(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	redisMustAcquire(t, l, standbyTestReq("a", "")) // never released: its host is lost
	sb := standbyTestReq("b", "lost")
	sb.Standby.LostRun = "a"
	var w *lockrun.StandbyWaitError
	if _, err := l.Acquire(context.Background(), sb); !errors.As(err, &w) || w.Holder == nil || w.RunID != "a" {
		t.Fatalf("a live lock with LostRun set: %v; want a wait", err)
	}
	redistest.Do(addr, "DEL", l.lockKey("bill")) // the lease ended on the server
	sb.Standby.LostRun = ""
	if _, err := l.Acquire(context.Background(), sb); !errors.As(err, &w) || w.Holder != nil {
		t.Fatalf("a lock gone, not yet over on the standby's clock: %v; want a wait", err)
	}
	sb.Standby.LostRun = "a"
	lease, err := l.Acquire(context.Background(), sb)
	if err != nil {
		t.Fatalf("a lost run, confirmed: %v; want a takeover", err)
	}
	if at, of := lease.(lockrun.TickAttempter).TickAttempt(); at != 2 || of != "a" {
		t.Fatalf("takeover is attempt %d of %q; want 2 of a", at, of)
	}
	es, err := l.Fleet(context.Background(), "bill", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.RunID == "a" && e.Status != "abandoned" {
			t.Fatalf("the lost run's entry is %s; want abandoned", e.Status)
		}
	}
	// A third standby: the tick's run is now b, alive; with --max-attempts 2 it ends.
	c := standbyTestReq("c", "lost")
	c.Standby.MaxAttempts = 2
	var end *lockrun.StandbyEndError
	if _, err := l.Acquire(context.Background(), c); !errors.As(err, &end) || end.Why != "attempts" {
		t.Fatalf("a standby past --max-attempts: %v; want its end", err)
	}
	lease.Release(context.Background())
}

// TestStandbyNonTakeable: a claim recorded as non-takeable is never taken over, lost or not.
func TestStandbyNonTakeable(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	a := standbyTestReq("a", "")
	a.Standby.NonTakeable = true
	redisMustAcquire(t, l, a)
	redistest.Do(addr, "DEL", l.lockKey("bill"))
	sb := standbyTestReq("b", "lost")
	sb.Standby.LostRun = "a"
	var end *lockrun.StandbyEndError
	if _, err := l.Acquire(context.Background(), sb); !errors.As(err, &end) || end.Why != "nontakeable" {
		t.Fatalf("a non-takeable lost run: %v; want the standby's end", err)
	}
}

// TestStandbyGivenBack: a tick whose run gave it back (its job never started) is claimed
// by the standby as the tick's first attempt, with no takeover.
func TestStandbyGivenBack(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	a := redisMustAcquire(t, l, standbyTestReq("a", ""))
	var w *lockrun.StandbyWaitError
	if _, err := l.Acquire(context.Background(), standbyTestReq("b", "lost")); !errors.As(err, &w) {
		t.Fatalf("beside a live run: %v; want a wait", err)
	}
	a.GiveBackTick()
	a.Release(context.Background())
	lease, err := l.Acquire(context.Background(), standbyTestReq("b", "lost"))
	if err != nil {
		t.Fatalf("after a give-back: %v; want the claim", err)
	}
	if at, of := lease.(lockrun.TickAttempter).TickAttempt(); at != 1 || of != "" {
		t.Fatalf("claim after a give-back is attempt %d of %q; want 1 of none", at, of)
	}
	lease.Release(context.Background())
}
