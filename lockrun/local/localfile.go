package local

// A local lock file: its name in the lock folder, the checks made when it is opened,
// and its record. The file stores the last fencing token and the holder's metadata, as
// one line of JSON at offset 0:
//
//	{"v":1,"fencing_token":1732873985123456,"key":"billing","node":"web1","pid":4242,"run_id":"0193…","acquired":"2024-11-29T09:53:05.123456Z","renewed":"2024-11-29T09:53:25.123456Z"}
//
// It is written only by the process that holds the lock (pwrite at offset 0, then
// ftruncate), and read without the lock by Inspect, List and a conflicting Acquire;
// readers use the first line only and treat anything unparsable as "unknown holder".

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/keyname"
	"cronlock/lockrun"
)

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
	if !ok || lockrun.ValidKey(key) != nil {
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
	// Tick is the last schedule tick claimed for the key (--schedule): written, like the
	// rest, only under the flock, in place. Runs without --schedule keep it as it is.
	Tick *localTick `json:"tick,omitempty"`
}

// localTick is the local backend's tick record, the same facts as Redis's.
type localTick struct {
	TickUS int64  `json:"tick_us"` // UTC microseconds
	PrevUS int64  `json:"prev_us"` // the tick it replaced, for giving back; 0 = none
	Expr   string `json:"expr"`
	TZ     string `json:"tz"`
	Node   string `json:"node"`
	RunID  string `json:"run_id"`
	Skips  int    `json:"skips"`
	Missed bool   `json:"missed"`
	// Cx is the claim's schedule in canonical form with its zone; Sched the schedules
	// claimed within the last 24 hours, for telling a flip (see scheduleChange).
	Cx    string       `json:"cx,omitempty"`
	Sched []localSched `json:"sched,omitempty"`
	// Standby takeover (run --standby): Status is "running" from the claim until the
	// release writes the run's outcome (and Signal); a file of an older cronlock has none,
	// and is never taken for lost. At is the tick's attempt (0 = 1), To the run it took
	// over, NT a holder that may run on after losing its lock (never taken over).
	Status string `json:"status,omitempty"`
	Signal string `json:"signal,omitempty"`
	Hung   bool   `json:"hung,omitempty"` // a --heartbeat-timeout: resumable
	At     int    `json:"at,omitempty"`
	To     string `json:"to,omitempty"`
	NT     bool   `json:"nt,omitempty"`
}

// localSched is a schedule the key was claimed with, and when last.
type localSched struct {
	Cx string `json:"cx"`
	US int64  `json:"us"`
}

// scheduleChange compares the claim t of req with the one before it, prev, as Redis's
// acquire script does: was is prev's schedule when it differs from t's, and flip
// reports that t's schedule is one the key had within 24 hours (hosts, or crontab
// lines, that disagree on the schedule or zone). It keeps t.Sched up to date.
func scheduleChange(prev, t *localTick, req lockrun.Request) (was string, flip bool) {
	if req.Canonical == "" {
		return "", false
	}
	now := time.Now()
	t.Cx = req.Canonical
	var seen bool
	if prev != nil {
		for _, s := range prev.Sched {
			if now.Sub(time.UnixMicro(s.US)) > 24*time.Hour {
				continue
			}
			if s.Cx == req.Canonical {
				seen = true
				continue
			}
			if len(t.Sched) < 7 {
				t.Sched = append(t.Sched, s)
			}
		}
		if prev.RunID != req.RunID && prev.Cx != "" && prev.Cx != req.Canonical {
			was, flip = prev.Cx, seen
		}
	}
	t.Sched = append(t.Sched, localSched{Cx: req.Canonical, US: now.UnixMicro()})
	return was, flip
}

// claimedFor reports whether t records a claim of req's tick or a later one by another
// run; such a run is skipped.
func (t *localTick) claimedFor(req lockrun.Request) bool {
	return t != nil && t.RunID != req.RunID && t.TickUS >= req.Tick.UnixMicro()
}

// tickError describes t's claim to a run of req that it skips.
func (t *localTick) tickError(req lockrun.Request) *lockrun.TickError {
	return &lockrun.TickError{Key: req.Key, Tick: req.Tick, Claimed: time.UnixMicro(t.TickUS).UTC(),
		Node: t.Node, RunID: t.RunID, Missed: t.Missed, Skips: t.Skips}
}

// claim is the record of req's tick, claimed now, replacing prev.
func claimTick(prev *localTick, req lockrun.Request, missed bool) *localTick {
	t := &localTick{TickUS: req.Tick.UnixMicro(), Expr: req.Schedule, TZ: req.Zone,
		Node: req.Node, RunID: req.RunID, Missed: missed, NT: req.Standby.NonTakeable}
	if !missed {
		t.Status = "running"
	}
	if prev != nil {
		t.PrevUS = prev.TickUS
		if prev.RunID == req.RunID {
			t.PrevUS = prev.PrevUS
		}
	}
	return t
}

const localTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func formatLocalTime(t time.Time) string { return t.UTC().Format(localTimeFormat) }

// holder converts a record into a Holder; unparsable times stay zero.
func (r *localRecord) holder() *lockrun.Holder {
	h := &lockrun.Holder{Node: r.Node, PID: r.PID, RunID: r.RunID, FencingToken: r.FencingToken}
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
func (l *Locker) openLockFile(path string, create bool) (int, error) {
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

// heldRecordHolder reads the holder of a lock that another process holds. A record being
// written at that moment can be unreadable; a short retry usually finds it whole.
func heldRecordHolder(fd int) *lockrun.Holder {
	if r := heldRecord(fd); r != nil {
		return r.holder()
	}
	return nil
}

// heldRecord reads the record of a lock file another process may be writing, retrying
// a moment for a record caught half written.
func heldRecord(fd int) *localRecord {
	for i := 0; ; i++ {
		if r := readLocalRecord(fd); r != nil {
			return r
		}
		if i == 2 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// flockHeld reports whether /proc/locks lists an exclusive flock on the file dev/ino.
//
// The kernel builds /proc/locks a page at a time, each page under its own pass over the
// lock list: a lock released between two pages shifts the rest, and an entry can be
// skipped. On a machine with many locks coming and going that made a held lock look free
// (seen once in the test suite). A lock not found is looked for again, three times in all:
// a miss needs a release before it on every pass.
func flockHeld(dev, ino uint64) (bool, error) {
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	for range 3 {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			return false, fmt.Errorf("read the kernel's lock table: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == want {
				return true, nil
			}
		}
		if len(b) < 4096 {
			return false, nil // one page: read in one pass, nothing can have been skipped
		}
	}
	return false, nil
}
