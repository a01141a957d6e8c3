package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// A key's suspension (cronlock suspend) is a file of its own beside its lock file,
// <name>.suspend, written whole to a private temporary file and renamed over it: never the
// flocked lock file, whose record a holder rewrites in place, and never half-written. Its
// --until is judged on this machine's clock; a file whose until has passed is a lifted
// suspension, left for the next suspend to replace.

var (
	_ lockrun.Suspender        = (*Locker)(nil)
	_ lockrun.SuspensionLister = (*Locker)(nil)
)

// suspendPath is key's suspension file.
func (l *Locker) suspendPath(key string) string {
	return strings.TrimSuffix(l.LockPath(key), ".lock") + ".suspend"
}

// Suspend pauses key for every run that uses this lock folder.
func (l *Locker) Suspend(ctx context.Context, key string, s *lockrun.Suspension) error {
	if err := lockrun.ValidKey(key); err != nil {
		return err
	}
	path := l.suspendPath(key)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".suspend-*") // 0600
	if err != nil {
		return fmt.Errorf("suspend %s: %w; check --lock-dir or CRONLOCK_LOCK_DIR", key, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	_, err = tmp.Write(lockrun.EncodeSuspension(s))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("suspend %s (%s): %w", key, path, err)
	}
	return nil
}

// Resume removes key's suspension and returns it, or *lockrun.NotSuspendedError.
func (l *Locker) Resume(ctx context.Context, key string) (*lockrun.Suspension, error) {
	s, err := l.ReadSuspension(ctx, key)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, &lockrun.NotSuspendedError{Key: key, Backend: l.Describe()}
	}
	if err := os.Remove(l.suspendPath(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("resume %s: %w", key, err)
	}
	return s, nil
}

// ReadSuspension returns key's suspension in force, nil when there is none: one open
// that fails with ENOENT when the key is not suspended.
func (l *Locker) ReadSuspension(ctx context.Context, key string) (*lockrun.Suspension, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	return readSuspension(key, l.suspendPath(key))
}

// ReadSuspension is key's suspension in force in the lock folder dir (nil = none), read
// without creating or checking the folder: for a reader (check) that may not own it.
func ReadSuspension(dir, key string) (*lockrun.Suspension, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	l := &Locker{dir: dir}
	return readSuspension(key, l.suspendPath(key))
}

// AllSuspensions lists the suspension files of the folder, by key. A hashed name (a
// long key) is known by the record of its lock file; one without a lock file cronlock
// can read, and a suspension file this user may not read (another user's, in a shared
// folder), is passed over, as List passes over such lock files.
func (l *Locker) AllSuspensions(ctx context.Context) (map[string]*lockrun.Suspension, error) {
	entries, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lock folder %s: %w; check --lock-dir or CRONLOCK_LOCK_DIR", l.dir, err)
	}
	out := map[string]*lockrun.Suspension{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".suspend") {
			continue
		}
		key, ok := l.keyOfFile(strings.TrimSuffix(name, ".suspend") + ".lock")
		if !ok {
			continue
		}
		s, err := readSuspension(key, filepath.Join(l.dir, name))
		if errors.Is(err, unix.EACCES) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if s != nil {
			out[key] = s
		}
	}
	return out, nil
}

func readSuspension(key, path string) (*lockrun.Suspension, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the suspension of %s (%s): %w; remove the file to resume", key, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("read the suspension of %s (%s): %w", key, path, err)
	}
	s := lockrun.DecodeSuspension(b)
	if s.Lifted(time.Now()) {
		return nil, nil
	}
	return s, nil
}

// suspended is the error of an Acquire of a suspended key; nil when it is not.
func (l *Locker) suspended(ctx context.Context, key string) error {
	s, err := l.ReadSuspension(ctx, key)
	if err != nil || s == nil {
		return err
	}
	return &lockrun.SuspendedError{Key: key, Suspension: s}
}
