package lockrun

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// TickRecord is the last tick claimed for a key (--schedule), as a reader such as
// `cronlock check` sees it.
type TickRecord struct {
	Tick   time.Time // the claimed tick, UTC
	Expr   string    // the --schedule expression of the run that claimed it
	TZ     string    // its zone
	Node   string
	RunID  string
	Skips  int
	Missed bool
}

// TickRecord reads the tick record of key from its lock file without taking the lock.
// It returns nil, nil when the key has no lock file or no tick was ever claimed in it.
func (l *LocalLocker) TickRecord(key string) (*TickRecord, error) {
	if err := ValidKey(key); err != nil {
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
	return &TickRecord{Tick: time.UnixMicro(t.TickUS).UTC(), Expr: t.Expr, TZ: t.TZ,
		Node: t.Node, RunID: t.RunID, Skips: t.Skips, Missed: t.Missed}, nil
}
