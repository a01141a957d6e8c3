package local

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// Standbys on the local backend (run --standby). The kernel is the judge a lease is
// elsewhere: a run that gets the flock of a tick whose run is still "running" knows that
// run's cronlock is dead, and its guard, which keeps the lock file open until the job's
// process group is dead, is gone too. So a takeover needs no timing here. A standby's
// slot is a flock on one of --standbys slot files beside the lock file, which the kernel
// frees when the standby dies.

// standbyTick is t when it is a claim of req's very tick by another run that a standby
// of req may wait for or take over, else nil.
func standbyTick(t *localTick, req lockrun.Request) *localTick {
	if req.Standby.Mode == "" || t == nil || t.Missed || t.RunID == "" || t.RunID == req.RunID || t.TickUS != req.Tick.UnixMicro() {
		return nil
	}
	return t
}

// takeable reports whether a standby of mode may take over the tick t whose run is not
// alive: lost (still running), stopped gracefully, or failed with --standby=failed. end
// is why not, when not.
func takeable(t *localTick, req lockrun.Request) (ok bool, end *lockrun.StandbyEndError) {
	e := &lockrun.StandbyEndError{Key: req.Key, Status: t.Status, Node: t.Node, RunID: t.RunID, Attempt: max(t.At, 1)}
	st := t.Status
	// lock_lost: the run stopped its job fail-closed and said so before a standby asked.
	ok = st == "running" || st == "lock_lost" || st == "interrupted" && (t.Signal == "SIGTERM" || t.Signal == "SIGHUP") ||
		st == "timeout" && t.Hung ||
		req.Standby.Mode == "failed" && (st == "failed" || st == "timeout")
	switch {
	case !ok:
		e.Why = "done"
		if st == "" {
			e.Status = "completed"
		}
	case t.NT:
		e.Why = "nontakeable"
	case max(t.At, 1) >= max(req.Standby.MaxAttempts, 1):
		e.Why = "attempts"
	default:
		return true, nil
	}
	return false, e
}

// standbyWait answers a standby of req whose tick's run t holds the lock: wait (with a
// slot), or end.
func (l *Locker) standbyWait(t *localTick, req lockrun.Request, holder *lockrun.Holder) error {
	if t.NT {
		return &lockrun.StandbyEndError{Key: req.Key, Why: "nontakeable", Status: "running", Node: t.Node, RunID: t.RunID, Attempt: max(t.At, 1)}
	}
	if max(t.At, 1) >= max(req.Standby.MaxAttempts, 1) {
		return &lockrun.StandbyEndError{Key: req.Key, Why: "attempts", Status: "running", Node: t.Node, RunID: t.RunID, Attempt: max(t.At, 1)}
	}
	if !l.takeSlot(req) {
		return t.tickError(req) // every slot is taken: a skip, as before
	}
	return &lockrun.StandbyWaitError{Key: req.Key, RunID: t.RunID, Node: t.Node, Attempt: max(t.At, 1), PTTL: -1, Holder: holder}
}

// takeSlot holds one of req's --standbys slot files for as long as this locker lives,
// and reports whether it could.
func (l *Locker) takeSlot(req lockrun.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slot > 0 {
		return true
	}
	base := strings.TrimSuffix(l.LockPath(req.Key), ".lock") + ".standby"
	for i := 1; i <= max(req.Standby.Slots, 1); i++ {
		fd, err := l.openLockFile(base+strconv.Itoa(i), true)
		if err != nil {
			continue
		}
		if got, err := tryFlock(fd); err == nil && got {
			l.slot = fd + 1
			return true
		}
		unix.Close(fd)
	}
	return false
}
