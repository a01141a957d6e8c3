package lockrun

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeLease answers Renew from a script of results and records when each call came.
type fakeLease struct {
	ttl     time.Duration
	sent    time.Duration // Sent: on the test's clock (time since started)
	mu      sync.Mutex
	calls   []time.Duration
	answer  func(n int) error
	block   func(n int) bool // true: the call hangs until its context ends
	started time.Time
}

func (f *fakeLease) FencingToken() uint64                          { return 1 }
func (f *fakeLease) GiveBackTick()                                 {}
func (f *fakeLease) SetRecord(*RunRecord)                          {}
func (f *fakeLease) RecordErr() error                              { return nil }
func (f *fakeLease) WriteRecord(context.Context, *RunRecord) error { return nil }
func (f *fakeLease) TTL() time.Duration                            { return f.ttl }
func (f *fakeLease) Sent() time.Duration                           { return f.sent }
func (f *fakeLease) Release(ctx context.Context) error             { return nil }
func (f *fakeLease) Renew(ctx context.Context) error {
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, time.Since(f.started))
	f.mu.Unlock()
	if f.block != nil && f.block(n) {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.answer != nil {
		return f.answer(n)
	}
	return nil
}

// keep runs a Keeper on f inside a synctest bubble's fake clock and returns the loss it
// reported (if any) and when, measured from the acquisition.
func keep(t *testing.T, f *fakeLease, grace time.Duration, runFor time.Duration) (LockLoss, time.Duration, bool) {
	t.Helper()
	f.started = time.Now()
	start := f.started
	k := &Keeper{Lease: f, Interval: f.ttl / 3, Grace: grace, OpTimeout: 2 * time.Second,
		Now: func() time.Duration { return time.Since(start) }}
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	ch := k.Run(ctx)
	select {
	case loss := <-ch:
		return loss, time.Since(start), true
	case <-ctx.Done():
		return LockLoss{}, 0, false
	}
}

func TestKeeperRenewsEveryThirdOfTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLease{ttl: 30 * time.Second}
		if _, _, lost := keep(t, f, 10*time.Second, 95*time.Second); lost {
			t.Fatal("a lease whose renewals all succeed was reported lost")
		}
		want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 40 * time.Second,
			50 * time.Second, 60 * time.Second, 70 * time.Second, 80 * time.Second, 90 * time.Second}
		if len(f.calls) != len(want) {
			t.Fatalf("renewals at %v, want %v", f.calls, want)
		}
		for i := range want {
			if f.calls[i] != want[i] {
				t.Fatalf("renewal %d at %v, want %v", i, f.calls[i], want[i])
			}
		}
	})
}

func TestKeeperLostAtOnceOnNotOurs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLease{ttl: 30 * time.Second, answer: func(n int) error {
			if n == 1 {
				return ErrLockLost
			}
			return nil
		}}
		loss, at, lost := keep(t, f, 10*time.Second, time.Minute)
		if !lost {
			t.Fatal("a renewal answered 'not ours' was not reported as lost")
		}
		if at != 20*time.Second {
			t.Fatalf("loss reported at %v, want at the second renewal (20s)", at)
		}
		if !errors.Is(loss.Err, ErrLockLost) {
			t.Fatalf("loss error %v, want ErrLockLost", loss.Err)
		}
		// g = min(grace, ttl/4) = 7.5s
		if loss.Grace != 7500*time.Millisecond {
			t.Fatalf("grace %v, want min(--grace, ttl/4) = 7.5s", loss.Grace)
		}
	})
}

func TestKeeperRetriesErrorsThenRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first renewal fails three times with a network error, then works.
		f := &fakeLease{ttl: 30 * time.Second, answer: func(n int) error {
			if n >= 1 && n <= 3 {
				return errors.New("i/o timeout")
			}
			return nil
		}}
		if _, _, lost := keep(t, f, 10*time.Second, 40*time.Second); lost {
			t.Fatal("a lease that recovered after retries was reported lost")
		}
		if len(f.calls) < 5 {
			t.Fatalf("only %d renewal attempts: errors were not retried", len(f.calls))
		}
		// Retries come between 1/10 and 1/5 of the interval apart.
		for i := 2; i <= 4; i++ {
			gap := f.calls[i] - f.calls[i-1]
			if gap < time.Second || gap > 2*time.Second {
				t.Fatalf("retry %d came %v after the last attempt, want 1s..2s (jittered)", i, gap)
			}
		}
	})
}

func TestKeeperFailsClosedBeforeTheLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Redis answers nothing after the acquire: every renewal hangs until its deadline.
		f := &fakeLease{ttl: 30 * time.Second, block: func(int) bool { return true }}
		loss, at, lost := keep(t, f, 10*time.Second, time.Minute)
		if !lost {
			t.Fatal("a lease never renewed was not reported lost")
		}
		safeUntil := 30*time.Second - Drift(30*time.Second) // 29.698s
		g := 7500 * time.Millisecond
		if at != safeUntil-g {
			t.Fatalf("SIGTERM point at %v, want safe_until-g = %v", at, safeUntil-g)
		}
		if at+loss.Grace != safeUntil {
			t.Fatalf("SIGKILL point at %v, want safe_until = %v", at+loss.Grace, safeUntil)
		}
	})
}

func TestKeeperCallNeverOutlastsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// With a 3s TTL the 2s op time-out would let a hung call run past the lease's
		// SIGTERM point; the keeper must cut it short.
		f := &fakeLease{ttl: 3 * time.Second, block: func(int) bool { return true }}
		_, at, lost := keep(t, f, 10*time.Second, time.Minute)
		if !lost {
			t.Fatal("not reported lost")
		}
		safeUntil := 3*time.Second - Drift(3*time.Second)
		if at > safeUntil-750*time.Millisecond {
			t.Fatalf("loss reported at %v, after safe_until-g = %v", at, safeUntil-750*time.Millisecond)
		}
	})
}

func TestKeeperLocalLeaseNeverExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A local lease (TTL 0) whose checks keep failing with transient errors is
		// never declared lost by time alone.
		f := &fakeLease{ttl: 0, answer: func(int) error { return errors.New("stat: EIO") }}
		start := time.Now()
		f.started = start
		k := &Keeper{Lease: f, Interval: 20 * time.Second, Grace: time.Second,
			Now: func() time.Duration { return time.Since(start) }}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		select {
		case loss := <-k.Run(ctx):
			t.Fatalf("local lease reported lost: %v", loss.Err)
		case <-ctx.Done():
		}
		if len(f.calls) < 30 {
			t.Fatalf("only %d checks in 10 minutes", len(f.calls))
		}
	})
}

func TestKeeperStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLease{ttl: 30 * time.Second}
		start := time.Now()
		f.started = start
		k := &Keeper{Lease: f, Grace: time.Second, Now: func() time.Duration { return time.Since(start) }}
		ctx, cancel := context.WithCancel(context.Background())
		ch := k.Run(ctx)
		time.Sleep(15 * time.Second)
		cancel()
		synctest.Wait()
		select {
		case <-ch:
			t.Fatal("a cancelled keeper reported a loss")
		default:
		}
		n := len(f.calls)
		time.Sleep(time.Minute)
		if len(f.calls) != n {
			t.Fatal("the keeper kept renewing after its context ended")
		}
	})
}

func TestKeeperCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLease{ttl: 30 * time.Second}
		start := time.Now()
		f.started = start
		k := &Keeper{Lease: f, Grace: time.Second, Now: func() time.Duration { return time.Since(start) }}
		if _, lost := k.Check(); lost {
			t.Fatal("a keeper that has not started reported its lease lost")
		}
		ctx, cancel := context.WithCancel(context.Background())
		k.Run(ctx)
		time.Sleep(25 * time.Second) // renewed at 10s and 20s: good until about 50s
		if _, lost := k.Check(); lost {
			t.Fatal("a lease renewed on time reported lost")
		}
		cancel() // no more renewals: as if cronlock were frozen from here
		synctest.Wait()
		time.Sleep(24 * time.Second)
		if _, lost := k.Check(); lost {
			t.Fatal("lost before its safe-until deadline")
		}
		time.Sleep(2 * time.Second)
		if loss, lost := k.Check(); !lost || loss.Err == nil || loss.Grace != 0 {
			t.Fatalf("a lease past its safe-until deadline: Check = %+v, %v; want lost, with no grace left", loss, lost)
		}
		local := &Keeper{Lease: &fakeLease{}, Now: func() time.Duration { return time.Since(start) }}
		lctx, lcancel := context.WithCancel(context.Background())
		defer lcancel()
		local.Run(lctx)
		time.Sleep(time.Hour)
		if _, lost := local.Check(); lost {
			t.Fatal("a lease without expiry reported lost")
		}
	})
}

// The waits of TestKeeperAfterWait: none, shorter than the TTL, longer than the TTL, and
// longer than TTL + grace (with ttl 30s, --grace 10s). A keeper that counted the lease from
// before the wait would stop the job at once after the last two.
var keeperWaits = []time.Duration{0, 10 * time.Second, 45 * time.Second, 50 * time.Second, 10 * time.Minute}

// TestKeeperAfterWait: the lease counts from the acquire that took the lock, whatever
// came before it. A Redis-like lease (TTL 30s) taken after a wait W is renewed every
// ttl/3 from W on, is never lost while renewals succeed, and fails closed at
// W + safe_until − g (not earlier) when they stop.
func TestKeeperAfterWait(t *testing.T) {
	const ttl, grace = 30 * time.Second, 10 * time.Second
	for _, wait := range keeperWaits {
		t.Run(wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				now := func() time.Duration { return time.Since(start) }
				time.Sleep(wait) // the wait for a busy lock, before the acquire that took it
				f := &fakeLease{ttl: ttl, sent: now(), started: start}
				time.Sleep(50 * time.Millisecond) // the reply's round trip
				k := &Keeper{Lease: f, Interval: ttl / 3, Grace: grace, Now: now}
				ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
				defer cancel()
				select {
				case loss := <-k.Run(ctx):
					t.Fatalf("after a wait of %v, the lease was lost at %v: %v", wait, now(), loss.Err)
				case <-ctx.Done():
				}
				synctest.Wait()
				if len(f.calls) == 0 || f.calls[0] != wait+ttl/3 {
					t.Fatalf("renewals at %v; want the first at wait + ttl/3 = %v", f.calls, wait+ttl/3)
				}

				// The same lease, with a Redis that never answers a renewal.
				f = &fakeLease{ttl: ttl, sent: now(), started: start, block: func(int) bool { return true }}
				sent := f.sent
				time.Sleep(wait) // however long the keeper starts after the acquire was sent
				k = &Keeper{Lease: f, Interval: ttl / 3, Grace: grace, Now: now}
				ctx2, cancel2 := context.WithTimeout(context.Background(), time.Hour)
				defer cancel2()
				g := ttl / 4 // min(grace, ttl/4)
				safeUntil := sent + ttl - Drift(ttl)
				select {
				case loss := <-k.Run(ctx2):
					at := now()
					want := max(safeUntil-g, sent+wait)
					if at != want {
						t.Fatalf("fail-closed point at %v, want %v (sent %v + ttl − drift − g, or at once if later)", at, want, sent)
					}
					if at+loss.Grace != max(safeUntil, at) {
						t.Fatalf("SIGKILL point at %v, want safe_until %v", at+loss.Grace, safeUntil)
					}
				case <-ctx2.Done():
					t.Fatal("a lease never renewed was not reported lost")
				}
			})
		})
	}
}
