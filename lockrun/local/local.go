// Package local is cronlock's lock backend for one machine: a kernel flock(2) on one
// file per key in a per-user folder (/run/cronlock for root).
//
// Why flock: the kernel frees it when the last descriptor of the holder's open file
// description closes, which includes the holder dying by SIGKILL or a crash, so a local
// lock needs no TTL and no stale-lock clean-up. The backend therefore never unlinks a
// lock file: an unlink while someone holds or waits on the file would let a second
// holder lock a fresh file under the same name. The lock file's name, record and checks
// are in localfile.go, the lease in locallease.go, the waiters' wake-up in localwait.go.
//
// It keeps no fleet record (a machine has its history instead) and excludes only the
// processes of one machine that use the same folder. It is given its folder and reads no
// settings itself.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// Locker is the local backend: one flock(2)-locked file per key in a folder, so
// locks exclude each other among the processes of one machine that use the same folder.
// Use New; the zero value is not usable.
type Locker struct {
	dir string
	// mu guards slot: a standby's slot file (localstandby.go), its descriptor + 1 (0 =
	// none), held until Close.
	mu   sync.Mutex
	slot int
	// now is the clock of Lease.Sent; nil means Boottime. Tests inject a fake one.
	now func() time.Duration
}

var _ lockrun.Locker = (*Locker)(nil)

// Timing of the local backend. Variables rather than constants so tests can shorten them.
var (
	// localWaitPoll bounds how long a waiting Acquire sleeps between attempts. Waiters are
	// woken at once by inotify when the holder closes the file; the poll is the fallback
	// for file systems and holders inotify cannot see, and for a file replaced meanwhile.
	localWaitPoll = 25 * time.Millisecond
	// localWaitPollNoInotify is the poll period when inotify is unavailable (its per-user
	// instance limit reached): hand-off then takes up to this long.
	localWaitPollNoInotify = 3 * time.Millisecond
	// localInotify turns the inotify wake-up off, for tests of the polling fallback.
	localInotify = true
)

// localTestHookAfterOpen, when set by a test, runs between opening a lock file and
// locking it: the window in which the file can be deleted or replaced.
var localTestHookAfterOpen func(path string)

// maxReopen bounds the open/lock/check loop of Acquire: the file replaced between open
// and lock this many times in a row means something is deleting lock files in a loop.
const maxReopen = 100

// DefaultDir returns the lock folder used when --lock-dir / CRONLOCK_LOCK_DIR is not
// set: /run/cronlock for root, else /tmp/cronlock-<uid>. It depends on the effective user
// id only, never on the environment (cron sets no XDG_RUNTIME_DIR and may set another
// TMPDIR), so a run from cron and one from a login shell meet in the same folder.
func DefaultDir() string {
	uid := os.Geteuid()
	if uid == 0 {
		return "/run/cronlock"
	}
	return "/tmp/cronlock-" + strconv.Itoa(uid)
}

// New returns the local backend using dir (DefaultDir when dir is empty).
// It creates dir with mode 0700 (and missing parents) when it does not exist. It refuses,
// with an error that names --lock-dir and CRONLOCK_LOCK_DIR, a dir that is a symbolic link,
// not a directory, owned by another user, or (unless it created it) writable by group or
// others: anyone who can write the folder can replace lock files and so break the lock.
func New(dir string) (*Locker, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("lock folder %s: %w; set --lock-dir or CRONLOCK_LOCK_DIR to an absolute path", dir, err)
	}
	dir = abs

	created := false
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("create lock folder %s: %w; set --lock-dir or CRONLOCK_LOCK_DIR to a folder you can write", dir, err)
	}
	switch err := unix.Mkdir(dir, 0o700); {
	case err == nil:
		created = true
		// The umask may have taken bits away; 0700 is what the checks below expect.
		if err := unix.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("chmod lock folder %s: %w", dir, err)
		}
	case errors.Is(err, unix.EEXIST):
		// Existing folder (or a racing cronlock created it): checked below.
	default:
		return nil, fmt.Errorf("create lock folder %s: %w; set --lock-dir or CRONLOCK_LOCK_DIR to a folder you can write", dir, err)
	}

	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("lock folder %s: %w; set --lock-dir or CRONLOCK_LOCK_DIR to a folder you can write", dir, err)
	}
	if err := checkDir(dir, &st, created); err != nil {
		return nil, err
	}
	return &Locker{dir: dir}, nil
}

