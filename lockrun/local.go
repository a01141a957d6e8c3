package lockrun

// The local backend: a kernel flock(2) on one file per key in a per-user folder.
//
// Why flock: the kernel frees it when the last descriptor of the holder's open file
// description closes, which includes the holder dying by SIGKILL or a crash, so a local
// lock needs no TTL and no stale-lock clean-up. cronlock therefore never unlinks a lock
// file: an unlink while someone holds or waits on the file would let a second holder
// lock a fresh file under the same name.
//
// The lock file also stores the last fencing token and the holder's metadata, as one
// line of JSON at offset 0:
//
//	{"v":1,"fencing_token":1732873985123456,"key":"billing","node":"web1","pid":4242,"run_id":"0193…","acquired":"2024-11-29T09:53:05.123456Z","renewed":"2024-11-29T09:53:25.123456Z"}
//
// It is written only by the process that holds the lock (pwrite at offset 0, then
// ftruncate), and read without the lock by Inspect, List and a conflicting Acquire;
// readers use the first line only and treat anything unparsable as "unknown holder".

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/keyname"
)

// LocalLocker is the local backend: one flock(2)-locked file per key in a folder, so
// locks exclude each other among the processes of one machine that use the same folder.
// Use NewLocalLocker; the zero value is not usable.
type LocalLocker struct {
	dir string
	// now is the clock of Lease.Sent; nil means Boottime. Tests inject a fake one.
	now func() time.Duration
}

var _ Locker = (*LocalLocker)(nil)

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

// DefaultLockDir returns the lock folder used when --lock-dir / CRONLOCK_LOCK_DIR is not
// set: /run/cronlock for root, else /tmp/cronlock-<uid>. It depends on the effective user
// id only, never on the environment (cron sets no XDG_RUNTIME_DIR and may set another
// TMPDIR), so a run from cron and one from a login shell meet in the same folder.
func DefaultLockDir() string {
	uid := os.Geteuid()
	if uid == 0 {
		return "/run/cronlock"
	}
	return "/tmp/cronlock-" + strconv.Itoa(uid)
}

// NewLocalLocker returns the local backend using dir (DefaultLockDir when dir is empty).
// It creates dir with mode 0700 (and missing parents) when it does not exist. It refuses,
// with an error that names --lock-dir and CRONLOCK_LOCK_DIR, a dir that is a symbolic link,
// not a directory, owned by another user, or (unless it created it) writable by group or
// others: anyone who can write the folder can replace lock files and so break the lock.
func NewLocalLocker(dir string) (*LocalLocker, error) {
	if dir == "" {
		dir = DefaultLockDir()
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
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		hint := ""
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			hint = " such as " + real
		}
		return nil, fmt.Errorf("lock folder %s is a symbolic link, which cronlock refuses (it could be pointed elsewhere under a running job); set --lock-dir or CRONLOCK_LOCK_DIR to the real folder%s", dir, hint)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, fmt.Errorf("lock folder %s exists but is not a folder; remove it or set --lock-dir or CRONLOCK_LOCK_DIR to another path", dir)
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("lock folder %s belongs to uid %d, not to you (uid %d), so its locks cannot be trusted; remove it or set --lock-dir or CRONLOCK_LOCK_DIR to a folder of your own", dir, st.Uid, os.Geteuid())
	case !created && st.Mode&0o022 != 0:
		return nil, fmt.Errorf("lock folder %s is writable by group or others (mode %04o), so anyone could replace its lock files; run chmod go-w %s or set --lock-dir or CRONLOCK_LOCK_DIR to a private folder", dir, st.Mode&0o7777, dir)
	}
	return &LocalLocker{dir: dir}, nil
}

// Dir returns the absolute path of the lock folder.
func (l *LocalLocker) Dir() string { return l.dir }

// Describe returns "local <dir>".
func (l *LocalLocker) Describe() string { return "local " + l.dir }

// Close does nothing: the backend holds no resource. Leases stay valid until released.
func (l *LocalLocker) Close() error { return nil }

// LockPath returns the lock file of key: <dir>/<encoded key>.lock (see localFileName).
func (l *LocalLocker) LockPath(key string) string {
	return filepath.Join(l.dir, localFileName(key))
}

