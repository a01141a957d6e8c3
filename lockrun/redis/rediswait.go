package redis

import (
	"context"
	"time"

	"cronlock/lockrun"
)

// Waiting for a held Redis lock (--wait): a subscription to the lock's release channel
// wakes the waiter at once, and polling covers a release it missed.

// acquireWait is Acquire with req.Wait > 0.
func (l *Locker) acquireWait(ctx context.Context, req lockrun.Request, token string) (lockrun.Lease, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, req.Wait)
	defer cancel()

	// Subscribe before the first attempt, so that a release between that attempt and the
	// wait is not missed. Without the subscription (an ACL without channel rights, a
	// hiccup) the waiter still polls.
	wake := make(chan struct{}, 1)
	if stop := l.subscribe(wctx, req.Key, wake); stop != nil {
		defer stop()
	}
	req.Wait -= time.Since(start) // the wait counts from before the subscription
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	return lockrun.Wait(ctx, req, lockrun.Waiter{
		Attempt: func(ctx context.Context) (lockrun.Lease, *lockrun.Holder, error) {
			if !first {
				l.srv.FollowMaster(ctx, 0) // the master may have changed since the last attempt
			}
			first = false
			lease, held, err := l.acquireOnce(ctx, req, token, "")
			if lease == nil {
				return nil, held, err // not a typed nil in the interface
			}
			return lease, held, err
		},
		Retryable: retryableRedisError,
		Sleep: func(ctx context.Context, d time.Duration, held *lockrun.Holder) error {
			// Also wake just after the holder's lease runs out: an expiry publishes nothing.
			if held != nil && held.TTLLeft > 0 {
				d = min(d, held.TTLLeft+2*time.Millisecond)
			}
			timer.Reset(d)
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		},
		Poll: l.poll,
	})
}

// subscribe listens on key's release channel and signals wake (without blocking) on each
// message until ctx ends. It returns nil when the subscription could not be confirmed,
// else a function that ends it and waits for its goroutine.
func (l *Locker) subscribe(ctx context.Context, key string, wake chan<- struct{}) (stop func()) {
	sctx, cancel := context.WithTimeout(ctx, l.timeout)
	ps := l.c.Subscribe(sctx, l.channel(key))
	_, err := ps.Receive(sctx) // the SUBSCRIBE confirmation: from now on nothing is missed
	cancel()
	if err != nil {
		ps.Close()
		return nil
	}
	// Its own context: stop must end the goroutine at once, not when the wait runs out
	// (after Close, ReceiveMessage fails at once and would otherwise loop until then).
	ctx, cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, err := ps.ReceiveMessage(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// The connection dropped; go-redis re-subscribes on the next receive.
				// Polling covers the gap, so back off instead of spinning.
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return func() {
		cancel()
		ps.Close() // ends a ReceiveMessage blocked on the socket
		<-done
	}
}

// WatchRelease subscribes to key's release channel for a standby (one connection for as
// long as it waits); stop is nil when the subscription could not be confirmed.
func (l *Locker) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func()) {
	wake := make(chan struct{}, 1)
	stop := l.subscribe(ctx, key, wake)
	if stop == nil {
		return nil, nil
	}
	return wake, stop
}
