package redis

import (
	"context"
	"testing"
	"time"

	"cronlock/lockrun"
)

// Helpers that more than one test file of this package uses.

// newRedisTestLocker returns a locker on addr with a unique prefix, closed at the end.
func newRedisTestLocker(t *testing.T, addr string, edit ...func(*Options)) *Locker {
	t.Helper()
	o := Options{URL: "redis://" + addr + "/0", Prefix: redisPrefix(t), Timeout: time.Second}
	for _, e := range edit {
		e(&o)
	}
	l, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func redisTestReq(key string) lockrun.Request {
	return lockrun.Request{Key: key, TTL: 30 * time.Second, Node: "host-a", PID: 4242, RunID: "run-a"}
}

func redisMustAcquire(t *testing.T, l *Locker, req lockrun.Request) lockrun.Lease {
	t.Helper()
	lease, err := l.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", req.Key, err)
	}
	return lease
}