// lockFileNames names lock files: <encoded key>.lock, every byte of the key outside
// A-Z a-z 0-9 _ - written as %XX, so that "/" and "." cannot leave the folder or make "."
// and ".." names. A name that would exceed the common 255-byte NAME_MAX (a long key full
// of "/" can triple in length) keeps its first 200 encoded bytes (fewer rather than split
// a %XX), then "=" and 32 hex digits of the key's SHA-256. These names are on disk: they
// must never change, or two versions of cronlock on one host would lock different files
// for one key.
var lockFileNames = keyname.Scheme{Suffix: ".lock", Plain: "_-", MaxLen: 255 - len(".lock"), HashedCut: 200}

// localFileName returns the file name of key (see lockFileNames).
func localFileName(key string) string { return lockFileNames.Encode(key) }

// localKeyFromName decodes a lock file name made by localFileName. ok is false for names
// cronlock did not make, and for hashed names (whose key only the record knows).
func localKeyFromName(name string) (key string, ok bool) {
	key, ok = lockFileNames.Decode(name)
	if !ok || ValidKey(key) != nil {
		return "", false
	}
	return key, true
}

// localRecord is what the lock file holds. Times have a fixed width so that a renewal
// overwrites the record in place with the same length.
type localRecord struct {
	V            int    `json:"v"`
	FencingToken uint64 `json:"fencing_token"`
	Key          string `json:"key"`
	Node         string `json:"node"`
	PID          int    `json:"pid"`
	RunID        string `json:"run_id"`
	Acquired     string `json:"acquired"`
	Renewed      string `json:"renewed"`
}

const localTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func formatLocalTime(t time.Time) string { return t.UTC().Format(localTimeFormat) }

// holder converts a record into a Holder; unparsable times stay zero.
func (r *localRecord) holder() *Holder {
	h := &Holder{Node: r.Node, PID: r.PID, RunID: r.RunID, FencingToken: r.FencingToken}
	h.Since, _ = time.Parse(localTimeFormat, r.Acquired)
	h.Renewed, _ = time.Parse(localTimeFormat, r.Renewed)
	return h
}

// readLocalRecord reads the record at the start of fd without any lock. It returns nil
// when the file is empty or its first line is not a record (garbled, or being written).
func readLocalRecord(fd int) *localRecord {
	buf := make([]byte, 8192)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n <= 0 {
		return nil
	}
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	var r localRecord
	if json.Unmarshal(line, &r) != nil {
		return nil
	}
	return &r
}

// writeLocalRecord replaces the record. The new line is written first and the file cut
// after it, so a reader in between still finds one whole first line.
func writeLocalRecord(fd int, r *localRecord) error {
	r.V = 1
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	n, err := unix.Pwrite(fd, b, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("short write (%d of %d bytes)", n, len(b))
	}
	return unix.Ftruncate(fd, int64(len(b)))
}

// openLockFile opens (and with create, creates) the lock file at path. O_NOFOLLOW
// refuses a symbolic link planted at the path; O_NONBLOCK keeps a planted FIFO from
// hanging the open (it changes nothing for regular files); O_CLOEXEC keeps the child from
// inheriting the descriptor, which would keep the lock held after cronlock is gone.
func (l *LocalLocker) openLockFile(path string, create bool) (int, error) {
	flags := unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if create {
		flags |= unix.O_RDWR | unix.O_CREAT
	} else {
		flags |= unix.O_RDONLY
	}
	fd, err := unix.Open(path, flags, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("lock file %s is a symbolic link, which cronlock refuses; remove it, or set --lock-dir or CRONLOCK_LOCK_DIR to a private folder", path)
		}
		if errors.Is(err, unix.ENOENT) && !create {
			return -1, err
		}
		return -1, fmt.Errorf("open lock file %s: %w; check that folder, or set --lock-dir or CRONLOCK_LOCK_DIR to another one", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("stat lock file %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, fmt.Errorf("lock file %s is not a regular file; remove it, or set --lock-dir or CRONLOCK_LOCK_DIR to a private folder", path)
	}
	// Root writes the record into the file: a hard link to a file of someone else must not
	// turn that into an overwrite of, say, /etc/shadow.
	if create && (int(st.Uid) != os.Geteuid() || st.Nlink > 1) {
		unix.Close(fd)
		return -1, fmt.Errorf("lock file %s belongs to uid %d or has other hard links, which cronlock refuses; remove it, or set --lock-dir or CRONLOCK_LOCK_DIR to a private folder", path, st.Uid)
	}
	return fd, nil
}

// samePathFile reports whether path still names the file open as fd. A missing path is
// (false, nil): the file was deleted.
func samePathFile(fd int, path string) (bool, error) {
	var fst, pst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return false, err
	}
	if err := unix.Lstat(path, &pst); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return fst.Dev == pst.Dev && fst.Ino == pst.Ino, nil
}

