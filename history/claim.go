package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
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
}

// Claim creates and locks the per-run file of r in the history file at path, with r's start
// facts in it, without opening the database: a caller can claim a run on its critical
// path, at the moment its job is about to start, while the database is still being opened
// elsewhere. Store.Start of the same run ID in this process then adopts the file. If the
// process dies before its row is written, Reap finds the file free and records the run
// as abandoned from what the file says. r.ID must be set.
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
		FencingToken: r.FencingToken, Attempt: r.Attempt, BootID: r.BootID, PIDStart: r.PIDStart})
	if err != nil {
		return fmt.Errorf("history: claim run %s: %w", r.ID, err)
	}
	f, err := lockRunFile(abs+"-runs", r.ID, rec)
	if err != nil {
		return err
	}
	claims.Lock()
	claims.files[r.ID] = f
	claims.Unlock()
	return nil
}

// takeClaim hands over the per-run file Claim made for id, or nil.
func takeClaim(id string) *os.File {
	claims.Lock()
	defer claims.Unlock()
	f := claims.files[id]
	delete(claims.files, id)
	return f
}

// readClaim reads the start facts in an unlocked per-run file f, or reports ok false for a
// file without them (one from a cronlock before Claim, or cut short by a crash).
func readClaim(f *os.File) (r Run, ok bool) {
	b := make([]byte, 64<<10)
	n, _ := unix.Pread(int(f.Fd()), b, 0)
	var c claimRecord
	if n <= 0 || json.Unmarshal(b[:n], &c) != nil || c.ID == "" {
		return Run{}, false
	}
	return Run{ID: c.ID, Key: c.Key, Node: string(c.Node), PID: c.PID, Command: decodeArgv(c.Command),
		StartedAt: time.Unix(0, c.StartedAt), Backend: c.Backend, FencingToken: c.FencingToken,
		Attempt: c.Attempt, BootID: c.BootID, PIDStart: c.PIDStart}, true
}
