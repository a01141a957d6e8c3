package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestRedisClaimMarks: one claim that finds two ticks never claimed and the key's fencing
// counter gone although this host knew it reads every mark of acquire.lua's reply (µs
// as decimal strings), says the data loss through Warn, and copies it into the lease's
// entry.
func TestRedisClaimMarks(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	key := "marks"
	t.Cleanup(func() {
		for _, k := range []string{l.lockKey(key), l.fenceKey(key), l.tickKey(key), l.runsKey(key)} {
			redistest.Do(addr, "DEL", k)
		}
	})
	tick := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	req := redisTestReq(key)
	req.Tick, req.Schedule, req.Zone, req.Canonical = tick, "* * * * *", "UTC", "* * * * * UTC"
	req.PrevTick = tick.Add(-time.Minute)
	lease := redisMustAcquire(t, l, req)
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := redistest.Do(addr, "DEL", l.fenceKey(key)); err != nil {
		t.Fatal(err)
	}

	req.RunID, req.Known = "run-b", true
	req.Tick, req.PrevTick = tick.Add(3*time.Minute), tick.Add(2*time.Minute)
	var warned []error
	req.Warn = func(err error) { warned = append(warned, err) }
	lease = redisMustAcquire(t, l, req)
	defer lease.Release(context.Background())
	m := lease.(*redisLease).marks
	if !m.DataLoss || m.NeverFiredFrom != tick.UnixMicro()+1 || m.NeverFiredTo != tick.Add(2*time.Minute).UnixMicro() {
		t.Errorf("marks %+v; want data loss and never fired from just after %v to %v", m, tick, tick.Add(2*time.Minute))
	}
	var dl *lockrun.DataLossError
	if len(warned) != 1 || !errors.As(warned[0], &dl) {
		t.Errorf("warned %v; want one *DataLossError", warned)
	}
}