// checkDir refuses a lock folder (st is its Lstat) that is a symbolic link, not a
// folder, another user's, or (unless this process just created it) writable by group or
// others.
func checkDir(dir string, st *unix.Stat_t, created bool) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		hint := ""
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			hint = " such as " + real
		}
		return fmt.Errorf("lock folder %s is a symbolic link, which cronlock refuses (it could be pointed elsewhere under a running job); set --lock-dir or CRONLOCK_LOCK_DIR to the real folder%s", dir, hint)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("lock folder %s exists but is not a folder; remove it or set --lock-dir or CRONLOCK_LOCK_DIR to another path", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("lock folder %s belongs to uid %d, not to you (uid %d), so its locks cannot be trusted; remove it or set --lock-dir or CRONLOCK_LOCK_DIR to a folder of your own", dir, st.Uid, os.Geteuid())
	case !created && st.Mode&0o022 != 0:
		return fmt.Errorf("lock folder %s is writable by group or others (mode %04o), so anyone could replace its lock files; run chmod go-w %s or set --lock-dir or CRONLOCK_LOCK_DIR to a private folder", dir, st.Mode&0o7777, dir)
	}
	return nil
}

// Check says whether dir (DefaultDir when empty) would be accepted by New, without
// creating it: the folder as it is, or, while it does not exist, the nearest folder
// above it that New would create it in. what describes what was found.
func Check(dir string) (what string, err error) {
	if dir == "" {
		dir = DefaultDir()
	}
	var st unix.Stat_t
	switch err := unix.Lstat(dir, &st); {
	case errors.Is(err, unix.ENOENT):
		up := filepath.Dir(dir)
		for up != "/" {
			if _, err := os.Stat(up); err == nil {
				break
			}
			up = filepath.Dir(up)
		}
		if err := unix.Access(up, unix.W_OK|unix.X_OK); err != nil {
			return "", fmt.Errorf("lock folder %s does not exist and cannot be created in %s (%v); create it (mode 0700, owned by the user that runs the jobs), or set CRONLOCK_LOCK_DIR to a folder of your own", dir, up, err)
		}
		return fmt.Sprintf("lock folder %s will be created (mode 0700) by the first run", dir), nil
	case err != nil:
		return "", fmt.Errorf("lock folder %s: %w; set --lock-dir or CRONLOCK_LOCK_DIR to a folder you can write", dir, err)
	}
	if err := checkDir(dir, &st, false); err != nil {
		return "", err
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return "", fmt.Errorf("lock folder %s cannot be written (%v); run chmod u+rwx %s", dir, err, dir)
	}
	return fmt.Sprintf("lock folder %s is yours, private (mode %04o) and writable", dir, st.Mode&0o7777), nil
}

// Dir returns the absolute path of the lock folder.
func (l *Locker) Dir() string { return l.dir }

// Describe returns "local <dir>".
// Name names the issuer of this backend's fencing tokens.
func (l *Locker) Name() string { return "local" }

func (l *Locker) Describe() string { return "local " + l.dir }

// Close frees a standby's slot. Leases stay valid until released.
func (l *Locker) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slot > 0 {
		unix.Close(l.slot - 1)
		l.slot = 0
	}
	return nil
}

// LockPath returns the lock file of key: <dir>/<encoded key>.lock (see localFileName).
func (l *Locker) LockPath(key string) string {
	return filepath.Join(l.dir, localFileName(key))
}

