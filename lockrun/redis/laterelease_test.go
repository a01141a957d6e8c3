package redis

import (
	"context"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestLateReleaseEndsWhenSent: a release held up on the way (here a slow link; in the
// torture a paused server) arrives after the lock expired and another run took and let it
// go. The first run's entry ends when its release was sent, not when it arrived, so the
// two runs do not overlap in the fleet's record and neither is marked DUPLICATE.
func TestLateReleaseEndsWhenSent(t *testing.T) {
	addr := redistest.Addr(t)
	p, err := faultproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()
	prefix := redisPrefix(t)
	slow := newRedisTestLocker(t, p.Addr, func(o *Options) { o.Prefix, o.Timeout = prefix, 10*time.Second })
	direct := newRedisTestLocker(t, addr, func(o *Options) { o.Prefix = prefix })
	const key = "late"

	reqA := redisTestReq(key)
	reqA.TTL, reqA.RunID = 200*time.Millisecond, "run-a"
	a := redisMustAcquire(t, slow, reqA)
	a.SetRecord(&lockrun.RunRecord{RunID: "run-a", Node: "host-a", Status: "succeeded", Tries: 1})
	p.Set(faultproxy.Latency, 1500*time.Millisecond)
	released := make(chan error, 1)
	go func() { released <- a.Release(ctx) }()

	// The lease ends while the release is on its way; another host's run takes the lock.
	reqB := redisTestReq(key)
	reqB.RunID, reqB.Node = "run-b", "host-b"
	var b lockrun.Lease
	for b == nil {
		l, err := direct.Acquire(ctx, reqB)
		if err == nil {
			b = l
			break
		}
		select {
		case err := <-released:
			t.Fatalf("run-a's release returned (%v) before run-b could take the expired lock: the proxy did not hold it back", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	b.SetRecord(&lockrun.RunRecord{RunID: "run-b", Node: "host-b", Status: "succeeded", Tries: 1})
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-released:
		t.Fatalf("run-a's release returned (%v) before run-b had run: the test proves nothing", err)
	default:
	}
	if err := <-released; err == nil {
		t.Fatal("run-a's late release succeeded; want the lock found gone")
	}

	es, err := direct.Fleet(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]lockrun.FleetEntry{}
	for _, e := range es {
		byID[e.RunID] = e
	}
	ea, eb := byID["run-a"], byID["run-b"]
	if ea.EndUS == 0 || eb.StartUS == 0 {
		t.Fatalf("entries %+v: want both runs completed", es)
	}
	if ea.EndUS > eb.StartUS {
		t.Errorf("run-a ends at %d, after run-b started at %d: its late release stretched it over run-b", ea.EndUS, eb.StartUS)
	}
	for _, e := range es {
		if e.Duplicate {
			t.Errorf("entry %s is DUPLICATE; no two runs held the lock at once", e.RunID)
		}
	}
}
