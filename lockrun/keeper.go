package lockrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Boottime reads CLOCK_BOOTTIME: a monotonic clock that, unlike Go's timers, keeps
// counting while the machine is suspended, so a lease deadline measured on it is not
// fooled by a frozen VM.
func Boottime() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		// CLOCK_BOOTTIME exists on every Linux since 2.6.39; fall back to the
		// monotonic clock rather than fail a run.
		syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	}
	return time.Duration(ts.Nano())
}

// The clock ids of clock_gettime(2), which package syscall does not name.
const (
	clockMonotonic = 1
	clockBoottime  = 7
)

// ClockOr returns now, or Boottime when now is nil.
func ClockOr(now func() time.Duration) func() time.Duration {
	if now == nil {
		return Boottime
	}
	return now
}

// LockLoss is the keeper's verdict that the lease is lost or about to be: the job must
// get SIGTERM now and be dead within Grace, while the lease is still ours. Err says why.
type LockLoss struct {
	Grace time.Duration
	Err   error
}

// RenewInterval is the time between two renewals of a lease of ttl: a third of it, so
// that two renewals can fail (or a frozen server be waited out) before the lease ends.
func RenewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// Keeper renews a lease while the job runs. It is the one place that decides a lease is
// lost, and it fails closed: without a confirmed renewal, the job is told to stop early
// enough to be dead before the lease ends. The lease counts from Lease.Sent, so however
// long the lock took to get (a --wait for a busy lock), all of the TTL is left for the job.
type Keeper struct {
	Lease Lease
	// Interval is the time between renewals, RenewInterval of the TTL (0 = that of the
	// lease's TTL). It also paces the local backend, whose lease never expires but whose
	// file must be checked and touched.
	Interval time.Duration
	// Grace is --grace: the time between SIGTERM and SIGKILL when the job is stopped.
	Grace time.Duration
	// OpTimeout bounds one renewal call (--redis-timeout); the call is also cut short
	// at the lease's safe-until deadline.
	OpTimeout time.Duration
	// Now reads the clock that Lease.Sent was read on; nil means Boottime. Tests inject
	// the fake clock of testing/synctest through it.
	Now func() time.Duration
	// Warn, when set, is told about renewals that failed but may be retried.
	Warn func(error)

	// safeUntil is the lease's end on the Now clock as last confirmed (0: no expiry). The
	// renewal goroutine writes it; Check reads it from the supervisor's goroutine.
	safeUntil atomic.Int64
	lost      chan LockLoss
	gone      atomic.Bool // the loss was decided (Lost delivered or about to)
}

// Check reports the lease as lost when it has run out by now without a confirmed
// renewal: after a pause of cronlock itself (SIGSTOP, a frozen VM) longer than the
// lease, the renewal goroutine may not have woken yet to say so, and a job whose end is
// seen only then did not provably end inside the lease. Never lost for leases without
// expiry, or before Run.
func (k *Keeper) Check() (LockLoss, bool) {
	until := time.Duration(k.safeUntil.Load())
	if until == 0 || ClockOr(k.Now)() < until {
		return LockLoss{}, false
	}
	return LockLoss{Err: fmt.Errorf("the lease of %v ran out before the job's end was seen: cronlock was stopped or frozen for longer than the lease", k.Lease.TTL())}, true
}

// SafeUntil is the lease's end on the Now clock as last confirmed, drift taken off; 0
// before Run, or for a lease without expiry.
func (k *Keeper) SafeUntil() time.Duration { return time.Duration(k.safeUntil.Load()) }

// InDoubt reports whether the lease cannot be vouched for through a backend call of
// margin (--redis-timeout): the keeper has decided it is lost, or less than g + margin is
// left before the confirmed safe-until (g as in the loss's SIGTERM: min(--grace, ttl/4)),
// so a write sent now could land after the job was told to stop. left is what is left
// (0 once gone); never in doubt for a lease without expiry that was not lost.
func (k *Keeper) InDoubt(margin time.Duration) (left time.Duration, doubt bool) {
	if k.gone.Load() {
		return 0, true
	}
	until := time.Duration(k.safeUntil.Load())
	if until == 0 {
		return 0, false
	}
	left = until - ClockOr(k.Now)()
	return max(left, 0), left < k.termGrace()+margin
}

