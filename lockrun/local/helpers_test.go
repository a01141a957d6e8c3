package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// Helpers that more than one test file of this package uses.

func newTestLocker(t *testing.T) *Locker {
	t.Helper()
	l, err := New(filepath.Join(t.TempDir(), "locks"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func localReq(key, run string) lockrun.Request {
	return lockrun.Request{Key: key, Node: "node-" + run, PID: os.Getpid(), RunID: run}
}

func mustAcquire(t *testing.T, l *Locker, req lockrun.Request) lockrun.Lease {
	t.Helper()
	lease, err := l.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", req.Key, err)
	}
	t.Cleanup(func() { lease.Release(context.Background()) })
	return lease
}

func wantHeld(t *testing.T, err error) *lockrun.HeldError {
	t.Helper()
	var he *lockrun.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("got error %v, want *HeldError", err)
	}
	return he
}

// readTestRecord returns the record in key's lock file.
func readTestRecord(t *testing.T, l *Locker, key string) *localRecord {
	t.Helper()
	fd, err := unix.Open(l.LockPath(key), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r := readLocalRecord(fd)
	if r == nil {
		t.Fatal("no record")
	}
	return r
}
