package lockrun

import (
	"context"
	"errors"
	"time"
)

// FleetStore is a backend that keeps the fleet's record and tick record readable from
// any host: Redis, etcd. The local backend has only this machine's history instead.
type FleetStore interface {
	Locker
	// Fleet returns key's newest runs, newest first, at most limit (0 = all kept),
	// marked with MarkDuplicates, with the lock's holder as running and a tick claimer
	// whose lock is gone without an entry as abandoned.
	Fleet(ctx context.Context, key string, limit int) ([]FleetEntry, error)
	// FleetAll is Fleet for several keys, by key.
	FleetAll(ctx context.Context, keys []string, limit int) (map[string][]FleetEntry, error)
	// FleetKeys returns the keys that have a record, sorted.
	FleetKeys(ctx context.Context) ([]string, error)
	// TickRecord returns key's last claimed tick; nil, nil when none was ever claimed.
	TickRecord(ctx context.Context, key string) (*TickRecord, error)
	// RecordRun adds the entry of a run that never held the lock (missed, error).
	RecordRun(ctx context.Context, key string, rec *RunRecord) error
}

// Expiring is a backend whose locks free themselves when their lease ends (Redis, etcd).
type Expiring interface {
	// FreedBy says, for a message about a release that failed, what frees the lock
	// anyway: " (the Redis key expires by itself within --ttl 1m0s)".
	FreedBy(ttl time.Duration) string
}

// Refusal is implemented by the errors with which a backend refuses to take a lock
// although it could be asked (a clock skew, an evicting server, a fencing counter that
// cannot rise): the server is up, and the fleet's record should show the run.
type Refusal interface {
	error
	Refusal()
}

// IsRefusal reports whether err is, or wraps, a Refusal.
func IsRefusal(err error) bool {
	var r Refusal
	return errors.As(err, &r)
}
