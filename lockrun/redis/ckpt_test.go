package redis

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestCheckpointFenced: a save is written only while the lock holds the lease's token:
// refused after the key is deleted, after unlock --force revoked it, and after another
// holder took it; mark copies only the run's own scope; reset is refused while the key
// is held.
func TestCheckpointFenced(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()
	lease := redisMustAcquire(t, l, redisTestReq("ck")).(*redisLease)
	save := func(s *redisLease, v string) error {
		return s.SaveCheckpoint(ctx, &lockrun.Checkpoint{Value: []byte(v), Scope: "tick-1", RunID: s.runID})
	}
	if err := save(lease, "one"); err != nil {
		t.Fatal(err)
	}
	if err := lease.MarkCheckpointSucceeded(ctx, "another-scope"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.Checkpoints(ctx, "ck"); ok != nil {
		t.Fatalf("mark of another scope copied %q", ok.Value)
	}
	if _, err := l.ResetCheckpoints(ctx, "ck", false); !errors.As(err, new(*lockrun.HeldError)) {
		t.Fatalf("reset while held: %v, want a HeldError", err)
	}
	if _, err := l.Unlock(ctx, "ck", true); err != nil {
		t.Fatal(err)
	}
	if err := save(lease, "revoked"); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("save after unlock --force: %v, want ErrLockLost", err)
	}
	if _, err := redistest.Do(addr, "DEL", l.lockKey("ck")); err != nil {
		t.Fatal(err)
	}
	if err := save(lease, "deleted"); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("save after DEL: %v, want ErrLockLost", err)
	}
	req := redisTestReq("ck")
	req.RunID = "run-b"
	other := redisMustAcquire(t, l, req).(*redisLease)
	if err := save(lease, "stale"); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("save after another run took the lock: %v, want ErrLockLost", err)
	}
	if err := save(other, "two"); err != nil {
		t.Fatal(err)
	}
	if err := other.MarkCheckpointSucceeded(ctx, "tick-1"); err != nil {
		t.Fatal(err)
	}
	last, ok, err := l.Checkpoints(ctx, "ck")
	if err != nil || last == nil || string(last.Value) != "two" || last.RunID != "run-b" || last.Token != other.FencingToken() ||
		ok == nil || string(ok.Value) != "two" || last.Saved.IsZero() {
		t.Fatalf("after the saves: %+v, %+v, %v; want run-b's two, newest and last success", last, ok, err)
	}
	if c, err := lease.LoadCheckpoint(ctx, "tick-2", false); c != nil || err != nil {
		t.Fatalf("load of another scope: %+v, %v; want none", c, err)
	}
	other.Release(ctx)
	if n, err := l.ResetCheckpoints(ctx, "ck", false); n != 2 || err != nil {
		t.Fatalf("reset: %d, %v; want both records removed", n, err)
	}
}

// BenchmarkCheckpointSave: one save's backend write (the fenced script) on loopback
// Redis; reports p50 and p99.
func BenchmarkCheckpointSave(b *testing.B) {
	addr := redistest.Addr(b)
	l, err := New(Options{URL: "redis://" + addr + "/0", Prefix: "bench-ckpt:", Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	lease, err := l.Acquire(ctx, lockrun.Request{Key: "ck", TTL: time.Minute, Node: "n", PID: 1, RunID: "r"})
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release(ctx)
	cl := lease.(lockrun.CheckpointLease)
	value := []byte("customer-000123456")
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := cl.SaveCheckpoint(ctx, &lockrun.Checkpoint{Value: value, Scope: "s", RunID: "r"}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}
