package local

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cronlock/lockrun"
)

// The waits of lockrun's TestKeeperAfterWait: none, shorter than the TTL, longer than
// the TTL, and longer than TTL + grace.
var keeperWaits = []time.Duration{0, 10 * time.Second, 45 * time.Second, 50 * time.Second, 10 * time.Minute}

// TestKeeperAfterWaitLocal: the same waits on the real local backend, with its clock and
// the keeper's the fake clock of synctest: a lease taken after another holder let go
// (which a waiting Acquire sees by polling here: inotify would block outside the bubble's
// clock) counts from the flock that took it, and is checked every interval from there.
func TestKeeperAfterWaitLocal(t *testing.T) {
	localInotify = false
	defer func() { localInotify = true }()
	// A coarse poll: fewer turns of the waiting loop, and it bounds how late Sent may be.
	defer func(d time.Duration) { localWaitPollNoInotify = d }(localWaitPollNoInotify)
	localWaitPollNoInotify = 250 * time.Millisecond
	const interval = 10 * time.Second
	for _, wait := range keeperWaits {
		t.Run(wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				now := func() time.Duration { return time.Since(start) }
				l := newTestLocker(t)
				l.now = now
				holder := mustAcquire(t, l, localReq("kw", "holder"))
				go func() {
					time.Sleep(wait)
					holder.Release(context.Background())
				}()
				req := localReq("kw", "waiter")
				req.Wait = wait + time.Minute
				lease, err := l.Acquire(context.Background(), req)
				if err != nil {
					t.Fatalf("Acquire after a wait of %v: %v", wait, err)
				}
				defer lease.Release(context.Background())
				if lease.Sent() < wait || lease.Sent() > wait+localWaitPollNoInotify {
					t.Fatalf("Sent = %v, want the flock that took the lock, just after the holder let go at %v", lease.Sent(), wait)
				}
				var mu sync.Mutex
				var warned []error
				k := &lockrun.Keeper{Lease: lease, Interval: interval, Grace: time.Second, Now: now,
					Warn: func(err error) { mu.Lock(); warned = append(warned, err); mu.Unlock() }}
				ctx, cancel := context.WithTimeout(context.Background(), 3*interval+time.Second)
				defer cancel()
				select {
				case loss := <-k.Run(ctx):
					t.Fatalf("a local lease taken after a wait of %v was lost: %v", wait, loss.Err)
				case <-ctx.Done():
				}
				synctest.Wait()
				if len(warned) > 0 {
					t.Fatalf("renewals failed: %v", warned)
				}
				rec := readTestRecord(t, l, "kw")
				if rec.RunID != "waiter" || rec.Renewed == rec.Acquired {
					t.Fatalf("lock file record %+v: want the waiter's, renewed since it was acquired", rec)
				}
			})
		})
	}
}
