package history

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/procfs"
	"cronlock/runstatus"
)

// claims are the per-run files Claim made in this process, waiting for Store.Start to
// take them over.
var claims = struct {
	sync.Mutex
	files map[string]*os.File
}{files: map[string]*os.File{}}

// claimRecord is what a per-run file holds: the facts of the run's start, so that a run
// whose cronlock died before its row reached the database is still recorded, as
// abandoned, by the next Reap. Byte fields keep arguments and names exactly (JSON strings
// would turn invalid UTF-8 into U+FFFD).
type claimRecord struct {
	ID           string `json:"id"`
	Key          string `json:"key"`
	Node         []byte `json:"node"`
	PID          int    `json:"pid"`
	Command      []byte `json:"command"` // encodeArgv
	StartedAt    int64  `json:"started_at"`
	Backend      string `json:"backend"`
	FencingToken uint64 `json:"fencing_token"`
	Attempt      int    `json:"attempt"`
	BootID       []byte `json:"boot_id"`
	PIDStart     uint64 `json:"pid_start"`
	ScheduledFor int64  `json:"scheduled_for,omitempty"` // Unix ns; 0 = none
	RunID        string `json:"run_id,omitempty"`        // "" = ID
	Try          int    `json:"try,omitempty"`           // 0 = 1
}

// Claim creates and locks the per-run file of r in the history file at path, with r's start
// facts in it, without opening the database: a caller can claim a run on its critical
// path, at the moment its job is about to start, while the database is still being opened
// elsewhere. Store.Start or Store.Finish of the same run ID in this process then adopts
// the file. Until the run's row is written, AddLive shows the run to readers from the
// file; if the process dies first, Reap finds the file free and records the run as
// abandoned from what the file says. r.ID must be set.
func Claim(path string, r Run) error {
	if r.ID == "" {
		return errors.New("history: claim: a run needs an id")
	}
	if err := prepare(&r); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("history: %s: %w", path, err)
	}
	rec, err := json.Marshal(claimRecord{ID: r.ID, Key: r.Key, Node: []byte(r.Node), PID: r.PID,
		Command: encodeArgv(r.Command), StartedAt: r.StartedAt.UnixNano(), Backend: r.Backend,
		FencingToken: r.FencingToken, Attempt: r.Attempt, BootID: r.BootID, PIDStart: r.PIDStart,
		ScheduledFor: unixNanoOr0(r.ScheduledFor), RunID: r.RunID, Try: r.Try})
	if err != nil {
		return fmt.Errorf("history: claim run %s: %w", r.ID, err)
	}
	f, err := lockRunFile(abs+"-runs", r.ID, rec)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return &diskFullError{path: abs, err: err} // the same cause as the database's
		}
		return err
	}
	claims.Lock()
	claims.files[r.ID] = f
	claims.Unlock()
	return nil
}

// Warm does ahead of time the work every Claim of this process shares: reading the boot
// id and the process's start time, and preparing the encoder of the start facts. A run
// calls it on a goroutine of its own while it takes its lock, so that Claim, on the
// critical path just before the job starts, costs only the file.
func Warm() {
	procfs.BootID()
	selfStart()
	_, _ = json.Marshal(claimRecord{})
}

// takeClaim hands over the per-run file Claim made for id, or nil.
func takeClaim(id string) *os.File {
	claims.Lock()
	defer claims.Unlock()
	f := claims.files[id]
	delete(claims.files, id)
	return f
}

// DropClaims removes and releases every per-run file this process claimed that no Store
// took over. A run calls it when its history could not be opened or written: its row
// will never be written, and a file left behind would have the next Reap record the run
// abandoned (killed or crashed) though it ended normally.
func DropClaims() {
	claims.Lock()
	defer claims.Unlock()
	for id, f := range claims.files {
		unlockRun(f)
		delete(claims.files, id)
	}
}

// maxClaim bounds what readClaim reads: the start facts of the longest command line
// Linux runs (its arguments and environment together fit in a quarter of an 8 MiB stack),
// base64-encoded, with room to spare.
const maxClaim = 8 << 20

// readClaim reads the start facts in the per-run file f, or reports ok false for a file
// without them (one from a cronlock before Claim, or cut short by a crash). The whole
// file is read: a long command line must not make a dead run vanish unrecorded.
func readClaim(f *os.File) (r Run, ok bool) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Size <= 0 || st.Size > maxClaim {
		return Run{}, false
	}
	b := make([]byte, st.Size)
	n, _ := unix.Pread(int(f.Fd()), b, 0)
	var c claimRecord
	if n <= 0 || json.Unmarshal(b[:n], &c) != nil || c.ID == "" {
		return Run{}, false
	}
	return Run{ID: c.ID, Key: c.Key, Node: string(c.Node), PID: c.PID, Command: decodeArgv(c.Command),
		StartedAt: time.Unix(0, c.StartedAt), Backend: c.Backend, FencingToken: c.FencingToken,
		Attempt: c.Attempt, BootID: c.BootID, PIDStart: c.PIDStart, ScheduledFor: timeOr0(c.ScheduledFor),
		RunID: c.RunID, Try: c.Try}, true
}

// unixNanoOr0 is t in Unix nanoseconds, 0 for the zero time.
func unixNanoOr0(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// timeOr0 is the UTC time of ns Unix nanoseconds, the zero time for 0.
func timeOr0(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// AddLive writes the running row of every live run that has claimed its per-run file
// (Claim) and not yet written its row, and returns how many it wrote. A run writes its
// running row only once it has run for a while, so that a short run costs one write,
// not two; readers call AddLive first, so that they see every run in progress all the
// same. The run's own Start or Finish later finds the row and completes it. Files of dead
// runs are left to Reap.
func (s *Store) AddLive() (int, error) {
	entries, err := os.ReadDir(s.runsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("history: read %s: %w", s.runsDir, err)
	}
	added := 0
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || s.holds(id) {
			continue
		}
		r, ok := liveClaim(filepath.Join(s.runsDir, e.Name()))
		if !ok || r.ID != id {
			continue
		}
		var one int
		err := s.db.QueryRow(`SELECT 1 FROM runs WHERE id = ?`, id).Scan(&one)
		if err == nil {
			continue // written already
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return added, describe(s.path, err)
		}
		r.Status = runstatus.Running
		// Should the run finish in between, its final row stays: the insert gives way.
		res, err := s.db.Exec(`INSERT INTO runs (`+runColumns+`) VALUES `+runValues+`
			ON CONFLICT (id) DO NOTHING`, rowArgs(&r)...)
		if err != nil {
			return added, describe(s.path, fmt.Errorf("record live run %s: %w", id, err))
		}
		if n, _ := res.RowsAffected(); n > 0 {
			added++
		}
	}
	return added, nil
}

// liveClaim reads the start facts of the per-run file name when a live process holds its
// lock; ok is false for a free lock (a dead run, Reap's business), a missing file (the
// run just ended) or a file without facts.
func liveClaim(name string) (r Run, ok bool) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Run{}, false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		return Run{}, false // free (the lock goes with the Close): no live run owns it
	}
	return readClaim(f)
}
