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