// Vouch is InDoubt for a call of margin about to be made (a checkpoint save), after
// waiting out a doubt that is only the renewal being due: between two renewals of a
// short lease (ttl/3 apart), less than g + margin may be left although every renewal is
// confirmed, and a save refused then would tell a healthy job to stop. While the lease is
// in doubt but not lost, Vouch waits for the next confirmed renewal and answers for it; it
// stops waiting, in doubt, once the keeper gives up (at safe-until − g, less than margin
// away) or ctx ends. never is true, at once, when even a renewal confirmed on the spot
// would leave less than g + margin: the TTL is too short to vouch for such a call.
func (k *Keeper) Vouch(ctx context.Context, margin time.Duration) (left time.Duration, doubt, never bool) {
	left, doubt = k.InDoubt(margin)
	if !doubt || k.gone.Load() {
		return left, doubt, false
	}
	if ttl := k.Lease.TTL(); ttl > 0 && ttl-Drift(ttl) < k.SaveNeeds(margin) {
		return left, true, true
	}
	from := k.safeUntil.Load()
	for k.safeUntil.Load() == from && !k.gone.Load() {
		d := time.Duration(from) - k.termGrace() - ClockOr(k.Now)()
		if d <= 0 {
			break // the keeper gives up now: the renewal did not come
		}
		t := time.NewTimer(min(d, 5*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			left, doubt = k.InDoubt(margin)
			return left, doubt, false
		case <-t.C:
		}
	}
	left, doubt = k.InDoubt(margin)
	return left, doubt, false
}

// SaveNeeds is how much of the lease must be left for InDoubt to vouch for a call of
// margin: g + margin.
func (k *Keeper) SaveNeeds(margin time.Duration) time.Duration { return k.termGrace() + margin }

// Lost delivers at most one LockLoss once Run has started; nil before.
func (k *Keeper) Lost() <-chan LockLoss { return k.lost }

// maxSleep caps every wait of the keeper so that a deadline measured on Boottime is
// noticed soon after a suspend, while Go's timers (which stop during suspend) are late.
const maxSleep = time.Second

// Drift is the margin taken off every lease for clock rate differences between this
// host and Redis (the Redlock figure: 1% of the TTL plus 2 ms).
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// termGrace is g: the job gets SIGTERM at safe_until − g and SIGKILL at safe_until, with
// g = min(--grace, ttl/4) so that a long --grace cannot eat the lease.
func (k *Keeper) termGrace() time.Duration {
	if ttl := k.Lease.TTL(); ttl > 0 && ttl/4 < k.Grace {
		return ttl / 4
	}
	return k.Grace
}

// Run renews until ctx ends or the lease is lost. On loss it sends one LockLoss on the
// returned channel (also Lost) and stops: the Grace in it is how long the job may take
// after SIGTERM before it must be killed for the lease to still be ours.
func (k *Keeper) Run(ctx context.Context) <-chan LockLoss {
	if ttl := k.Lease.TTL(); ttl > 0 {
		k.safeUntil.Store(int64(k.Lease.Sent() + ttl - Drift(ttl)))
	}
	k.lost = make(chan LockLoss, 1)
	go func() {
		if loss, lost := k.loop(ctx); lost {
			k.gone.Store(true)
			k.lost <- loss
		}
	}()
	return k.lost
}

func (k *Keeper) loop(ctx context.Context) (LockLoss, bool) {
	now := ClockOr(k.Now)
	ttl := k.Lease.TTL()
	interval := k.Interval
	if interval <= 0 {
		interval = RenewInterval(ttl)
	}
	if interval <= 0 {
		interval = 20 * time.Second
	}
	g := k.termGrace()
	safeUntil := time.Duration(k.safeUntil.Load()) // zero when the lease never expires
	next := k.Lease.Sent() + interval
	var last error // why the last renewal was not confirmed: the loss says it
	for {
		wake := next
		if safeUntil > 0 && safeUntil-g < wake {
			wake = safeUntil - g
		}
		if d := min(wake-now(), maxSleep); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return LockLoss{}, false
			case <-t.C:
			}
			continue // re-read the clock: the timer may have slept through a suspend
		}
		if ctx.Err() != nil {
			return LockLoss{}, false
		}
		if safeUntil > 0 && now() >= safeUntil-g {
			err := errors.New("no renewal confirmed before the lease ran out")
			if last != nil {
				// Without it, the one line cron mails would not say why (a server down,
				// replicas that did not acknowledge): -v alone shows each retry.
				err = fmt.Errorf("no renewal confirmed before the lease ran out; the last try: %w", last)
			}
			return LockLoss{Grace: max(safeUntil-now(), 0), Err: err}, true
		}
		sent := now()
		var termAt time.Duration // when the child must get SIGTERM; 0 = never
		if safeUntil > 0 {
			termAt = safeUntil - g
		}
		err := k.renew(ctx, sent, termAt)
		switch {
		case err == nil:
			last = nil
			if ttl > 0 {
				safeUntil = sent + ttl - Drift(ttl)
				k.safeUntil.Store(int64(safeUntil))
			}
			next = sent + interval
		case errors.Is(err, ErrLockLost):
			return LockLoss{Grace: g, Err: err}, true
		case ctx.Err() != nil:
			return LockLoss{}, false
		default:
			// A try cut short at termAt mostly says that its time ran out: the one before
			// it, given its whole time, says more.
			if cut := termAt > 0 && termAt-sent < k.opTimeout(); last == nil || !cut {
				last = err
			}
			if k.Warn != nil {
				k.Warn(err)
			}
			// Retry soon, with jitter so a fleet that lost Redis together does not
			// come back in lockstep.
			next = now() + retryDelay(interval)
		}
	}
}

// renew makes one renewal call, cut short at termAt: a call still waiting for its reply
// then must not delay the child's SIGTERM.
func (k *Keeper) renew(ctx context.Context, sent, termAt time.Duration) error {
	limit := k.opTimeout()
	if termAt > 0 && termAt-sent < limit {
		limit = termAt - sent
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return k.Lease.Renew(rctx)
}

// opTimeout bounds one renewal call when termAt is not nearer.
func (k *Keeper) opTimeout() time.Duration {
	if k.OpTimeout <= 0 {
		return DefaultTimeout
	}
	return k.OpTimeout
}

// retryDelay is a random pause between 1/10 and 1/5 of the renewal interval, at least
// 10 ms: several retries fit before the lease ends.
func retryDelay(interval time.Duration) time.Duration {
	lo := max(interval/10, 10*time.Millisecond)
	return lo + rand.N(lo)
}
