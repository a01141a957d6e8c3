package local

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// TestLocalDeletedFileStaysHeld: a lock file deleted under its holder (rm of the file, or
// rm -rf of the whole folder) does not let a second run take the key: the newcomer sees
// the holder of the deleted file, and the holder's next renewal puts its file back.
func TestLocalDeletedFileStaysHeld(t *testing.T) {
	for _, rm := range []struct {
		name string
		do   func(l *Locker, key string) error
	}{
		{"the file", func(l *Locker, key string) error { return os.Remove(l.LockPath(key)) }},
		{"the folder", func(l *Locker, key string) error { return os.RemoveAll(l.Dir()) }},
	} {
		t.Run(rm.name, func(t *testing.T) {
			ctx := context.Background()
			l := newTestLocker(t)
			holder := mustAcquire(t, l, localReq("d", "run-1"))
			if err := rm.do(l, "d"); err != nil {
				t.Fatal(err)
			}
			// A newcomer (a new cronlock: the folder made again).
			l2, err := New(l.Dir())
			if err != nil {
				t.Fatal(err)
			}
			_, err = l2.Acquire(ctx, localReq("d", "run-2"))
			if he := wantHeld(t, err); he.Holder == nil || he.Holder.RunID != "run-1" {
				t.Fatalf("after rm, the newcomer sees holder %+v, want run-1", he.Holder)
			}
			if err := holder.Renew(ctx); err != nil {
				t.Fatalf("the holder's renewal after rm: %v, want its file put back", err)
			}
			if h, err := l2.Inspect(ctx, "d"); err != nil || h == nil || h.RunID != "run-1" {
				t.Fatalf("the file put back names %+v (%v), want run-1", h, err)
			}
			_, err = l2.Acquire(ctx, localReq("d", "run-3"))
			wantHeld(t, err)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			mustAcquire(t, l2, localReq("d", "run-4"))
		})
	}
}

// TestLocalDeletedFileWait: a --wait on a key whose holder's file was deleted takes the
// lock once that holder lets go, and not before.
func TestLocalDeletedFileWait(t *testing.T) {
	ctx := context.Background()
	l := newTestLocker(t)
	holder := mustAcquire(t, l, localReq("w", "run-1"))
	if err := os.Remove(l.LockPath("w")); err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool // the kernel's flock orders it, which the race detector cannot see
	go func() {
		time.Sleep(300 * time.Millisecond)
		released.Store(true)
		holder.Release(ctx)
	}()
	req := localReq("w", "run-2")
	req.Wait = time.Minute
	lease, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	defer lease.Release(ctx)
	if !released.Load() {
		t.Fatal("the waiter took the lock while the holder of the deleted file still held it")
	}
}

// TestLocalDeletedFileTakenByAnother: when another run holds the new file for good (one
// that does not look for the holder of the deleted file, as an older cronlock), the
// holder's renewal reports the lock lost.
func TestLocalDeletedFileTakenByAnother(t *testing.T) {
	ctx := context.Background()
	l := newTestLocker(t)
	holder := mustAcquire(t, l, localReq("o", "run-1"))
	path := l.LockPath("o")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	unix.Pwrite(fd, []byte("an older cronlock's record\n"), 0)
	if err := holder.Renew(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Renew with the new file held by another run: %v, want ErrLockLost", err)
	}
}

// BenchmarkDeletedHolderNone: what the first run of a key (a new, empty lock file) pays to
// look for the holder of a deleted one, when there is none: it reads /proc/locks and the
// descriptors of the processes holding a flock on the same file system.
func BenchmarkDeletedHolderNone(b *testing.B) {
	path := b.TempDir() + "/k.lock"
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if deletedHolder(fd, path) >= 0 {
			b.Fatal("found a holder of a deleted file")
		}
	}
}
