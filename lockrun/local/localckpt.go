package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cronlock/lockrun"
)

var (
	_ lockrun.CheckpointLease = (*localLease)(nil)
	_ lockrun.CheckpointStore = (*Locker)(nil)
)

// A key's checkpoints are two files beside its lock file: <name>.ckpt, the newest, and
// <name>.ckpt-ok, the newest of a succeeded run. Each is written whole to a temporary file,
// 0600, and renamed over the old one, so a reader (or a crash) never sees half of one; a
// save is written under the held flock, after checking that the lock file is still the
// one locked.

// localCkpt is a checkpoint file: the record and its value.
type localCkpt struct {
	lockrun.Checkpoint
	V []byte `json:"value"`
}

func ckptPaths(lockPath string) (last, ok string) {
	base := strings.TrimSuffix(lockPath, ".lock")
	return base + ".ckpt", base + ".ckpt-ok"
}

// SaveCheckpoint writes c as the key's newest checkpoint while the lock is held.
func (ls *localLease) SaveCheckpoint(ctx context.Context, c *lockrun.Checkpoint) error {
	if len(c.Value) > lockrun.MaxCheckpoint {
		return fmt.Errorf("save checkpoint: %d bytes, more than the %d allowed", len(c.Value), lockrun.MaxCheckpoint)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.stillOurs(); err != nil {
		return err
	}
	c.Token = ls.token
	c.Saved = time.Now().UTC()
	last, _ := ckptPaths(ls.path)
	return writeCkpt(last, &localCkpt{Checkpoint: *c, V: c.Value})
}

// stillOurs returns an error wrapping ErrLockLost when the lease was released or the
// lock file was deleted or replaced. Call with mu held.
func (ls *localLease) stillOurs() error {
	if ls.fd < 0 {
		return fmt.Errorf("%s: lease already released: %w", ls.path, lockrun.ErrLockLost)
	}
	same, err := samePathFile(ls.fd, ls.path)
	if err != nil {
		return fmt.Errorf("check lock file %s: %w", ls.path, err)
	}
	if !same {
		return fmt.Errorf("lock file %s was deleted or replaced: %w", ls.path, lockrun.ErrLockLost)
	}
	return nil
}

// MarkCheckpointSucceeded copies the newest checkpoint, when it is of scope, to the
// succeeded run's file.
func (ls *localLease) MarkCheckpointSucceeded(ctx context.Context, scope string) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.stillOurs(); err != nil {
		return err
	}
	last, ok := ckptPaths(ls.path)
	c, err := readCkpt(last)
	if err != nil || c == nil || c.Scope != scope {
		return err
	}
	return writeCkpt(ok, &localCkpt{Checkpoint: *c, V: c.Value})
}

// LoadCheckpoint reads the newest checkpoint of scope, or of a succeeded run.
func (ls *localLease) LoadCheckpoint(ctx context.Context, scope string, lastSuccess bool) (*lockrun.Checkpoint, error) {
	last, ok := ckptPaths(ls.path)
	if lastSuccess {
		return readCkpt(ok)
	}
	c, err := readCkpt(last)
	if err != nil || c == nil || c.Scope != scope {
		return nil, err
	}
	return c, nil
}

// Checkpoints returns key's newest checkpoint and the newest of a succeeded run.
func (l *Locker) Checkpoints(ctx context.Context, key string) (last, success *lockrun.Checkpoint, err error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, nil, err
	}
	lp, op := ckptPaths(l.LockPath(key))
	if last, err = readCkpt(lp); err != nil {
		return nil, nil, err
	}
	if success, err = readCkpt(op); err != nil {
		return nil, nil, err
	}
	return last, success, nil
}

// ResetCheckpoints deletes key's checkpoint files; unless force, not while it is locked.
func (l *Locker) ResetCheckpoints(ctx context.Context, key string, force bool) (int, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return 0, err
	}
	if err := lockrun.RefuseWhileHeld(ctx, l, key, force); err != nil {
		return 0, err
	}
	n := 0
	lp, op := ckptPaths(l.LockPath(key))
	for _, p := range []string{lp, op} {
		switch err := os.Remove(p); {
		case err == nil:
			n++
		case !errors.Is(err, os.ErrNotExist):
			return n, fmt.Errorf("remove checkpoint %s: %w", p, err)
		}
	}
	return n, nil
}

// readCkpt reads a checkpoint file; nil, nil when there is none.
func readCkpt(path string) (*lockrun.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	var f localCkpt
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("checkpoint %s is unreadable (%v); remove it with cronlock checkpoint reset", path, err)
	}
	c := f.Checkpoint
	c.Value = f.V
	if c.Value == nil {
		c.Value = []byte{}
	}
	return &c, nil
}

// writeCkpt replaces path with f, atomically: a temporary file, synced, renamed.
func writeCkpt(path string, f *localCkpt) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ckpt-*")
	if err != nil {
		return fmt.Errorf("save checkpoint beside %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", path, err)
	}
	return nil
}