// Acquire takes req.Key. With req.Wait 0 it tries once; otherwise it waits up to req.Wait, woken by inotify within a
// millisecond or so of the holder closing the file. It returns *HeldError (with the holder
// read from the lock file, nil when unreadable) when the lock stays held, ctx.Err() when
// ctx ends first, and other errors when the lock file cannot be used.
func (l *Locker) Acquire(ctx context.Context, req lockrun.Request) (lockrun.Lease, error) {
	if err := lockrun.ValidKey(req.Key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := l.LockPath(req.Key)
	deadline := time.Now().Add(req.Wait)

	// The inotify waiter is made on the first failed attempt, so that an uncontended
	// Acquire costs no inotify set-up. It is nil (plain polling) with Wait 0, and when
	// inotify is unavailable.
	var w *inotifyWaiter
	triedInotify := !localInotify || req.Wait <= 0
	defer func() { w.close() }()

	fd := -1
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	reopens := 0
	orphan := false // fd is the deleted file of a live holder, read for its record
	for {
		if orphan {
			unix.Close(fd)
			fd, orphan = -1, false
		}
		if fd < 0 {
			var err error
			if fd, err = l.openLockFile(path, true); err != nil {
				return nil, err
			}
			// Watch before the next flock attempt, so a release in between is not missed.
			w.watch(path)
			if localTestHookAfterOpen != nil {
				localTestHookAfterOpen(path)
			}
		}
		if req.OnTry != nil {
			req.OnTry()
		}
		// A suspended key takes nothing, also after a wait (and a standby's takeover).
		if err := l.suspended(ctx, req.Key); err != nil {
			return nil, err
		}
		sent := lockrun.ClockOr(l.now)()
		got, err := tryFlock(fd)
		if err != nil {
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		// Locked or not, the path must still name our file: a file deleted or replaced
		// since we opened it is not the lock the others use.
		same, err := samePathFile(fd, path)
		if err != nil {
			return nil, fmt.Errorf("stat lock file %s: %w", path, err)
		}
		if !same {
			unix.Close(fd) // also drops the flock, if we got one, on the stale file
			fd = -1
			if reopens++; reopens > maxReopen {
				return nil, fmt.Errorf("lock file %s keeps being deleted or replaced; stop whatever removes files in that folder, or set --lock-dir or CRONLOCK_LOCK_DIR to a private folder", path)
			}
			continue
		}
		if got {
			if dfd := deletedHolder(fd, path); dfd >= 0 {
				// Held after all, by the holder of the deleted file, which puts it back at
				// its next renewal: our flock on the new file goes, for it to take.
				unix.Close(fd)
				fd, got, orphan = dfd, false, true
			}
		}
		if got && !req.Tick.IsZero() {
			if t := standbyTick(readLocalTick(fd), req); t != nil {
				// The tick's run is not alive: the kernel let this flock go only once its
				// cronlock and guard were gone.
				ok, end := takeable(t, req)
				if !ok {
					return nil, end
				}
				lease, err := l.newLease(fd, path, req, sent)
				if err != nil {
					return nil, err
				}
				fd = -1
				return lease, nil
			}
			if t := readLocalTick(fd); t.claimedFor(req) {
				// Counted under the lock, in place; the count is a nicety, so a failed
				// write changes nothing.
				if r := readLocalRecord(fd); r != nil && r.Tick != nil {
					r.Tick.Skips++
					t = r.Tick
					writeLocalRecord(fd, r)
				}
				return nil, t.tickError(req) // the deferred close drops the flock
			}
		}
		if got {
			lease, err := l.newLease(fd, path, req, sent)
			if err != nil {
				return nil, err
			}
			fd = -1 // owned by the lease now
			return lease, nil
		}

		// Held: a holder that claimed this tick (or a later one) makes this a tick skip,
		// as on Redis, where the tick is checked before the lock.
		if !req.Tick.IsZero() {
			if r := heldRecord(fd); r != nil && r.Tick.claimedFor(req) {
				if t := standbyTick(r.Tick, req); t != nil && r.RunID == t.RunID {
					return nil, l.standbyWait(t, req, r.holder())
				}
				return nil, r.Tick.tickError(req)
			}
		}
		now := time.Now()
		if !now.Before(deadline) {
			return nil, &lockrun.HeldError{Key: req.Key, Holder: heldRecordHolder(fd)}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !triedInotify {
			triedInotify = true
			if w = newInotifyWaiter(); w != nil {
				// Watch, then try once more before sleeping: a release between our
				// attempt and the watch made no event we could see.
				w.watch(path)
				continue
			}
		}
		pause := min(deadline.Sub(now), localWaitPoll)
		switch {
		case req.Wait <= 0:
			pause = min(pause, 250*time.Microsecond)
		case w == nil:
			pause = min(pause, localWaitPollNoInotify) // no inotify: poll
		}
		if err := w.wait(ctx, pause); err != nil {
			return nil, err
		}
	}
}

// newLease writes the holder record and the new fencing token into the locked fd; sent
// is the clock just before the flock that took it.
func (l *Locker) newLease(fd int, path string, req lockrun.Request, sent time.Duration) (*localLease, error) {
	now := time.Now()
	// The token is the larger of the stored token + 1 (it rises even if the clock went
	// back) and the wall clock in microseconds (it rises even when the file and its token
	// were lost, as /run is emptied by a reboot).
	token := uint64(max(now.UnixMicro(), 0))
	var tick *localTick
	if r := readLocalRecord(fd); r != nil {
		if r.FencingToken+1 > token {
			token = r.FencingToken + 1
		}
		tick = r.Tick // a run without --schedule leaves the claim as it was
	} else if req.Known && req.Warn != nil {
		// A claim since this boot left a record here: the file was deleted since.
		req.Warn(&lockrun.DataLossError{Key: req.Key, Backend: l.Describe(), What: "its lock file " + path,
			Cause: "deleted by hand or by a cleaner of old files"})
	}
	attempt, takeoverOf := 1, ""
	if !req.Tick.IsZero() {
		prev := tick
		tick = claimTick(tick, req, false)
		if t := standbyTick(prev, req); t != nil {
			// A takeover (Acquire judged it): the next attempt of the same tick, which
			// keeps the tick before it for a give-back.
			attempt, takeoverOf = max(t.At, 1)+1, t.RunID
			tick.At, tick.To, tick.PrevUS = attempt, takeoverOf, t.PrevUS
		}
		if was, flip := scheduleChange(prev, tick, req); flip && req.Warn != nil {
			req.Warn(&lockrun.ScheduleFlipError{Key: req.Key, Was: was, Now: req.Canonical})
		}
	}
	rec := &localRecord{
		FencingToken: token,
		Key:          req.Key,
		Node:         req.Node,
		PID:          req.PID,
		RunID:        req.RunID,
		Acquired:     formatLocalTime(now),
		Renewed:      formatLocalTime(now),
		Tick:         tick,
	}
	if err := writeLocalRecord(fd, rec); err != nil {
		// Without the stored token the next holder could get a smaller one; fail rather
		// than hand out a token that may not rise.
		return nil, fmt.Errorf("write lock file %s: %w; free space in that folder, or set --lock-dir or CRONLOCK_LOCK_DIR to another one", path, err)
	}
	return &localLease{token: token, acquired: now, sent: sent, minHold: req.MinHold, path: path, fd: fd, rec: rec,
		runID: req.RunID, attempt: attempt, takeoverOf: takeoverOf}, nil
}

// ClaimMissed claims req.Tick as missed in the lock file, under the flock, and lets the
// flock go at once. A lock held by a running job cannot be written: then the tick stays
// unclaimed (nil is returned, the run is missed all the same), unless the holder claimed
// it, which is *TickError.
func (l *Locker) ClaimMissed(ctx context.Context, req lockrun.Request) error {
	if err := lockrun.ValidKey(req.Key); err != nil {
		return err
	}
	if req.Tick.IsZero() {
		return fmt.Errorf("claim a missed tick of %s: no tick given", req.Key)
	}
	if err := l.suspended(ctx, req.Key); err != nil {
		return err // a missed tick of a suspended key is a suspended one: no alarm
	}
	path := l.LockPath(req.Key)
	fd, err := l.openLockFile(path, true)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if req.OnTry != nil {
		req.OnTry()
	}
	got, err := tryFlock(fd)
	if err != nil {
		return fmt.Errorf("flock %s: %w", path, err)
	}
	if got {
		if dfd := deletedHolder(fd, path); dfd >= 0 {
			defer unix.Close(dfd)
			unix.Flock(fd, unix.LOCK_UN)
			fd, got = dfd, false // held by the deleted file's holder: its claim counts
		}
	}
	r := heldRecord(fd)
	if !got {
		if r != nil && r.Tick.claimedFor(req) {
			return r.Tick.tickError(req)
		}
		return nil
	}
	if same, err := samePathFile(fd, path); err != nil || !same {
		return nil // replaced under us: nobody's lock file, nothing to claim
	}
	if r == nil {
		r = &localRecord{Key: req.Key}
	}
	if r.Tick.claimedFor(req) {
		r.Tick.Skips++
		writeLocalRecord(fd, r)
		return r.Tick.tickError(req)
	}
	prev := r.Tick
	r.Tick = claimTick(prev, req, true)
	scheduleChange(prev, r.Tick, req) // said by the claim that runs its job
	if err := writeLocalRecord(fd, r); err != nil {
		return fmt.Errorf("write lock file %s: %w; free space in that folder, or set --lock-dir or CRONLOCK_LOCK_DIR to another one", path, err)
	}
	return nil
}

// readLocalTick is the tick record of the lock file open as fd, nil when none.
func readLocalTick(fd int) *localTick {
	if r := readLocalRecord(fd); r != nil {
		return r.Tick
	}
	return nil
}

// Inspect returns the holder of key, or nil when nobody holds it. It never creates a lock
// file. A held lock whose record cannot be read gives a Holder with zero fields.
func (l *Locker) Inspect(ctx context.Context, key string) (*lockrun.Holder, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	return l.inspectPath(l.LockPath(key))
}

// inspectPath tells whether someone holds the lock on path, from the kernel's table of
// file locks (/proc/locks). It takes no lock itself, so a `cronlock status` can never make
// a concurrent run see the lock as held.
func (l *Locker) inspectPath(path string) (*lockrun.Holder, error) {
	fd, err := l.openLockFile(path, false)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	held, err := flockHeld(st.Dev, st.Ino)
	if err != nil || !held {
		return nil, err
	}
	if h := heldRecordHolder(fd); h != nil {
		return h, nil
	}
	return &lockrun.Holder{}, nil
}

// List returns every lock of the folder held right now, by key. Files cronlock did not
// name, and files it cannot open (another user's, in a shared folder), are skipped.
func (l *Locker) List(ctx context.Context) (map[string]lockrun.Holder, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("read lock folder %s: %w; check --lock-dir or CRONLOCK_LOCK_DIR", l.dir, err)
	}
	out := map[string]lockrun.Holder{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".lock") {
			continue
		}
		h, err := l.inspectPath(filepath.Join(l.dir, name))
		if err != nil || h == nil {
			continue
		}
		if key, ok := l.keyOfFile(name); ok {
			out[key] = *h
		}
	}
	return out, nil
}

// Keys returns the keys of every lock file in the folder, held or not, sorted: a key
// whose runs all ended keeps its file (and its tick record). Files cronlock did not
// name, and hashed names whose record it cannot read, are skipped.
func (l *Locker) Keys() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read lock folder %s: %w; check --lock-dir or CRONLOCK_LOCK_DIR", l.dir, err)
	}
	var keys []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".lock") {
			continue
		}
		if key, ok := l.keyOfFile(name); ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// keyOfFile is the key whose lock file is name: decoded from the name, or for a hashed
