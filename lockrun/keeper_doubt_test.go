package lockrun_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"cronlock/internal/locktest"
	"cronlock/lockrun"
)

// TestKeeperInDoubt: a checkpoint save is refused from the moment less than g + one
// backend call is left of the confirmed lease, and after the loss; a renewal that is
// confirmed clears the doubt. 9s lease (renewed every 3s), --grace 1s (g = 1s), a 500ms
// call: in doubt from 9s − drift − 1.5s after the last confirmed renewal.
func TestKeeperInDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl, grace, call = 9 * time.Second, time.Second, 500 * time.Millisecond
		start := time.Now()
		now := func() time.Duration { return time.Since(start) }
		failing := make(chan bool, 1)
		failing <- false
		lease := &locktest.Lease{
			TTLFunc:  func() time.Duration { return ttl },
			SentFunc: func() time.Duration { return 0 },
			RenewFunc: func(ctx context.Context) error {
				f := <-failing
				failing <- f
				if f {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			},
		}
		k := &lockrun.Keeper{Lease: lease, Interval: ttl / 3, Grace: grace, OpTimeout: call, Now: now}
		if _, doubt := k.InDoubt(call); doubt {
			t.Fatal("in doubt before Run")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lost := k.Run(ctx)
		drift := lockrun.Drift(ttl)
		edge := ttl - drift - grace - call // after a renewal sent at 0
		time.Sleep(edge - time.Millisecond)
		if left, doubt := k.InDoubt(call); doubt {
			t.Fatalf("in doubt with %v left, before the edge", left)
		}
		// Renewals from now on hang: the last confirmed one was sent at 6s (3s, 6s…).
		<-failing
		failing <- true
		last := 6 * time.Second
		time.Sleep(last + edge - now() - time.Millisecond)
		if left, doubt := k.InDoubt(call); doubt {
			t.Fatalf("in doubt with %v left, %v after the last renewal", left, now()-last)
		}
		time.Sleep(2 * time.Millisecond)
		if left, doubt := k.InDoubt(call); !doubt {
			t.Fatalf("not in doubt with %v left (want doubt below %v)", left, grace+call)
		}
		<-lost
		if _, doubt := k.InDoubt(0); !doubt {
			t.Fatal("not in doubt after the loss")
		}
	})
}
