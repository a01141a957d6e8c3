package jobrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"cronlock/lockrun"
	"cronlock/logline"
	"cronlock/runstatus"
	"cronlock/tty"
)

// lateSkip is how long after its tick a tick skip stays silent: cron on the hosts of a
// fleet fires within seconds of each other, so a skip later than this is a host whose
// --schedule does not match its crontab line, or whose cron is far behind.
const lateSkip = time.Minute

// request is the lock request of this run, with its tick when it has one.
func (r *runner) request() lockrun.Request {
	o := r.o
	req := lockrun.Request{Key: o.Key, TTL: o.TTL, Wait: o.Wait, MinHold: o.MinHold,
		Node: o.Node, PID: os.Getpid(), RunID: r.runID, Now: wallNow, Known: r.known, CmdHash: cmdHash(o.Command),
		Entry: &lockrun.RunRecord{RunID: r.runID, Node: o.Node, Status: runstatus.Running, Tick: r.tick, Tries: 1,
			Version: o.Version, CmdHash: cmdHash(o.Command), Grace: o.Jitter + o.StartDeadline}}
	if o.Schedule != nil {
		req.Tick, req.Schedule, req.Zone = r.tick, o.Schedule.String(), o.Schedule.Zone()
		// A clock ahead by a quarter of the interval could claim the next tick early:
		// every-minute jobs need a tighter bound than --max-skew's default.
		req.MaxSkew = o.MaxSkew
		if next := o.Schedule.Next(r.tick); o.MaxSkew > 0 && next.After(r.tick) {
			req.MaxSkew = min(o.MaxSkew, next.Sub(r.tick)/4)
		}
		req.StartDeadline = o.StartDeadline
		req.PrevTick = o.Schedule.Prev(r.tick.Add(-time.Nanosecond)).UTC()
		req.Canonical = o.Schedule.Canonical() + " " + o.Schedule.Zone()
		// Recorded with every claim of a tick: a holder that may run on after losing its
		// lease is never taken over by a standby.
		req.Standby = lockrun.StandbyRequest{Mode: o.Standby, Slots: o.Standbys, MaxAttempts: o.MaxAttempts,
			SlotTTL: o.TTL + time.Second, NonTakeable: o.ContinueOnLoss || r.noGuard}
	}
	return req
}

