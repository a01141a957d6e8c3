package lockrun

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// TickRecord is the last tick claimed for a key (--schedule), as a reader such as
// `cronlock check` sees it, from the local lock file or the Redis tick record.
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

// TickRecord reads the tick record of key from Redis, or nil, nil when no tick was ever
// claimed (or the record cannot be read as one).
func (l *RedisLocker) TickRecord(ctx context.Context, key string) (*TickRecord, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var get *redis.StringCmd
	_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		get = p.Get(octx, l.tickKey(key))
		return nil
	})
	if err == nil || errors.Is(err, redis.Nil) {
		err = get.Err()
	}
	v := get.Val()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, l.userError("read the tick record of "+key, err)
	}
	var tr tickRecord
	if json.Unmarshal([]byte(v), &tr) != nil {
		return nil, nil
	}
	us, _ := strconv.ParseInt(tr.TickUS, 10, 64)
	return &TickRecord{Tick: time.UnixMicro(us).UTC(), Expr: tr.Expr, TZ: tr.TZ,
		Node: tr.Node, RunID: tr.RunID, Skips: tr.Skips, Missed: tr.Missed}, nil
}

// ReadLocalTickRecord reads the tick record of key from the lock folder dir as a reader
// only: it creates nothing and skips NewLocalLocker's checks of who owns the folder,
// which guard taking locks, not reading a schedule. `cronlock check` runs as a monitoring
// user against root's folder. nil, nil when there is no record.
func ReadLocalTickRecord(dir, key string) (*TickRecord, error) {
	return (&LocalLocker{dir: dir}).TickRecord(key)
}
