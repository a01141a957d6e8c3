package lockrun

import (
	"context"
	"fmt"
	"time"
)

// waitPoll is how often a waiter for a held lock asks again when nothing woke it: at
// most every second, and often enough (a third of the TTL) to take a lock soon after a
// holder that died lets it expire, which announces nothing.
func waitPoll(ttl time.Duration) time.Duration {
	return max(min(time.Second, ttl/3), 10*time.Millisecond)
}

// A Waiter is what a backend gives Wait to wait for a held lock (--wait).
type Waiter struct {
	// Attempt asks for the lock once. held is the holder when the lock is someone
	// else's; err an error that is retried while Retryable says so.
	Attempt func(ctx context.Context) (lease Lease, held *Holder, err error)
	// Retryable reports whether an attempt's error is a passing one (a restart, a
	// network blip): the waiter is there to wait, so it asks again at the next poll.
	Retryable func(error) bool
	// Sleep waits for at most d for the lock to be let go (the backend's release
	// notice), or until ctx ends, whose error it then returns. held is the last
	// attempt's holder (nil after an error).
	Sleep func(ctx context.Context, d time.Duration, held *Holder) error
	// Poll bounds each Sleep (waitPoll of the TTL when 0).
	Poll time.Duration
}

// Wait takes req.Key for a backend, asking again whenever the holder may have let go,
// until req.Wait has passed since it began: then it returns *HeldError naming the last
// holder, or the last attempt's error if the backend could not be asked. Each attempt
// gets its whole operation time-out, even when the wait is almost over.
func Wait(ctx context.Context, req Request, w Waiter) (Lease, error) {
	deadline := time.Now().Add(req.Wait)
	poll := w.Poll
	if poll <= 0 {
		poll = waitPoll(req.TTL)
	}
	poll = max(poll, 10*time.Millisecond)
	for {
		lease, held, err := w.Attempt(ctx)
		if err != nil && (!w.Retryable(err) || ctx.Err() != nil) {
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
			return nil, &HeldError{Key: req.Key, Holder: held}
		}
		if err := w.Sleep(ctx, min(poll, left), held); err != nil {
			return nil, fmt.Errorf("wait for lock %s: %w", req.Key, err)
		}
	}
}
