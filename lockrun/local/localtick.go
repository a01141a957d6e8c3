package local

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// TickRecord reads the tick record of key from its lock file without taking the lock.
// It returns nil, nil when the key has no lock file or no tick was ever claimed in it.
func (l *Locker) TickRecord(key string) (*lockrun.TickRecord, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	fd, err := l.openLockFile(l.LockPath(key), false)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, err
	}
	defer unix.Close(fd)
	r := heldRecord(fd)
	if r == nil || r.Tick == nil {
		return nil, nil
	}
	t := r.Tick
	return &lockrun.TickRecord{Tick: time.UnixMicro(t.TickUS).UTC(), Expr: t.Expr, TZ: t.TZ,
		Node: t.Node, RunID: t.RunID, Skips: t.Skips, Missed: t.Missed}, nil
}

// ReadTickRecord reads the tick record of key from the lock folder dir as a reader
// only: it creates nothing and skips New's checks of who owns the folder,
// which guard taking locks, not reading a schedule. `cronlock check` runs as a monitoring
// user against root's folder. nil, nil when there is no record.
func ReadTickRecord(dir, key string) (*lockrun.TickRecord, error) {
	return (&Locker{dir: dir}).TickRecord(key)
}
