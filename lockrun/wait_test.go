package lockrun_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"cronlock/internal/locktest"
	"cronlock/lockrun"
)

// TestWait: the shared wait for a held lock asks again after each sleep until it gets the
// lock or req.Wait has passed; a passing error is asked again, any other ends the wait.
func TestWait(t *testing.T) {
	errBlip := errors.New("blip")
	errBad := errors.New("refused")
	holder := &lockrun.Holder{Node: "vmA"}
	lease := &locktest.Lease{}
	type answer struct {
		held *lockrun.Holder
		err  error
	}
	for _, tc := range []struct {
		name     string
		answers  []answer // then the lease
		wait     time.Duration
		wantErr  error // nil: the lease
		wantHeld bool
		attempts int
	}{
		{"free at once", nil, time.Minute, nil, false, 1},
		{"freed after two polls", []answer{{holder, nil}, {holder, nil}}, time.Minute, nil, false, 3},
		{"a blip is asked again", []answer{{nil, errBlip}, {holder, nil}}, time.Minute, nil, false, 3},
		{"a refusal ends the wait", []answer{{holder, nil}, {nil, errBad}}, time.Minute, errBad, false, 2},
		{"held past the wait", []answer{{holder, nil}, {holder, nil}, {holder, nil}, {holder, nil}}, 2500 * time.Millisecond, nil, true, 4},
		{"unreachable when the wait ends", []answer{{nil, errBlip}, {nil, errBlip}, {nil, errBlip}, {nil, errBlip}}, 2500 * time.Millisecond, errBlip, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				attempts, sleeps := 0, 0
				got, err := lockrun.Wait(context.Background(), lockrun.Request{Key: "k", TTL: 30 * time.Second, Wait: tc.wait}, lockrun.Waiter{
					Attempt: func(context.Context) (lockrun.Lease, *lockrun.Holder, error) {
						attempts++
						if attempts <= len(tc.answers) {
							a := tc.answers[attempts-1]
							return nil, a.held, a.err
						}
						return lease, nil, nil
					},
					Retryable: func(err error) bool { return errors.Is(err, errBlip) },
					Sleep: func(ctx context.Context, d time.Duration, _ *lockrun.Holder) error {
						sleeps++
						if d > time.Second {
							t.Errorf("slept %v, more than the poll of a 30s TTL (1s)", d)
						}
						time.Sleep(d)
						return nil
					},
				})
				var held *lockrun.HeldError
				switch {
				case tc.wantHeld:
					if !errors.As(err, &held) || held.Holder != holder {
						t.Fatalf("Wait: %v, want *HeldError naming vmA", err)
					}
				case tc.wantErr != nil:
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("Wait: %v, want %v", err, tc.wantErr)
					}
				case err != nil || got != lease:
					t.Fatalf("Wait: %v, %v; want the lease", got, err)
				}
				if attempts != tc.attempts || sleeps != attempts-1 {
					t.Fatalf("%d attempts, %d sleeps; want %d attempts with a sleep between each", attempts, sleeps, tc.attempts)
				}
			})
		})
	}
}

// TestWaitCanceled: a wait cut short by its context says which lock it waited for.
func TestWaitCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := lockrun.Wait(ctx, lockrun.Request{Key: "k", TTL: time.Second, Wait: time.Minute}, lockrun.Waiter{
		Attempt: func(context.Context) (lockrun.Lease, *lockrun.Holder, error) {
			return nil, &lockrun.Holder{Node: "vmA"}, nil
		},
		Retryable: func(error) bool { return false },
		Sleep: func(ctx context.Context, _ time.Duration, _ *lockrun.Holder) error {
			cancel()
			return ctx.Err()
		},
	})
	if !errors.Is(err, context.Canceled) || err.Error() != "wait for lock k: context canceled" {
		t.Fatalf("Wait: %v, want it to name the lock and the cancel", err)
	}
}
