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

// TestKeeperVouch: a short lease (3s, renewed every second; g = ttl/4 = 750ms) cannot
// vouch for a 2s call between renewals although each is confirmed: Vouch waits for the
// next renewal and vouches then, rather than tell a healthy job to stop. When renewals
// hang it stops waiting, in doubt, by the time the keeper gives up; a 2s lease could
// never vouch for a 2s call, and says so at once.
func TestKeeperVouch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl, grace, call = 3 * time.Second, 10 * time.Second, 2 * time.Second
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
				time.Sleep(10 * time.Millisecond) // a round trip
				return nil
			},
		}
		k := &lockrun.Keeper{Lease: lease, Interval: ttl / 3, Grace: grace, OpTimeout: call, Now: now}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lost := k.Run(ctx)
		time.Sleep(500 * time.Millisecond)
		if _, doubt := k.InDoubt(call); !doubt {
			t.Fatal("not in doubt 500ms into a 3s lease, for a 2s call and g 750ms")
		}
		left, doubt, never := k.Vouch(context.Background(), call)
		if doubt || never || left < call+ttl/4 {
			t.Fatalf("Vouch: %v left, doubt %v, never %v; want it vouched for after the renewal", left, doubt, never)
		}
		if at := now(); at < time.Second || at > time.Second+50*time.Millisecond {
			t.Fatalf("Vouch answered at %v; want just after the renewal sent at 1s", at)
		}
		// Renewals hang from now on: Vouch waits no longer than the keeper does.
		<-failing
		failing <- true
		time.Sleep(500 * time.Millisecond)
		_, doubt, never = k.Vouch(context.Background(), call)
		if !doubt || never {
			t.Fatalf("Vouch with renewals hanging: doubt %v, never %v; want doubt", doubt, never)
		}
		if limit := time.Second + 10*time.Millisecond + ttl - lockrun.Drift(ttl) - ttl/4; now() > limit {
			t.Fatalf("Vouch answered at %v, after the keeper gave up (%v)", now(), limit)
		}
		<-lost
		if _, doubt, _ := k.Vouch(context.Background(), call); !doubt {
			t.Fatal("vouched for after the loss")
		}
		short := &lockrun.Keeper{Lease: &locktest.Lease{
			TTLFunc: func() time.Duration { return 2 * time.Second }, SentFunc: func() time.Duration { return now() },
			RenewFunc: func(context.Context) error { return nil },
		}, Grace: grace, OpTimeout: call, Now: now}
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		short.Run(ctx2)
		before := now()
		if _, doubt, never := short.Vouch(context.Background(), call); !doubt || !never || now() != before {
			t.Fatalf("a 2s lease for a 2s call: doubt %v, never %v, after %v; want never, at once", doubt, never, now()-before)
		}
	})
}
