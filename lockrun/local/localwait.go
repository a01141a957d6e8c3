package local

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// inotifyWaiter wakes a waiting Acquire when a lock file is closed by a writer (every
// holder opens it read-write, so its release or death is an IN_CLOSE_WRITE), deleted, or
// renamed. A nil *inotifyWaiter just sleeps.
type inotifyWaiter struct {
	fd int
}

func newInotifyWaiter() *inotifyWaiter {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	return &inotifyWaiter{fd: fd}
}

// close frees the inotify instance in the background: closing one waits for an RCU
// grace period, which would otherwise delay the hand-off.
func (w *inotifyWaiter) close() {
	if w != nil {
		go unix.Close(w.fd)
	}
}

// watch adds path's current file to the watched set. A failure only costs promptness.
func (w *inotifyWaiter) watch(path string) {
	if w == nil {
		return
	}
	unix.InotifyAddWatch(w.fd, path, unix.IN_CLOSE_WRITE|unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_DONT_FOLLOW)
}

// wait returns after an event, after d, or with ctx.Err() when ctx ends.
func (w *inotifyWaiter) wait(ctx context.Context, d time.Duration) error {
	if w == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Poll blocks this goroutine's thread for at most d (localWaitPoll, 25ms), which
	// also bounds how late a cancelled ctx is noticed.
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, ms); err != nil && !errors.Is(err, unix.EINTR) {
		time.Sleep(d)
	}
	// Drain the events: which file or why does not matter, the caller just tries again.
	var buf [4096]byte
	for {
		if n, err := unix.Read(w.fd, buf[:]); n <= 0 || err != nil {
			break
		}
	}
	return ctx.Err()
}
