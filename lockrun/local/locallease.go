package local

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// localLease is a held local lock: the open, flock-ed descriptor.
type localLease struct {
	token    uint64        // immutable: FencingToken needs no lock
	acquired time.Time     // with its monotonic reading, for MinHold
	sent     time.Duration // the clock just before the flock that took it
	minHold  time.Duration // immutable
	path     string        // immutable
	runID    string        // immutable
	giveBack atomic.Bool   // Release gives the tick back (GiveBackTick)
	// attempt is the tick's attempt this run is, takeoverOf the run it took over
	// (immutable); outcome is the run's record (SetRecord), whose status Release writes
	// into the tick record for a standby to read.
	attempt    int
	takeoverOf string
	outcome    atomic.Pointer[lockrun.RunRecord]

	mu  sync.Mutex   // guards fd and rec: Renew and Release may run in different goroutines
	fd  int          // -1 once released
	rec *localRecord // what the file holds
}

// FencingToken returns the token stored in the lock file when it was acquired.
func (ls *localLease) FencingToken() uint64 { return ls.token }

// TTL is 0: a local lock lasts as long as its holder's descriptor, not a lease.
func (ls *localLease) TTL() time.Duration { return 0 }

// Sent is when the flock that took the lock was tried.
func (ls *localLease) Sent() time.Duration { return ls.sent }

// Renew refreshes the lock file's access and modification times (so that age-based /tmp
// cleaners leave it alone) and its renewed time, and checks that the path still names the
// locked file. A file deleted or replaced (a manual rm) is put back (retake); it returns
// ErrLockLost when that fails, as another run then holds the path's file. Other errors
// (the times or record could not be written) leave the lock held.
func (ls *localLease) Renew(ctx context.Context) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.fd < 0 {
		return fmt.Errorf("renew %s: lease already released: %w", ls.path, lockrun.ErrLockLost)
	}
	same, err := samePathFile(ls.fd, ls.path)
	if err != nil {
		return fmt.Errorf("renew %s: %w", ls.path, err)
	}
	if !same {
		if err := ls.retake(); err != nil {
			return retakeError(ls.path, err)
		}
	}
	// utimensat(fd, NULL, NULL, 0) is futimens(fd, NULL): both times set to now, on the
	// descriptor, with no path to race with.
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(ls.fd), 0, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("touch lock file %s: %w", ls.path, e)
	}
	rec := *ls.rec
	rec.Renewed = formatLocalTime(time.Now())
	if err := writeLocalRecord(ls.fd, &rec); err != nil {
		return fmt.Errorf("write lock file %s: %w", ls.path, err)
	}
	ls.rec = &rec
	return nil
}

// GiveBackTick makes Release give the run's tick claim back, at once: its job never
// started, so the next run may run the tick.
func (ls *localLease) GiveBackTick() { ls.giveBack.Store(true) }

// Release lets the lock go. When MinHold has not passed since acquisition, Release first
// blocks until it has: the simplest way to keep holding it, since the lock is the open
// descriptor (handing the descriptor to a lingering process would leave a holder record
// naming a pid that is gone). If ctx ends first, the lock is released at once and the
// error says MinHold was cut short. Release after Release does nothing.
func (ls *localLease) Release(ctx context.Context) error {
	var cut error
	giveBack := ls.giveBack.Load()
	if wait := ls.minHold - time.Since(ls.acquired); wait > 0 && !giveBack {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			cut = fmt.Errorf("released %s before --min-hold passed: %w", ls.path, ctx.Err())
		}
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.fd < 0 {
		return nil
	}
	if giveBack && ls.rec.Tick != nil && ls.rec.Tick.RunID == ls.runID {
		rec := *ls.rec
		rec.Tick = nil
		if p := ls.rec.Tick.PrevUS; p != 0 {
			t := *ls.rec.Tick
			t.TickUS, t.PrevUS, t.RunID, t.Node = p, 0, "", ""
			rec.Tick = &t
		}
		if same, _ := samePathFile(ls.fd, ls.path); same {
			writeLocalRecord(ls.fd, &rec) // best effort, as on Redis: the lock goes anyway
		}
	} else if ls.rec.Tick != nil && ls.rec.Tick.RunID == ls.runID {
		// The tick's outcome, for a standby: a release whose outcome is not known yet
		// (output still to be written) counts as completed, never as lost.
		rec, t := *ls.rec, *ls.rec.Tick
		t.Status, t.Signal = "completed", ""
		if o := ls.outcome.Load(); o != nil {
			t.Status, t.Signal, t.Hung = o.Status, o.Signal, o.Hung
		}
		rec.Tick = &t
		if same, _ := samePathFile(ls.fd, ls.path); same {
			writeLocalRecord(ls.fd, &rec)
		}
	}
	// LOCK_UN frees the lock even if the descriptor was somehow duplicated; close alone
	// would not then. The file and its record (the token) stay for the next holder.
	unix.Flock(ls.fd, unix.LOCK_UN)
	err := unix.Close(ls.fd)
	ls.fd = -1
	if cut != nil {
		return cut
	}
	if err != nil {
		return fmt.Errorf("close lock file %s: %w", ls.path, err)
	}
	return nil
}

// SetRecord keeps the run's outcome for Release, which writes its status into the tick
// record (a standby reads it); the local backend has no fleet record (its history is local).
func (ls *localLease) SetRecord(rec *lockrun.RunRecord) { ls.outcome.Store(rec) }

// TickAttempt is the tick's attempt this run is, and the lost run it took over.
func (ls *localLease) TickAttempt() (int, string) { return max(ls.attempt, 1), ls.takeoverOf }

// File is the locked descriptor: the guard keeps it open until the job's group is dead,
// so that a standby on this machine cannot take the lock while the job still runs.
func (ls *localLease) File() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.fd
}

// RecordErr is nil: nothing is written.
func (ls *localLease) RecordErr() error { return nil }

// WriteRecord does nothing: the local backend has no fleet record.
func (ls *localLease) WriteRecord(context.Context, *lockrun.RunRecord) error { return nil }
