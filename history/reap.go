package history

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/procfs"
	"cronlock/runstatus"
)

// abandonedError is the error text of a row Reap marks abandoned.
const abandonedError = "cronlock ended without recording how the run ended (killed, crashed, or the machine stopped)"

// lockRun creates and flocks the per-run file <history>-runs/<id>.lock. The kernel drops
// the flock when the process dies, however it dies, so a free lock on a running row
// means a dead run even when its pid now belongs to another process. The file is
// close-on-exec so that the job (which may outlive cronlock) never holds it.
//
// It is created and locked under a temporary name and then renamed into place, so that a
// "*.lock" file is never seen unlocked while its run is alive (sweep would take it for
// debris).
func (s *Store) lockRun(id string) (*os.File, error) {
	return lockRunFile(s.runsDir, id, nil)
}

// lockRunFile is lockRun in the folder runsDir, with content (Claim's start facts, or
// nothing) written before the file takes its name.
func lockRunFile(runsDir, id string, content []byte) (*os.File, error) {
	if err := os.MkdirAll(runsDir, 0o700); err != nil {
		return nil, fmt.Errorf("history: create %s: %w; fix its permissions or set CRONLOCK_HISTORY (or --history) to a writable place", runsDir, unwrapPath(err))
	}
	name := filepath.Join(runsDir, id+".lock")
	tmp := filepath.Join(runsDir, "."+id+".tmp")
	fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("history: create run lock %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("history: lock %s: %w", tmp, err)
	}
	if len(content) > 0 {
		if _, err := f.Write(content); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("history: write run lock %s: %w", tmp, err)
		}
	}
	if err := os.Rename(tmp, name); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("history: create run lock %s: %w", name, unwrapPath(err))
	}
	return f, nil
}

// unlockRun removes a per-run file while still holding its lock, then drops the lock.
func unlockRun(f *os.File) {
	os.Remove(f.Name())
	f.Close()
}

// tryLock opens name and tries to take its lock. It returns (nil, false, nil) when the
// file is missing, (nil, true, nil) when a live process holds it, and the locked file
// when its owner is gone.
func tryLock(name string) (*os.File, bool, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ENOENT) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("history: open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("history: lock %s: %w", name, err)
	}
	return f, false, nil
}

// Reap marks as abandoned every running row of this machine whose per-run lock is free or
// missing: its cronlock died without finishing the row. A row is this machine's, whatever
// --node label its run used, when its node is node, when it was written in this boot (its
// boot id), or when its per-run file is beside this history (a history lives on a local
// disk: NFS is refused). With node empty every running row is. Only a row that names
// another node, another boot (or none) and has no per-run file here is left alone: it
// came from another machine's file, which only that machine can judge. Reap removes the
// stale lock files, also those left without a running row by a crash at the wrong moment,
// and returns how many rows it marked. Rows of live runs, and of runs this Store started,
// are left alone. On a read-only Store (OpenRead) it writes and removes nothing: it notes
// the dead runs, which List and Get then show as abandoned.
func (s *Store) Reap(node string) (int, error) {
	// The partial index runs_running holds exactly the running rows, however many
	// finished ones the file has.
	bootCol := "boot_id"
	if s.version < 2 {
		bootCol = "x''" // a read-only file of schema v1 (Open migrates the others)
	}
	rows, err := s.db.Query(`SELECT id, node, ` + bootCol + ` FROM runs WHERE status = 'running'`)
	if err != nil {
		return 0, describe(s.path, fmt.Errorf("find running runs: %w", err))
	}
	type running struct {
		id, node string
		boot     []byte
	}
	var found []running
	for rows.Next() {
		var r running
		if err := rows.Scan(&r.id, &r.node, &r.boot); err != nil {
			rows.Close()
			return 0, describe(s.path, err)
		}
		found = append(found, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, describe(s.path, err)
	}

	this := procfs.BootID()
	marked := 0
	for _, r := range found {
		if s.holds(r.id) {
			continue
		}
		sameBoot := len(r.boot) == 16 && this != nil && bytes.Equal(r.boot, this)
		// A run of an earlier boot is dead even if its lock file cannot tell (a folder
		// restored from a backup, say).
		otherBoot := len(r.boot) == 16 && this != nil && !bytes.Equal(r.boot, this)
		name := filepath.Join(s.runsDir, r.id+".lock")
		f, alive, err := tryLock(name)
		if err != nil {
			if s.readOnly {
				continue // a reader that may not open the file cannot tell: left running
			}
			return marked, err
		}
		mine := node == "" || r.node == node || sameBoot || f != nil || alive
		if !mine || (alive && !otherBoot) {
			continue
		}
		if s.readOnly {
			s.abandoned[r.id] = true
			marked++
			if f != nil {
				f.Close()
			}
			continue
		}
		// Conditional on still running: a run that finished after our SELECT removed its
		// file only after committing its real status, which this leaves alone.
		res, err := s.db.Exec(`UPDATE runs SET status = 'abandoned',
			error = CASE WHEN error = '' THEN ? ELSE error END
			WHERE id = ? AND status = 'running'`, abandonedError, r.id)
		if err != nil {
			if f != nil {
				f.Close()
			}
			return marked, describe(s.path, fmt.Errorf("mark run %s abandoned: %w", r.id, err))
		}
		if n, _ := res.RowsAffected(); n > 0 {
			marked++
		}
		if f != nil {
			unlockRun(f)
		}
	}
	if s.readOnly {
		return marked, nil
	}
	n, err := s.sweep()
	return marked + n, err
}

// sweep removes per-run files that are not locked and whose row is not running: debris of
// a crash between taking the lock and writing the row, or between finishing the row and
// removing the file. A file without a row that holds its run's start facts (Claim) is a run
// that died before its row was written: it is recorded abandoned first. recorded counts
// those.
func (s *Store) sweep() (recorded int, err error) {
	entries, err := os.ReadDir(s.runsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("history: read %s: %w", s.runsDir, err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			// A crash between creating and renaming; young ones may be a Start at work.
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				os.Remove(filepath.Join(s.runsDir, e.Name()))
			}
			continue
		}
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || s.holds(id) {
			continue
		}
		f, alive, err := tryLock(filepath.Join(s.runsDir, e.Name()))
		if err != nil || alive || f == nil {
			continue
		}
		var running bool
		err = s.db.QueryRow(`SELECT status = 'running' FROM runs WHERE id = ?`, id).Scan(&running)
		if err == nil && running {
			f.Close() // a run that started, and died, after Reap looked: the next Reap marks it
			continue
		}
		if errors.Is(err, sql.ErrNoRows) {
			// A run that died before its row was written: its file says what it was.
			if r, ok := readClaim(f); ok && r.ID == id {
				if err := s.recordAbandoned(r); err != nil {
					f.Close()
					return recorded, err
				}
				recorded++
			}
		}
		unlockRun(f)
	}
	return recorded, nil
}

// recordAbandoned writes the row of a run known only from its per-run file.
func (s *Store) recordAbandoned(r Run) error {
	r.Status, r.Error, r.FinishedAt = runstatus.Abandoned, abandonedError, time.Time{}
	return s.upsert(&r)
}

func (s *Store) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.locks[id]
	return ok
}