// cmdHash names the command for the fleet's record: two runs of one command between two
// ticks, one of them without --schedule, are a roll-out's DUPLICATE. 64 bits of SHA-256
// of the argv, NUL-separated.
func cmdHash(argv []string) string {
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// serverJudges reports whether the backend judges the tick and --start-deadline on its
// own clock (Redis TIME, with the skew check on): a host whose clock is ahead must then
// neither claim the tick before it has come nor call it missed before tick + deadline.
// Without it (--max-skew 0, the local and etcd backends) the host's clock decides.
func (r *runner) serverJudges() bool {
	if r.tick.IsZero() || r.o.MaxSkew <= 0 {
		return false
	}
	c, ok := r.locker.(lockrun.ServerClock)
	return ok && c.HasServerClock()
}

// waitFor is how long the acquire may wait for a held lock: --wait, cut short at
// tick + --start-deadline, after which the run would start too late (cut is then true).
func (r *runner) waitFor() (wait time.Duration, cut bool) {
	o := r.o
	if r.tick.IsZero() || o.StartDeadline <= 0 || o.Wait <= 0 {
		return o.Wait, false
	}
	left := r.tick.Add(o.StartDeadline).Sub(wallNow())
	if r.serverJudges() {
		// The acquire script ends the wait as missed at tick + deadline on the backend's
		// clock; this host's may be off by up to the skew allowed.
		left += r.request().MaxSkew
	}
	if left < o.Wait {
		return max(left, 0), true
	}
	return o.Wait, false
}

// pastDeadline reports whether a job starting at t would start more than
// --start-deadline after the run's tick.
func (r *runner) pastDeadline(t time.Time) bool {
	return !r.tick.IsZero() && r.o.StartDeadline > 0 && t.Sub(r.tick) > r.o.StartDeadline
}

// missed ends a run that would start past its deadline: it claims the tick as missed,
// so that a tick has at most one missed entry (a run that finds the tick claimed is a
// plain tick skip), records it and says so: a missed run is news, never silent.
func (r *runner) missed() int {
	o := r.o
	late := wallNow().Sub(r.tick)
	// The entry travels with the claim where the backend writes it there (Redis): a
	// missed run then costs one round trip, the claim, whichever path found it missed.
	req := r.request()
	req.Entry.Status, req.Entry.Exit, req.Entry.Error = runstatus.Missed, o.ConflictExitCode, r.missedMessage(late)
	ctx, cancel := context.WithTimeout(context.Background(), o.OpTimeout+time.Second)
	err := r.locker.ClaimMissed(ctx, req)
	cancel()
	var te *lockrun.TickError
	var se *lockrun.SuspendedError
	switch {
	case errors.As(err, &te):
		return r.tickSkip(te)
	case errors.As(err, &se):
		return r.suspended(se)
	case err != nil:
		return r.fail(ExitFailed, "%v", err)
	}
	return r.recordMissed(late, true)
}

// missedMessage says that the run missed its tick, late is how long after the tick it
// would have started.
func (r *runner) missedMessage(late time.Duration) string {
	return fmt.Sprintf("%s: missed the %s tick: it would start %s after it, later than --start-deadline %s; the job was not run (was cron or this host down or busy?)",
		r.o.Key, r.tickName(), heldFor(late), shortDuration(r.o.StartDeadline))
}

// recordMissed records and says a missed run whose tick is claimed (as missed) for it;
// late is how long after the tick it would have started. entryWritten: the claim wrote
// the run's entry with its status (ClaimMissed on a backend that ClaimsEntry); else the
// entry is written now, one round trip off the success path (a tick the backend's clock
// judged missed inside Acquire, whose entry did not know the run's outcome yet).
func (r *runner) recordMissed(late time.Duration, entryWritten bool) int {
	code := r.o.ConflictExitCode
	r.row.Status = runstatus.Missed
	r.row.Error = r.missedMessage(late)
	r.row.Exit = &code
	r.recordInsert()
	r.errorf("%s", r.row.Error)
	ce, ok := r.locker.(lockrun.ClaimsEntry)
	switch {
	case !entryWritten || !ok || !ce.ClaimsEntry():
		r.recordFleetNoLock()
	default:
		if ce, ok := r.locker.(interface{ ClaimRecordErr() error }); ok {
			r.fleetFailed(ce.ClaimRecordErr())
		}
	}
	return code
}

// tickSkip records a run whose tick (or a later one) another run claimed. It is silent
// as a held skip is, while the start is within a minute of the tick; later, one line
// says so whatever -q says: a host that keeps finding its tick taken has a --schedule
// that does not match its crontab line.
func (r *runner) tickSkip(e *lockrun.TickError) int {
	o := r.o
	r.row.Status = runstatus.Skipped
	r.row.Holder = e.Claimer()
	r.row.Error = e.Error()
	code := o.ConflictExitCode
	r.row.Exit = &code
	r.recordInsert()
	what := "already run"
	if e.Missed {
		what = "already missed"
	}
	line := fmt.Sprintf("%s: tick %s %s by %s", o.Key, r.tickName(), what, tty.Escape(e.Claimer()))
	if e.Claimed.After(r.tick) {
		line = fmt.Sprintf("%s: tick %s skipped: the later tick %s was already run by %s", o.Key, r.tickName(), r.zoned(e.Claimed), tty.Escape(e.Claimer()))
	}
	switch {
	case r.started.Sub(r.tick) > lateSkip:
		r.errorf("%s; does --schedule match the crontab line?", line)
	case o.Verbose || (!o.Quiet && tty.IsTerminal(o.Stderr)):
		r.say(logline.Verbose, true, "skipped: "+line)
	}
	return code
}

// tickName is the run's tick as people read it, in the schedule's zone.
func (r *runner) tickName() string { return r.zoned(r.tick) }

// zoned is t in the schedule's zone: the time of day when it is on the day the run
// started, else the date too.
func (r *runner) zoned(t time.Time) string {
	loc := time.UTC
	if r.o.Schedule != nil {
		if l, err := time.LoadLocation(r.o.Schedule.Zone()); err == nil {
			loc = l
		}
	}
	t = t.In(loc)
	if s := r.started.In(loc); s.YearDay() == t.YearDay() && s.Year() == t.Year() {
		return t.Format("15:04 MST")
	}
	return t.Format("2006-01-02 15:04 MST")
}

// suspended records a run of a suspended key (cronlock suspend): its job does not start,
// and it ends with the conflict exit code. Silent as a skip is (cron would mail every
// tick of every host), unless -v or a terminal asks; the line says who suspended the key,
// since when, until when and why. The backend noted the tick in the fleet's record in
// the same step that found the suspension.
func (r *runner) suspended(e *lockrun.SuspendedError) int {
	o := r.o
	code := o.ConflictExitCode
	r.row.Status = runstatus.Suspended
	r.row.Error = e.Error() + "; the job was not run"
	r.row.Exit = &code
	r.recordInsert()
	if e.RecordErr != "" {
		r.fleetFailed(fmt.Errorf("%s: the suspended run's entry could not be written: %s", o.Key, e.RecordErr))
	}
	if o.Verbose || (!o.Quiet && tty.IsTerminal(o.Stderr)) {
		r.say(logline.Verbose, true, "suspended: "+tty.Escape(r.row.Error)+"; cronlock resume --key "+o.Key+" lifts it")
	}
	return code
}
