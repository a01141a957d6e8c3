package lockrun

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// relayBufSize is the read size of the output relay. Large reads on raw descriptors keep the
// relay close to `cat` (a 32 KiB io.Copy costs about a third more CPU per byte).
const relayBufSize = 256 << 10

// finalDrainLimit bounds what the relay still reads once the job is gone: enough for every
// pipe buffer the job could have filled, but finite even if a process outside the job keeps
// writing into the pipe.
const finalDrainLimit = 16 << 20

// tail keeps the last len(buf) bytes written to it, in order. Its memory is fixed when it
// is made, whatever the amount of output. It is safe for concurrent use (stdout and stderr
// relays share one tail so that the combined output keeps arrival order).
type tail struct {
	mu    sync.Mutex
	buf   []byte
	start int // index of the oldest byte once the buffer has wrapped
	n     int // bytes held, ≤ len(buf)
}

func newTail(size int) *tail { return &tail{buf: make([]byte, size)} }

// Write keeps the end of p. It never fails.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	written := len(p)
	size := len(t.buf)
	if size == 0 {
		return written, nil
	}
	if len(p) >= size {
		copy(t.buf, p[len(p)-size:])
		t.start, t.n = 0, size
		return written, nil
	}
	// Append at the end of the held bytes, wrapping, then drop the oldest if over size.
	end := (t.start + t.n) % size
	c := copy(t.buf[end:], p)
	copy(t.buf, p[c:])
	t.n += len(p)
	if t.n > size {
		t.start = (t.start + t.n - size) % size
		t.n = size
	}
	return written, nil
}

// Bytes returns a copy of the held bytes, oldest first. It is never nil.
func (t *tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]byte, t.n)
	c := copy(out, t.buf[t.start:min(t.start+t.n, len(t.buf))])
	copy(out[c:], t.buf[:t.n-c])
	return out
}

// relay copies one pipe from the child to one of cronlock's own descriptors and into the
// shared tail. It ends at end-of-file, or when stop is called: the job's processes are gone
// and whatever still holds the pipe open (a process outside the job) must not hang the run.
type relay struct {
	r    *os.File // read end, non-blocking, in Go's poller so a deadline can interrupt it
	out  int      // cronlock's stdout or stderr; -1 = none
	tail *tail
	buf  []byte
	done chan struct{}
	// OutErr is the first write error on out (EPIPE, EIO…). After it the relay only keeps
	// the tail: a broken stdout never ends or fails the run.
	outErr error
}

func newRelay(r *os.File, out int, t *tail) *relay {
	if out >= 0 {
		// When cronlock's own output is a pipe (cron's mail pipe, `| logger`), a larger
		// buffer lets the relay hand over its large reads in one write instead of one
		// wake-up per 64 KiB: 1 GiB through `| cat` went from 1.05 s to 0.66 s, as fast
		// as a `cat` relay. Not a pipe (a file, a terminal): the call fails, harmlessly.
		_, _ = unix.FcntlInt(uintptr(out), unix.F_SETPIPE_SZ, pipeSize)
	}
	return &relay{r: r, out: out, tail: t, buf: make([]byte, relayBufSize), done: make(chan struct{})}
}

// run copies until end-of-file or stop, then closes the read end.
func (rl *relay) run() {
	defer close(rl.done)
	defer rl.r.Close()
	rc, err := rl.r.SyscallConn()
	if err != nil {
		return
	}
	eof := false
	// Read returns when the callback says done (EOF, error) or when the deadline set by
	// stop passes while it waits for data.
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), rl.buf)
			switch {
			case n > 0:
				rl.handle(rl.buf[:n])
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false
			default: // n == 0: EOF; or a read error, which is final too
				eof = true
				return true
			}
		}
	})
	if eof {
		return
	}
	// Stopped: take what is already in the pipe without waiting for more. Control ignores
	// the deadline that ended Read.
	_ = rc.Control(func(fd uintptr) {
		for total := 0; total < finalDrainLimit; {
			n, err := unix.Read(int(fd), rl.buf)
			if n > 0 {
				rl.handle(rl.buf[:n])
				total += n
				continue
			}
			if err == unix.EINTR {
				continue
			}
			return
		}
	})
}

// stop makes run finish after draining what the pipe already holds.
func (rl *relay) stop() {
	_ = rl.r.SetReadDeadline(time.Unix(1, 0))
}

func (rl *relay) handle(p []byte) {
	rl.tail.Write(p)
	if rl.out < 0 || rl.outErr != nil {
		return
	}
	if err := writeAll(rl.out, p); err != nil {
		rl.outErr = err
	}
}

// writeAll writes p to fd with raw write calls. Unlike os.File.Write on descriptors 1 and 2,
// EPIPE comes back as an error instead of raising SIGPIPE. A non-blocking fd is waited on
// with poll.
func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if n > 0 {
			p = p[n:]
		}
		switch {
		case err == nil:
			if n == 0 {
				return errors.New("write returned no progress")
			}
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if _, perr := unix.Poll(pfd, -1); perr != nil && perr != unix.EINTR {
				return perr
			}
		default:
			return err
		}
	}
	return nil
}

// pipeSize is the capacity asked for the output pipes. The default 64 KiB makes the relay
// wake up for every 64 KiB; a larger pipe halves the relay's overhead on chatty jobs. The
// kernel may refuse (pipe-max-size, per-user pipe limits): then the default stays.
const pipeSize = 1 << 20

func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		})
	}
}

// sameFile reports whether a and b are the same open file or pipe (device and inode), as
// with `>log 2>&1` or cron's single mail pipe. Then the child gets one pipe for both
// streams so that their order is kept.
func sameFile(a, b *os.File) bool {
	if a == nil || b == nil {
		return a == b
	}
	var sa, sb unix.Stat_t
	if unix.Fstat(int(a.Fd()), &sa) != nil || unix.Fstat(int(b.Fd()), &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
