package lockrun_test

// Keeper tests on the fake lease of internal/locktest, on the fake clock of
// testing/synctest: what a loss says, and who hears about failed renewals.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cronlock/internal/locktest"
	"cronlock/lockrun"
)

// renewals is a lease's Renew that answers from answer and notes each call's error.
type renewals struct {
	mu     sync.Mutex
	n      int
	answer func(ctx context.Context, n int) error
}

func (r *renewals) renew(ctx context.Context) error {
	r.mu.Lock()
	n := r.n
	r.n++
	r.mu.Unlock()
	return r.answer(ctx, n)
}

// TestKeeperLoss: how a lease is lost, and what the loss and the warnings say. Each case
// runs a Keeper with a 3s lease (renewed every second, --grace 10s, so g = ttl/4) taken
// at 0 on the bubble's clock, for at most a minute.
func TestKeeperLoss(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	for _, tc := range []struct {
		name   string
		answer func(ctx context.Context, n int) error
		is     error         // the loss's error is (errors.Is) this
		isNot  error         // and is not this; nil = no check
		says   string        // a part of the loss's error
		at     time.Duration // when the loss is reported; 0 = no check
	}{
		{
			// A backend that wraps its answer: still "not ours", at once.
			name: "wrapped ErrLockLost",
			answer: func(context.Context, int) error {
				return fmt.Errorf("renew inproc: %w", lockrun.ErrLockLost)
			},
			is: lockrun.ErrLockLost, says: "renew inproc: lockrun: lock lost", at: time.Second,
		},
		{
			// Every renewal refused: the loss says why, not only that time ran out.
			name:   "every renewal fails",
			answer: func(context.Context, int) error { return refused },
			is:     refused, says: "no renewal confirmed before the lease ran out; the last try: " + refused.Error(),
		},
		{
			// The first try fails at once; the next ones hang until they are cut short at
			// the SIGTERM point: the loss names the try that had its whole time.
			name: "tries cut short",
			answer: func(ctx context.Context, n int) error {
				if n == 0 {
					return refused
				}
				<-ctx.Done()
				return ctx.Err()
			},
			is: refused, isNot: context.DeadlineExceeded, says: "the last try: " + refused.Error(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = 3 * time.Second
				start := time.Now()
				now := func() time.Duration { return time.Since(start) }
				r := &renewals{answer: tc.answer}
				lease := &locktest.Lease{
					TTLFunc:   func() time.Duration { return ttl },
					SentFunc:  func() time.Duration { return 0 },
					RenewFunc: r.renew,
				}
				var mu sync.Mutex
				var warned []error
				k := &lockrun.Keeper{Lease: lease, Interval: ttl / 3, Grace: 10 * time.Second,
					OpTimeout: 2 * time.Second, Now: now,
					Warn: func(err error) { mu.Lock(); warned = append(warned, err); mu.Unlock() }}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var lossErr error
				var at time.Duration
				select {
				case loss := <-k.Run(ctx):
					lossErr, at = loss.Err, now()
				case <-ctx.Done():
					t.Fatal("the lease was not reported lost within a minute")
				}
				if !errors.Is(lossErr, tc.is) || tc.isNot != nil && errors.Is(lossErr, tc.isNot) {
					t.Fatalf("loss %q: want it to be %v (and not %v)", lossErr, tc.is, tc.isNot)
				}
				if !strings.Contains(lossErr.Error(), tc.says) {
					t.Fatalf("loss %q, want it to say %q", lossErr, tc.says)
				}
				mu.Lock()
				defer mu.Unlock()
				// Every renewal that failed but might be retried is a warning; "not ours" is
				// none, as it is the loss itself.
				want := r.n
				if tc.is == lockrun.ErrLockLost {
					want = 0
				}
				if len(warned) != want {
					t.Fatalf("%d warnings (%v) for %d renewals, want %d", len(warned), warned, r.n, want)
				}
				if tc.at != 0 && at != tc.at {
					t.Fatalf("lost at %v, want %v", at, tc.at)
				}
				// Fail closed: never later than safe_until − g, with g = ttl/4.
				if limit := ttl - ttl/100 - 2*time.Millisecond - ttl/4; at > limit {
					t.Fatalf("lost at %v, after the SIGTERM point %v", at, limit)
				}
			})
		})
	}
}
