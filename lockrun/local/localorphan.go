package local

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
	"cronlock/procfs"
)

// A lock file deleted under its holder (rm, rm -rf of the lock folder, a cleaner) keeps
// the holder's flock on a file nobody else can open any more, and the next run would
// create a new file at the path and lock that: two runs at once. Two things close that
// hole. A run that locks a new file looks for a live holder of a deleted file that was
// at the same path, and counts the lock as held by it (deletedHolder). The holder puts a
// file back at the path at its next renewal and moves its lock there (retake), so the
// lock and its record are whole again without stopping the job.

// deletedHolder returns a descriptor open on the deleted lock file that was at path while
// a live process still holds its flock, or -1. fd is the file just locked at path: only a
// new one (empty, since every holder writes its record at once) is looked into, so the
// search costs nothing while the file exists. It sees the processes of this user (all of
// them as root): /proc/PID/fd of another user's process cannot be read.
func deletedHolder(fd int, path string) int {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Size != 0 {
		return -1
	}
	locks, err := procfs.Flocks(st.Dev)
	if err != nil || len(locks) == 0 {
		return -1
	}
	// /proc names a file by its real path, without the symbolic links on the way to it.
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		path = filepath.Join(dir, filepath.Base(path))
	}
	for _, l := range locks {
		if l.Ino == st.Ino {
			continue // the new file itself
		}
		if dfd := procfs.OpenDeleted(l.PID, path, l.Ino); dfd >= 0 {
			return dfd
		}
	}
	return -1
}

// retakeTries bounds how long retake waits for a new file at the path whose flock
// another run holds for a moment, while it looks for this holder (deletedHolder).
const retakeTries = 50

// retake puts the lease's lock back at its path after its file was deleted or replaced:
// it locks the file now at the path (creating it, and the folder, when missing), writes
// the lease's record there and lets the deleted file go. It fails when another run holds
// the new file for good (one that does not look for deleted holders). Called with ls.mu
// held.
func (ls *localLease) retake() error {
	l, err := New(filepath.Dir(ls.path))
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		fd, err := l.openLockFile(ls.path, true)
		if err != nil {
			return err
		}
		got, err := tryFlock(fd)
		if err == nil && got {
			var same bool
			if same, err = samePathFile(fd, ls.path); err == nil && same {
				if err = writeLocalRecord(fd, ls.rec); err == nil {
					unix.Close(ls.fd) // the deleted file, and its flock
					ls.fd = fd
					return nil
				}
			}
		}
		unix.Close(fd)
		switch {
		case err != nil:
			return err
		case try == retakeTries:
			return errors.New("another run holds the new file at that path")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// retakeError says why a deleted lock file could not be put back.
func retakeError(path string, err error) error {
	return fmt.Errorf("lock file %s was deleted or replaced while held, and could not be put back (%v): %w", path, err, lockrun.ErrLockLost)
}
