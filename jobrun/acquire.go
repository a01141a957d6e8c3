package jobrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/child"
	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/logline"
	"cronlock/runstatus"
	"cronlock/tty"
)

// The steps before the job starts: the --jitter sleep, taking the lock (or being skipped),
// and a stop signal meanwhile.

// maxEarly bounds how many times a run sleeps for a tick that has not come on the
// backend's clock: once is the rule (the script says how early); more means the
// server's clock went back meanwhile.
const maxEarly = 3

// acquire takes the lock, giving way to a stop signal. done means the run ends here
// with code (skipped, failed or interrupted), its row already recorded.
func (r *runner) acquire(sig *child.Signals) (lease lockrun.Lease, code int, done bool) {
	o := r.o
	var tries atomic.Int32
	req := r.request()
	wait, cut := r.waitFor()
	req.Wait = wait
	req.OnTry = func() {
		if tries.Add(1) == 2 && o.Verbose { // on Acquire's goroutine: no status (see say)
			r.say(logline.Verbose, false, fmt.Sprintf("%s is held; trying again for up to %s", o.Key, wait))
		}
	}
	// The lock was taken without the eviction check (an ACL without +info): every run
	// would say so, and cron would mail each one; once an hour says it as well. A data
	// loss and a schedule flip are news of this claim: said each time (after the acquire).
	var news []error
	req.Warn = func(err error) {
		var dl *lockrun.DataLossError
		var fl *lockrun.ScheduleFlipError
		switch {
		case errors.As(err, &dl) || errors.As(err, &fl):
			news = append(news, err) // read after Acquire returned, on the run's goroutine
		case !o.Quiet && r.shouldWarn("redis", r.row.Backend, err): // on Acquire's goroutine: no status
			r.say(logline.Warn, false, "warning: "+err.Error()+r.repeatNote())
		}
	}
	var res acquireResult
	for round := 0; ; round++ {
		var stop os.Signal
		res, stop = r.tryAcquire(sig, req)
		r.row.Attempt = max(1, int(tries.Load()))
		if stop != nil {
			return nil, r.interrupted(stop), true
		}
		var early *lockrun.EarlyError
		if !errors.As(res.err, &early) || round >= maxEarly {
			break
		}
		// This host's clock is ahead of the backend's (within --max-skew): the tick has
		// not come there yet. Claiming it now would run the job early, or call the tick
		// missed before it came; sleep until it has, then ask again.
		r.verbosef("the %s tick of %s has not come yet on %s's clock: waiting %s", r.tickName(), o.Key, r.row.Backend, early.Early)
		if s := sleepOrStop(sig, early.Early); s != nil {
			return nil, r.interrupted(s), true
		}
	}
	for _, err := range news {
		r.errorf("%v", err)
	}
	var held *lockrun.HeldError
	var tick *lockrun.TickError
	var missed *lockrun.MissedError
	var sbw *lockrun.StandbyWaitError
	var sbe *lockrun.StandbyEndError
	var susp *lockrun.SuspendedError
	switch {
	case errors.As(res.err, &susp):
		// Not rememberKey: a suspended run claimed nothing, so a first run that finds
		// the key suspended must not make the next claim look like a data loss.
		return nil, r.suspended(susp), true
	case errors.As(res.err, &sbw):
		r.rememberKey()
		return r.standby(sig, req, sbw)
	case errors.As(res.err, &sbe):
		r.rememberKey()
		return nil, r.standbyEnd(sbe), true
	case res.err == nil:
		r.rememberKey()
		return res.lease, 0, false
	case errors.As(res.err, &tick):
		r.rememberKey() // the backend had the key's tick record
		return nil, r.tickSkip(tick), true
	case errors.As(res.err, &missed):
		// Judged on the backend's clock, which claimed the tick as missed for this run.
		return nil, r.recordMissed(missed.Late, false), true
	case errors.As(res.err, &held) && cut:
		// The wait ran out at tick + --start-deadline, not at --wait: the run is missed.
		return nil, r.missed(), true
	case errors.As(res.err, &held):
		r.rememberKey() // the backend had the key's lock
		r.row.Status = runstatus.Skipped
		if held.Holder != nil {
			r.row.Holder = held.Holder.String()
		}
		code := o.ConflictExitCode
		r.row.Exit = &code
		r.recordInsert()
		r.reportSkip(held)
		return nil, o.ConflictExitCode, true
	default:
		// Only a refusal is worth a line in the fleet's record: a server that did not
		// answer would not take the entry either, and the run says so already.
		r.refused = lockrun.IsRefusal(res.err)
		return nil, r.fail(ExitFailed, "%v", res.err), true
	}
}

type acquireResult struct {
	lease lockrun.Lease
	err   error
}