// tryFlock takes an exclusive flock on fd without blocking; (false, nil) means held.
func tryFlock(fd int) (bool, error) {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return false, err
		}
	}
}

// Acquire takes req.Key. With req.Wait 0 it tries once; otherwise it waits up to req.Wait, woken by inotify within a
// millisecond or so of the holder closing the file. It returns *HeldError (with the holder
// read from the lock file, nil when unreadable) when the lock stays held, ctx.Err() when
// ctx ends first, and other errors when the lock file cannot be used.
func (l *LocalLocker) Acquire(ctx context.Context, req Request) (Lease, error) {
	if err := ValidKey(req.Key); err != nil {
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
	for {
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
		sent := clockOr(l.now)()
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
			lease, err := l.newLease(fd, path, req, sent)
			if err != nil {
				return nil, err
			}
			fd = -1 // owned by the lease now
			return lease, nil
		}

		now := time.Now()
		if !now.Before(deadline) {
			return nil, &HeldError{Key: req.Key, Holder: heldRecordHolder(fd)}
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

// heldRecordHolder reads the holder of a lock that another process holds. A record being
// written at that moment can be unreadable; a short retry usually finds it whole.
func heldRecordHolder(fd int) *Holder {
	for i := 0; ; i++ {
		if r := readLocalRecord(fd); r != nil {
			return r.holder()
		}
		if i == 2 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// newLease writes the holder record and the new fencing token into the locked fd; sent
// is the clock just before the flock that took it.
func (l *LocalLocker) newLease(fd int, path string, req Request, sent time.Duration) (*localLease, error) {
	now := time.Now()
	// The token is the larger of the stored token + 1 (it rises even if the clock went
	// back) and the wall clock in microseconds (it rises even when the file and its token
	// were lost, as /run is emptied by a reboot).
	token := uint64(max(now.UnixMicro(), 0))
	if r := readLocalRecord(fd); r != nil && r.FencingToken+1 > token {
		token = r.FencingToken + 1
	}
	rec := &localRecord{
		FencingToken: token,
		Key:          req.Key,
		Node:         req.Node,
		PID:          req.PID,
		RunID:        req.RunID,
		Acquired:     formatLocalTime(now),
		Renewed:      formatLocalTime(now),
	}
	if err := writeLocalRecord(fd, rec); err != nil {
		// Without the stored token the next holder could get a smaller one; fail rather
		// than hand out a token that may not rise.
		return nil, fmt.Errorf("write lock file %s: %w; free space in that folder, or set --lock-dir or CRONLOCK_LOCK_DIR to another one", path, err)
	}
	return &localLease{token: token, acquired: now, sent: sent, minHold: req.MinHold, path: path, fd: fd, rec: rec}, nil
}

// Inspect returns the holder of key, or nil when nobody holds it. It never creates a lock
// file. A held lock whose record cannot be read gives a Holder with zero fields.
func (l *LocalLocker) Inspect(ctx context.Context, key string) (*Holder, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	return l.inspectPath(l.LockPath(key))
}

// inspectPath tells whether someone holds the lock on path, from the kernel's table of
// file locks (/proc/locks). It takes no lock itself, so a `cronlock status` can never make
// a concurrent run see the lock as held.
func (l *LocalLocker) inspectPath(path string) (*Holder, error) {
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
	return &Holder{}, nil
}

// flockHeld reports whether /proc/locks lists an exclusive flock on the file dev/ino.
// Its lines look like "1: FLOCK  ADVISORY  WRITE 20609 fe:00:9977937 0 EOF", with the
// device as hex major:minor; lines of blocked waiters ("1: -> FLOCK …") are not holders.
func flockHeld(dev, ino uint64) (bool, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, fmt.Errorf("read the kernel's lock table: %w", err)
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == want {
			return true, nil
		}
	}
	return false, nil
}

// List returns every lock of the folder held right now, by key. Files cronlock did not
// name, and files it cannot open (another user's, in a shared folder), are skipped.
func (l *LocalLocker) List(ctx context.Context) (map[string]Holder, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("read lock folder %s: %w; check --lock-dir or CRONLOCK_LOCK_DIR", l.dir, err)
	}
	out := map[string]Holder{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".lock") {
			continue
		}
		key, ok := localKeyFromName(name)
		h, err := l.inspectPath(filepath.Join(l.dir, name))
		if err != nil || h == nil {
			continue
		}
		if !ok {
			// A hashed name: the key is known only from the record, and must hash to it.
			if r := l.recordOf(name); r != nil && ValidKey(r.Key) == nil && localFileName(r.Key) == name {
				key = r.Key
			} else {
				continue
			}
		}
		out[key] = *h
	}
	return out, nil
}

func (l *LocalLocker) recordOf(name string) *localRecord {
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
func (l *LocalLocker) Unlock(ctx context.Context, key string, force bool) (*Holder, error) {
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

// localLease is a held local lock: the open, flock-ed descriptor.
type localLease struct {
	token    uint64        // immutable: FencingToken needs no lock
	acquired time.Time     // with its monotonic reading, for MinHold
	sent     time.Duration // the clock just before the flock that took it
	minHold  time.Duration // immutable
	path     string        // immutable

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
// locked file. It returns ErrLockLost when the file was deleted or replaced (a manual rm):
// a new cronlock would then lock the new file while this job still runs. Other errors
// (the times or record could not be written) leave the lock held.
func (ls *localLease) Renew(ctx context.Context) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.fd < 0 {
		return fmt.Errorf("renew %s: lease already released: %w", ls.path, ErrLockLost)
	}
	same, err := samePathFile(ls.fd, ls.path)
	if err != nil {
		return fmt.Errorf("renew %s: %w", ls.path, err)
	}
	if !same {
		return fmt.Errorf("lock file %s was deleted or replaced while held: %w", ls.path, ErrLockLost)
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

// Release lets the lock go. When MinHold has not passed since acquisition, Release first
// blocks until it has: the simplest way to keep holding it, since the lock is the open
// descriptor (handing the descriptor to a lingering process would leave a holder record
// naming a pid that is gone). If ctx ends first, the lock is released at once and the
// error says MinHold was cut short. Release after Release does nothing.
func (ls *localLease) Release(ctx context.Context) error {
	var cut error
	if wait := ls.minHold - time.Since(ls.acquired); wait > 0 {
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

// inotifyWaiter wakes a waiting Acquire when a lock file is closed by a writer (every
// holder opens it read-write, so its release or death is an IN_CLOSE_WRITE), deleted, or
// renamed. A nil *inotifyWaiter just sleeps.
type inotifyWaiter struct {
	fd int
}

func newInotifyWaiter() *inotifyWaiter {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	return &inotifyWaiter{fd: fd}
}

// close frees the inotify instance in the background: closing one waits for an RCU
// grace period (10–20ms here), which would otherwise delay the hand-off.
func (w *inotifyWaiter) close() {
	if w != nil {
		go unix.Close(w.fd)
	}
}

// watch adds path's current file to the watched set. A failure only costs promptness.
func (w *inotifyWaiter) watch(path string) {
	if w == nil {
		return
	}
	unix.InotifyAddWatch(w.fd, path, unix.IN_CLOSE_WRITE|unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_DONT_FOLLOW)
}

// wait returns after an event, after d, or with ctx.Err() when ctx ends.
func (w *inotifyWaiter) wait(ctx context.Context, d time.Duration) error {
	if w == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Poll blocks this goroutine's thread for at most d (localWaitPoll, 25ms), which
	// also bounds how late a cancelled ctx is noticed.
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, ms); err != nil && !errors.Is(err, unix.EINTR) {
		time.Sleep(d)
	}
	// Drain the events: which file or why does not matter, the caller just tries again.
	var buf [4096]byte
	for {
		if n, err := unix.Read(w.fd, buf[:]); n <= 0 || err != nil {
			break
		}
	}
	return ctx.Err()
}
