package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestSuspendStopsTakeover: a standby about to take over a lost run finds the key
// suspended meanwhile: it ends suspended, takes neither lock nor tick, and the lost run's
// entry is left as it was.
func TestSuspendStopsTakeover(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()
	redisMustAcquire(t, l, standbyTestReq("a", "")) // never released: its host is lost
	sb := standbyTestReq("b", "lost")
	var w *lockrun.StandbyWaitError
	if _, err := l.Acquire(ctx, sb); !errors.As(err, &w) {
		t.Fatalf("beside a live run: %v; want a wait", err)
	}
	if err := l.Suspend(ctx, "bill", &lockrun.Suspension{By: "ops@box", Since: time.Now(), Reason: "stop"}); err != nil {
		t.Fatal(err)
	}
	redistest.Do(addr, "DEL", l.lockKey("bill")) // the lease ended on the server
	sb.Standby.LostRun = "a"
	var se *lockrun.SuspendedError
	if lease, err := l.Acquire(ctx, sb); !errors.As(err, &se) || se.Suspension.By != "ops@box" || lease != nil {
		t.Fatalf("a takeover of a suspended key: %v, %v; want *SuspendedError", lease, err)
	}
	if v, _ := redistest.Do(addr, "EXISTS", l.lockKey("bill")); v != "0" {
		t.Fatalf("the suspended standby took the lock")
	}
	if v, _ := redistest.Do(addr, "ZSCORE", l.standbyKey("bill"), "b"); v != "" {
		t.Errorf("the suspended standby kept its slot (%s)", v)
	}
	es, err := l.Fleet(ctx, "bill", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.RunID == "a" && strings.Contains(e.Error, "taken over") {
			t.Fatalf("the lost run's entry says it was taken over: %+v", e)
		}
	}
	if _, err := l.Resume(ctx, "bill"); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, sb)
	if err != nil {
		t.Fatalf("after resume: %v; want the takeover", err)
	}
	lease.Release(ctx)
}

// TestSuspendSentinelCluster: suspend, a suspended acquire (its tick's entry written in
// the lock's slot) and resume on Sentinel and on a Cluster, for keys on every master.
func TestSuspendSentinelCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment and a Redis Cluster")
	}
	for _, name := range []string{"sentinel", "cluster"} {
		t.Run(name, func(t *testing.T) {
			var url string
			if name == "sentinel" {
				url = redistest.StartSentinel(t).URL()
			} else {
				url = redistest.StartCluster(t).URL()
			}
			l := haLocker(t, url)
			ctx := context.Background()
			for _, k := range []string{"s-a", "s-b", "s-c", "s-d"} {
				if err := l.Suspend(ctx, k, &lockrun.Suspension{By: "ops@box", Since: time.Now(), Reason: k}); err != nil {
					t.Fatalf("Suspend(%s): %v", k, err)
				}
				req := redisTestReq(k)
				req.Tick, req.Schedule, req.Zone = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), "0 9 * * *", "UTC"
				req.Entry = &lockrun.RunRecord{RunID: req.RunID, Node: "n", Status: "running", Tick: req.Tick, Tries: 1}
				var se *lockrun.SuspendedError
				if _, err := l.Acquire(ctx, req); !errors.As(err, &se) || se.Suspension.Reason != k || se.RecordErr != "" {
					t.Fatalf("Acquire(%s) while suspended: %v; want *SuspendedError with its entry written", k, err)
				}
				es, err := l.Fleet(ctx, k, 0)
				if err != nil || len(es) != 1 || es[0].Status != "suspended" {
					t.Fatalf("Fleet(%s): %+v, %v; want one suspended entry", k, es, err)
				}
				if s, err := l.Resume(ctx, k); err != nil || s.Reason != k {
					t.Fatalf("Resume(%s): %v, %v", k, s, err)
				}
				lease, err := l.Acquire(ctx, req)
				if err != nil {
					t.Fatalf("Acquire(%s) after resume: %v", k, err)
				}
				lease.Release(ctx)
			}
		})
	}
}

// TestResumeForgivesUnfiredTicks: ticks that no host fired while the key was suspended
// (cron stopped too, for the window) are not reported never fired by the claim after the
// resume; ticks unfired without a suspension still are.
func TestResumeForgivesUnfiredTicks(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	ctx := context.Background()
	day := func(run string, d int) lockrun.Request {
		req := standbyTestReq(run, "")
		req.Tick = req.Tick.AddDate(0, 0, d)
		req.PrevTick = req.Tick.AddDate(0, 0, -1)
		req.Canonical = "0 9 * * * UTC"
		req.Entry.Tick = req.Tick
		return req
	}
	redisMustAcquire(t, l, day("a", 0)).Release(ctx)
	if err := l.Suspend(ctx, "bill", &lockrun.Suspension{By: "ops@box", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Resume(ctx, "bill"); err != nil {
		t.Fatal(err)
	}
	redisMustAcquire(t, l, day("b", 3)).Release(ctx) // days 1 and 2 never fired, while suspended
	never := func() int {
		es, err := l.Fleet(ctx, "bill", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if e.Status == lockrun.NeverFiredStatus {
				n++
			}
		}
		return n
	}
	if n := never(); n != 0 {
		t.Fatalf("%d never_fired entries after a resume; want none", n)
	}
	redisMustAcquire(t, l, day("c", 6)).Release(ctx) // days 4 and 5: no suspension
	if n := never(); n != 1 {
		t.Fatalf("%d never_fired entries for ticks unfired without a suspension; want 1", n)
	}
}

// TestSuspensionsBatch: the batch reader finds the suspended keys among many.
func TestSuspensionsBatch(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	ctx := context.Background()
	for _, k := range []string{"b1", "b3"} {
		if err := l.Suspend(ctx, k, &lockrun.Suspension{By: "ops@box", Since: time.Now(), Reason: k}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := lockrun.SuspensionsOf(ctx, l, []string{"b1", "b2", "b3"})
	if err != nil || len(got) != 2 || got["b1"].Reason != "b1" || got["b3"].Reason != "b3" {
		t.Fatalf("SuspensionsOf = %v, %v; want b1 and b3", got, err)
	}
}