// tryAcquire asks the backend once (with req.Wait), giving way to a stop signal: then a
// lock taken meanwhile is let go with its tick, and the signal is returned.
func (r *runner) tryAcquire(sig *child.Signals, req lockrun.Request) (acquireResult, os.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan acquireResult, 1)
	go func() {
		l, err := r.locker.Acquire(ctx, req)
		ch <- acquireResult{l, err}
	}()
	for {
		select {
		case res := <-ch:
			return res, nil
		case s := <-sig.C:
			if !child.IsStopSignal(s) {
				continue // USR1/USR2 before the child exists: nobody to forward them to
			}
			cancel()
			res := <-ch
			if res.lease != nil {
				rctx, c2 := context.WithTimeout(context.Background(), r.o.OpTimeout)
				res.lease.GiveBackTick() // the job never started
				// Its claim's entry is completed with the release, as interrupted.
				sg := s.(syscall.Signal)
				res.lease.SetRecord(&lockrun.RunRecord{RunID: r.runID, Node: r.o.Node, Status: runstatus.Interrupted,
					Exit: 128 + int(sg), Signal: unix.SignalName(sg), Tick: r.tick, Tries: 1,
					Error: fmt.Sprintf("stopped by %s before the job started", unix.SignalName(sg))})
				res.lease.Release(rctx)
				c2()
			}
			return res, s
		}
	}
}

// sleepOrStop sleeps d, or returns the stop signal that came first.
func sleepOrStop(sig *child.Signals, d time.Duration) os.Signal {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case s := <-sig.C:
			if child.IsStopSignal(s) {
				return s
			}
			// USR1/USR2 before the child exists: nobody to forward them to.
		}
	}
}

// keyIdent names the key where its backend keeps it (server, prefix), for the stamps
// of keys this host has claimed (history.KnowsKey).
func (r *runner) keyIdent() string {
	ident := r.row.Backend + "\x00" + r.o.Key
	if p, ok := r.locker.(interface{ Prefix() string }); ok {
		ident += "\x00" + p.Prefix()
	}
	return ident
}

// rememberKey notes, on the recorder's goroutine (off the run's path), that the backend
// had this key: from now on, a backend without its fencing counter has lost its data.
func (r *runner) rememberKey() {
	if r.rec == nil || r.histPath == "" {
		return
	}
	path, ident := r.histPath, r.keyIdent()
	r.rec.do(func(*history.Store) error { history.RememberKey(path, ident, bootTime()); return nil })
}

// knowsKey reports whether this host claimed the key on this backend before: one stat
// of a stamp beside the history, no round trip. On the local backend, only a claim since
// this boot counts: its lock folder (/run) is emptied at every boot by design.
func (r *runner) knowsKey() bool {
	if r.rec == nil || r.histPath == "" {
		return false
	}
	known, noted := history.KnowsKey(r.histPath, r.keyIdent())
	if known && r.locker.Name() == "local" {
		return noted.After(bootTime())
	}
	return known
}

// bootTime is when this machine booted, from CLOCK_BOOTTIME (the zero time if unknown).
func bootTime() time.Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(ts.Nano()))
}

// reportSkip says a run was skipped only where someone wants to hear it: cron would
// mail every skip from every other host.
func (r *runner) reportSkip(held *lockrun.HeldError) {
	o := r.o
	h := held.Holder
	if h != nil && o.StaleAfter > 0 && !h.Since.IsZero() && time.Since(h.Since) > o.StaleAfter {
		r.errorf("%s held by %s (pid %d, run %s) for %s, longer than --stale-after %s: is that job hung? See cronlock status --key %s",
			o.Key, tty.Escape(h.Node), h.PID, tty.Escape(h.RunID), heldFor(time.Since(h.Since)), shortDuration(o.StaleAfter), o.Key)
		return
	}
	if h != nil && h.NoExpiry && o.StaleAfter > 0 {
		// Cronlock never writes a lock without a TTL: this one never frees itself, and
		// every run of the fleet would skip in silence for good.
		r.errorf("%s: its lock has no expiry (set or PERSISTed by hand, not by cronlock: held by %s), so it will never free itself and every run skips; see cronlock status --key %s, and remove it with cronlock unlock --key %s --force",
			o.Key, tty.Escape(h.String()), o.Key, o.Key)
		return
	}
	if o.Verbose || (!o.Quiet && tty.IsTerminal(o.Stderr)) {
		// The holder's names come from another host: escaped, as on every display.
		r.say(logline.Verbose, true, "skipped: "+tty.Escape(held.Error()))
	}
}

// heldFor writes how long a lock has been held at a precision that fits its size: a
// short --stale-after (200ms) must not meet "held for 0s", nor a day-old hang
// "26h0m12.345s".
func heldFor(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return shortDuration(d.Round(time.Second))
	}
	return shortDuration(d.Round(time.Minute))
}

// shortDuration is d.String() without the zero units it ends with: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// jitter sleeps a random time in [0, --jitter) before the lock is asked for. A stop signal
// ends the run there: interrupted, the job never started. done means the run ends with code.
func (r *runner) jitter(sig *child.Signals) (code int, done bool) {
	if r.o.Jitter <= 0 {
		return 0, false
	}
	d := randN(r.o.Jitter)
	r.verbosef("sleeping %v before asking for %s (--jitter %v)", d, r.o.Key, r.o.Jitter)
	if s := sleepOrStop(sig, d); s != nil {
		return r.interrupted(s), true
	}
	return 0, false
}

// interrupted records a run that a stop signal ended before its job started, and says so:
// status interrupted, exit 128+N.
func (r *runner) interrupted(s os.Signal) int {
	sg := s.(syscall.Signal)
	r.row.Status = runstatus.Interrupted
	r.row.Signal = unix.SignalName(sg)
	r.row.Error = fmt.Sprintf("stopped by %s before the job started", r.row.Signal)
	code := 128 + int(sg)
	r.row.Exit = &code
	r.recordInsert()
	r.infof("%s: %s", r.o.Key, r.row.Error)
	return code
}
