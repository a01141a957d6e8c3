package lockrun

import (
	"context"
)

// TokenBackend names the backend that issued l's fencing tokens, for the job's
// CRONLOCK_TOKEN_BACKEND: "redis", "local" or "etcd". Tokens of different backends are
// not comparable (etcd revisions are far below Redis's microsecond tokens), so a job that
// stores the last token it saw must start over when this name changes. "" when unknown.
func TokenBackend(l Locker) string {
	switch l.(type) {
	case *RedisLocker:
		return "redis"
	case *LocalLocker:
		return "local"
	}
	if n, ok := l.(interface{ TokenBackend() string }); ok {
		return n.TokenBackend()
	}
	return ""
}

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

var _ FleetStore = (*RedisLocker)(nil)
