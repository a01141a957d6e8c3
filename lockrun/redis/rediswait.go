package redis

import (
	"context"
	"fmt"
	"time"

	"cronlock/lockrun"
)

// Waiting for a held Redis lock (--wait): a subscription to the lock's release channel
// wakes the waiter at once, and polling covers a release it missed.

// acquireWait is Acquire with req.Wait > 0.
func (l *Locker) acquireWait(ctx context.Context, req lockrun.Request, token string) (lockrun.Lease, error) {
	deadline := time.Now().Add(req.Wait)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	// Subscribe before the first attempt, so that a release between that attempt and the
	// wait is not missed. Without the subscription (an ACL without channel rights, a
	// hiccup) the waiter still polls.
	wake := make(chan struct{}, 1)
	if stop := l.subscribe(wctx, req.Key, wake); stop != nil {
		defer stop()
	}

	poll := l.poll
	if poll <= 0 {
		poll = min(time.Second, req.TTL/3)
	}
	poll = max(poll, 10*time.Millisecond)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for first := true; ; first = false {
		if !first {
			l.followMaster(ctx, 0) // the master may have changed since the last attempt
		}
		// Each attempt gets the full operation time-out even when the wait is almost over.
		lease, held, err := l.acquireOnce(ctx, req, token, "")
		if err != nil && (!retryableRedisError(err) || ctx.Err() != nil) {
			return nil, err
		}
		if err == nil && held == nil {
			return lease, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			if err != nil {
				return nil, err // unreachable when the wait ended: that, not a holder, is the news
			}
			return nil, &lockrun.HeldError{Key: req.Key, Holder: held}
		}
		// An unreachable server (a restart, a network blip) is asked again at the next
		// poll until the wait ends: the waiter is there to wait. Also wake just after the
		// holder's lease runs out: an expiry publishes nothing.
		sleep := min(poll, left)
		if held != nil && held.TTLLeft > 0 {
			sleep = min(sleep, held.TTLLeft+2*time.Millisecond)
		}
		timer.Reset(sleep)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for lock %s: %w", req.Key, ctx.Err())
		}
	}
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
