package metrics

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/keyname"
)

// Facts are what a finished run tells its metrics file.
type Facts struct {
	Key, Node string
	Status    string    // the history status: succeeded, failed, skipped…
	ExitCode  int       // cronlock's own exit code, the one cron saw
	Started   time.Time // when cronlock started the run
	Finished  time.Time // when its outcome was known; zero means now
}

// lockWait bounds the wait for another cronlock of the same key writing the file: it
// holds the lock for a read, a write and an fsync, so seconds mean a stuck disk.
const lockWait = 10 * time.Second

// Write rewrites dir/cronlock_<key>.prom for run f. The previous file is read back and
// replaced under a flock on a sibling ".prom.lock" file, so that two runs of one key on
// one host never lose an increment; the new file is written beside it, fsynced and
// renamed over it, so a reader sees the old file or the new one, never a part.
// dir must exist: Write does not create node_exporter's folder, whose permissions are
// the admin's choice (see fileMode).
func Write(dir string, f Facts) error {
	mode, err := fileMode(dir)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, fileName(f.Key))
	unlock, err := lockFile(path+".lock", mode, lockWait)
	if err != nil {
		return err
	}
	defer unlock()

	prev, err := readPrevious(path, f.Key, f.Node)
	if err != nil {
		return err
	}
	data, err := encode(f, prev)
	if err != nil {
		return err
	}
	return replaceFile(path, mode, data)
}

// fileMode is the mode of the files Write creates in dir. cronlock's files are private
// to their owner (0600), but node_exporter usually runs as another user: when dir itself
// grants its group read and search (e.g. root:node_exporter 2750), the admin has opted
// that group in, and the file gets group read (0640). Never world-readable.
func fileMode(dir string) (os.FileMode, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, fmt.Errorf("metrics folder: %w", err)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("metrics folder %s is not a folder", dir)
	}
	if fi.Mode().Perm()&0o050 == 0o050 {
		return 0o640, nil
	}
	return 0o600, nil
}

// fileNames names metrics files: cronlock_<key>.prom with every byte of key outside
// A-Z a-z 0-9 _ . - written as %XX (as lock files are), so "/" cannot make a sub-folder
// and ":" no odd name. A key too long for a file name once encoded (over 200 bytes)
// keeps its first encoded bytes, then "=" and 32 hex digits of its SHA-256, in 200 bytes
// at most; that leaves room for the ".lock" and ".tmp" siblings within the usual 255-byte
// NAME_MAX. These names must never change: a new cronlock must carry over the counters
// of the file an older one wrote.
var fileNames = keyname.Scheme{Prefix: "cronlock_", Suffix: ".prom", Plain: "_.-",
	MaxLen: 200, HashedCut: 200 - keyname.HashLen}

// fileName is the name of key's metrics file (see fileNames).
func fileName(key string) string { return fileNames.Encode(key) }

// lockFile takes an exclusive flock on the lock file at path (created with mode, never
// removed: removing a lock file lets two holders in). unlock releases it.
func lockFile(path string, mode os.FileMode, wait time.Duration) (unlock func(), err error) {
	// Read-only is enough for flock, and lets a group that may read the folder share it.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EWOULDBLOCK || time.Now().After(deadline) {
			unix.Close(fd)
			if err == unix.EWOULDBLOCK {
				return nil, fmt.Errorf("%s stayed locked for %v by another cronlock of this key", path, wait)
			}
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		time.Sleep(pause)
	}
}

// maxFileSize bounds what readPrevious reads: cronlock's files are a few KB, so a bigger
// one is not one of them.
const maxFileSize = 1 << 20

// readPrevious reads the counters and the last success of key on node from the metrics
// file at path. A missing file is a first run. A file that does not parse (a disk that
// lost it, a hand edit) is replaced: the counters restart at 0, which Prometheus's rate()
// and increase() take for a reset. A file that cannot be read at all is an error, so that
// its counters are not thrown away by a run that lacks the rights to see them.
func readPrevious(path, key, node string) (previous, error) {
	prev := previous{runs: map[string]float64{}}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return prev, nil
	}
	if err != nil {
		return prev, fmt.Errorf("read %s: %w", path, err)
	}
	file := os.NewFile(uintptr(fd), path)
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxFileSize+1))
	if err != nil {
		return prev, fmt.Errorf("read %s: %w", path, err)
	}
	samples, err := parse(string(data))
	if err != nil || len(data) > maxFileSize {
		return prev, nil
	}
	return carryOver(samples, key, node), nil
}

// replaceFile writes data to path atomically: a temporary sibling (not ending in .prom, so
// node_exporter ignores it), fsynced, given mode, then renamed over path. The caller holds
// the key's lock, so the temporary name is fixed: a crash leaves at most one, which the
// next run replaces. The folder is not fsynced: a power cut that loses the rename leaves
// the previous file, behind by one run, which is harmless for these metrics.
func replaceFile(path string, mode os.FileMode, data []byte) error {
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	// O_EXCL: a symbolic link planted at tmp is not followed.
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	file := os.NewFile(uintptr(fd), tmp)
	err = writeSyncChmod(file, mode, data)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeSyncChmod writes data, sets mode (Chmod on the open file: the umask does not
// apply, and the mode is right before the file gets its public name) and fsyncs.
func writeSyncChmod(file *os.File, mode os.FileMode, data []byte) error {
	if _, err := file.Write(data); err != nil {
		return err
	}
	if err := file.Chmod(mode); err != nil {
		return err
	}
	return file.Sync()
}
