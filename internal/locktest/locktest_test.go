package locktest_test

import (
	"context"
	"errors"
	"testing"

	"cronlock/internal/locktest"
	"cronlock/lockrun"
)

// TestZeroValues: with no func set, the fake is the healthy backend its fields document.
func TestZeroValues(t *testing.T) {
	ctx := context.Background()
	var l locktest.Locker
	tries := 0
	lease, err := l.Acquire(ctx, lockrun.Request{Key: "k", OnTry: func() { tries++ }})
	if err != nil || lease == nil || tries != 1 {
		t.Fatalf("Acquire: %v, %v after %d tries; want a lease after 1", lease, err, tries)
	}
	if h, err := l.Inspect(ctx, "k"); h != nil || err != nil {
		t.Fatalf("Inspect: %v, %v; want a free key", h, err)
	}
	if m, err := l.List(ctx); len(m) != 0 || err != nil {
		t.Fatalf("List: %v, %v; want nothing held", m, err)
	}
	if h, err := l.Unlock(ctx, "k", true); h != nil || err != nil {
		t.Fatalf("Unlock: %v, %v; want nothing removed", h, err)
	}
	if err := errors.Join(l.ClaimMissed(ctx, lockrun.Request{}), l.Close(), lease.Renew(ctx), lease.Release(ctx),
		lease.RecordErr(), lease.WriteRecord(ctx, &lockrun.RunRecord{})); err != nil {
		t.Fatalf("a zero fake failed: %v", err)
	}
	if l.Describe() != "fake" || l.Name() != "fake" || lease.FencingToken() != 1 || lease.TTL() != 0 {
		t.Fatalf("Describe %q, Name %q, token %d, TTL %v; want fake, fake, 1, 0", l.Describe(), l.Name(), lease.FencingToken(), lease.TTL())
	}
	if before, sent := lockrun.Boottime(), lease.Sent(); sent < before {
		t.Fatalf("Sent %v, before the call (%v): want the call's instant", sent, before)
	}
	lease.GiveBackTick()
	lease.SetRecord(&lockrun.RunRecord{})
}

// TestFuncsAnswer: a func that is set is what the method answers.
func TestFuncsAnswer(t *testing.T) {
	lost := &locktest.Lease{RenewFunc: func(context.Context) error { return lockrun.ErrLockLost }}
	l := &locktest.Locker{
		AcquireFunc:  func(context.Context, lockrun.Request) (lockrun.Lease, error) { return lost, nil },
		DescribeFunc: func() string { return "fake 1" },
		NameFunc:     func() string { return "redis" },
	}
	lease, _ := l.Acquire(context.Background(), lockrun.Request{})
	if err := lease.Renew(context.Background()); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Renew: %v, want the RenewFunc's ErrLockLost", err)
	}
	if l.Describe() != "fake 1" || l.Name() != "redis" {
		t.Fatalf("Describe %q, Name %q; want the funcs' answers", l.Describe(), l.Name())
	}
}