// name (a long key) read from the file's record, which must hash to it. ok is false for
// a file cronlock did not name and a hashed one whose record it cannot read.
func (l *Locker) keyOfFile(name string) (key string, ok bool) {
	if key, ok := localKeyFromName(name); ok {
		return key, true
	}
	r := l.recordOf(name)
	if r == nil || lockrun.ValidKey(r.Key) != nil || localFileName(r.Key) != name {
		return "", false
	}
	return r.Key, true
}

func (l *Locker) recordOf(name string) *localRecord {
	fd, err := l.openLockFile(filepath.Join(l.dir, name), false)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	return readLocalRecord(fd)
}

// Unlock cannot free a local lock: the kernel ties it to the holder's open file, and
// deleting the file would only let a second holder in beside the first. It removes
// nothing and returns (nil, nil) when nobody holds key, else an error naming the holder
// and its pid, to be stopped instead. force changes nothing.
func (l *Locker) Unlock(ctx context.Context, key string, force bool) (*lockrun.Holder, error) {
	h, err := l.Inspect(ctx, key)
	if err != nil || h == nil {
		return nil, err
	}
	if h.PID == 0 {
		return nil, fmt.Errorf("local lock %s is held, but its holder record is unreadable; local locks free themselves when their holder exits, so nothing was removed: find the holder with `fuser -v %s` and stop it", key, l.LockPath(key))
	}
	return nil, fmt.Errorf("local lock %s is held by %s since %s; local locks free themselves when their holder exits, so nothing was removed: stop that process (kill %d) to free it",
		key, h, h.Since.Local().Format(time.RFC3339), h.PID)
}
