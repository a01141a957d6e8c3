package child

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// relayBufSize is the read size of the output relay. Large reads on raw descriptors keep the
// relay close to `cat`; small io.Copy reads cost more CPU per byte.
const relayBufSize = 256 << 10

// relayFirstBufSize is where the relay's buffer starts: most jobs print little, and a
// quarter megabyte per stream is fresh memory to map for every run. A read that fills the
// buffer grows it to relayBufSize.
const relayFirstBufSize = 16 << 10

// finalDrainLimit bounds what the relay still reads once the job is gone: enough for every
// pipe buffer the job could have filled, but finite even if a process outside the job keeps
// writing into the pipe.
const finalDrainLimit = 16 << 20

// Stream names which of the child's outputs a part of the tail came from. The values are
// those of the history's streams (1 stdout, 2 stderr), so a conversion keeps them.
type Stream uint8

// The child's two output streams.
const (
	StreamStdout Stream = 1
	StreamStderr Stream = 2
)

// Segment is a run of Len bytes of Result.Output that came from one stream.
type Segment struct {
	Stream Stream
	Len    int
}

// segmentBytes is the average run length, in bytes, that a marked tail of n bytes can hold
// in full: it keeps up to n/segmentBytes runs (at least min(n, minSegments)), 8 bytes each,
// so the marks cost a quarter of the tail's own memory (16 KiB for the default 64 KiB); a
// tail under 2 KiB keeps up to 64 runs, or one per byte.
const (
	segmentBytes = 32
	minSegments  = 64
)

// tail keeps the last len(buf) bytes written to it, in order. Its memory is fixed when it
// is made, whatever the amount of output. It is safe for concurrent use (stdout and stderr
// relays share one tail so that the combined output keeps arrival order).
//
// A marked tail also remembers which stream each held byte came from, as a ring of runs
// (stream, length) beside the byte ring: a write of the same stream as the newest run
// extends it, so consecutive runs always differ; bytes falling off the front shorten or drop
// the oldest runs. The run ring is bounded too (see segmentBytes): when a write would need
// one run more than it holds — output that switches stream every few bytes — the oldest run
// is dropped together with its bytes, so the tail then holds fewer than len(buf) bytes but
// never a byte without its mark. Every write costs O(1) besides copying its bytes (each
// run is added once and dropped once).
type tail struct {
	mu    sync.Mutex
	buf   []byte
	start int // index of the oldest byte once the buffer has wrapped
	n     int // bytes held, ≤ len(buf)

	runs   []run // ring of runs, oldest at runs[rs]; nil for an unmarked tail
	rs, rn int   // index of the oldest run, number of runs held; their lengths sum to n
}

// run is the ring's form of a Segment, in 8 bytes: newTail leaves a tail of 4 GiB or more
// unmarked, so a length fits in 32 bits.
type run struct {
	n      uint32
	stream Stream
}

// newTail makes a tail of size bytes; marked = remember the stream of every byte.
func newTail(size int, marked bool) *tail {
	t := &tail{buf: make([]byte, size)}
	if marked && size > 0 && size <= math.MaxUint32 {
		t.runs = make([]run, max(size/segmentBytes, min(size, minSegments)))
	}
	return t
}

// write keeps the end of p, from stream s (ignored by an unmarked tail).
func (t *tail) write(s Stream, p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	size := len(t.buf)
	if size == 0 || len(p) == 0 {
		return
	}
	if len(p) >= size {
		copy(t.buf, p[len(p)-size:])
		t.start, t.n = 0, size
		if t.runs != nil {
			t.rs, t.rn = 0, 1
			t.runs[0] = run{n: uint32(size), stream: s}
		}
		return
	}
	if t.runs != nil {
		t.addRun(s, len(p))
	}
	// Append at the end of the held bytes, wrapping, then drop the oldest if over size.
	// (Indexes wrap by a subtraction: a division costs more than the rest of a small write.)
	end := t.start + t.n
	if end >= size {
		end -= size
	}
	c := copy(t.buf[end:], p)
	copy(t.buf, p[c:])
	t.n += len(p)
	if over := t.n - size; over > 0 {
		if t.start += over; t.start >= size {
			t.start -= size
		}
		t.n = size
		if t.runs != nil {
			t.dropFront(over)
		}
	}
}

// addRun accounts for n new bytes of stream s: the newest run grows, or a new run starts,
// making room by dropping the oldest run and its bytes when the ring is full.
func (t *tail) addRun(s Stream, n int) {
	size := len(t.runs)
	next := t.rs + t.rn // index of the next run, unwrapped
	if next >= size {
		next -= size
	}
	if t.rn > 0 {
		last := next - 1
		if last < 0 {
			last += size
		}
		if r := &t.runs[last]; r.stream == s {
			r.n += uint32(n)
			return
		}
	}
	if t.rn == size { // next is the oldest run
		if t.start += int(t.runs[next].n); t.start >= len(t.buf) {
			t.start -= len(t.buf)
		}
		t.n -= int(t.runs[next].n)
		if t.rs++; t.rs == size {
			t.rs = 0
		}
		t.rn--
	}
	t.runs[next] = run{n: uint32(n), stream: s}
	t.rn++
}

// dropFront removes the oldest n bytes from the runs; n is less than the bytes they hold.
func (t *tail) dropFront(n int) {
	for n > 0 {
		r := &t.runs[t.rs]
		if int(r.n) > n {
			r.n -= uint32(n)
			return
		}
		n -= int(r.n)
		if t.rs++; t.rs == len(t.runs) {
			t.rs = 0
		}
		t.rn--
	}
}

// contents returns a copy of the held bytes, oldest first, never nil; and for a marked tail
// the runs they came from, oldest first, their lengths summing to len(bytes) (nil when
// unmarked or empty).
func (t *tail) contents() ([]byte, []Segment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]byte, t.n)
	c := copy(out, t.buf[t.start:min(t.start+t.n, len(t.buf))])
	copy(out[c:], t.buf[:t.n-c])
	var segs []Segment
	for i := 0; i < t.rn; i++ {
		r := t.runs[(t.rs+i)%len(t.runs)]
		segs = append(segs, Segment{Stream: r.stream, Len: int(r.n)})
	}
	return out, segs
}

// relay copies one pipe from the child to one of cronlock's own descriptors and into the
// shared tail. It ends at end-of-file, or when stop is called: the job's processes are gone
// and whatever still holds the pipe open (a process outside the job) must not hang the run.
//
// Write errors are handled as the job would meet them without cronlock. EPIPE (the reader
// of cronlock's stdout or stderr has gone) ends the relay at once and closes the read end,
// so that the job's next write to that pipe fails with EPIPE or SIGPIPE, as `yes | head -1`
// does. Any other error (ENOSPC, EIO, EFBIG) cannot be handed back to the job, whose write
// has long succeeded: the relay writes nothing more (a file with a hole in the middle is
// worse than a short one), keeps draining the pipe so that the job never blocks, and counts
// the bytes it could not write; the run then fails (Result.OutputErr).
type relay struct {
	r      *os.File // read end, non-blocking, in Go's poller so a deadline can interrupt it
	out    int      // cronlock's stdout or stderr; -1 = none
	name   string   // what out is, for OutputError: "stdout", "stderr" or both
	tail   *tail
	stream Stream // what the tail marks this pipe's bytes as
	// spool, when not nil, takes the pipe's bytes instead of out and tail (--output
	// on-failure); from is how much it held before this relay began.
	spool *spoolStream
	from  int64
	buf   []byte
	done  chan struct{}
	// stopping is set by stop: from then on the relay only takes what the pipe holds.
	stopping atomic.Bool
	// The fields below are written by run's goroutine and read once done is closed.
	broken bool  // out's reader has gone (EPIPE): the relay has ended
	outErr error // the first write error other than EPIPE
	lost   int64 // bytes read from the job but not written to out, after outErr
}

func newRelay(r *os.File, out int, name string, t *tail, stream Stream) *relay {
	if out >= 0 {
		// When cronlock's own output is a pipe (cron's mail pipe, `| logger`), a larger
		// buffer lets the relay hand over its large reads in one write instead of one
		// wake-up per 64 KiB, which keeps the relay as fast as `cat` (BENCHMARKS.md).
		// Not a pipe (a file, a terminal): the call fails, harmlessly.
		_, _ = unix.FcntlInt(uintptr(out), unix.F_SETPIPE_SZ, pipeSize)
	}
	return &relay{r: r, out: out, name: name, tail: t, stream: stream, buf: make([]byte, relayFirstBufSize), done: make(chan struct{})}
}

// run copies until end-of-file, a reader that has gone, or stop; then it closes the read
// end (which, for a reader that has gone, is what the job's next write learns of).
func (rl *relay) run() {
	defer close(rl.done)
	defer rl.r.Close()
	rc, err := rl.r.SyscallConn()
	if err != nil {
		return
	}
	eof := false
	// Read returns when the callback says done (EOF, error, a reader gone, stopped) or
	// when the deadline set by stop passes while it waits for data.
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := rl.pull(int(fd))
			switch {
			case n > 0:
				if rl.broken {
					return true
				}
				if rl.stopping.Load() {
					// The job is gone: a process outside it that keeps writing must not
					// keep the relay here; the drain below is bounded.
					return true
				}
				if n == len(rl.buf) && n < relayBufSize {
					rl.buf = make([]byte, relayBufSize) // a chatty job: large reads from now on
				}
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false
			default: // n == 0: EOF; or a read error, which is final too
				eof = true
				return true
			}
		}
	})
	if eof || rl.broken {
		return
	}
	// Stopped: take what is already in the pipe without waiting for more. Control ignores
	// the deadline that ended Read.
	_ = rc.Control(func(fd uintptr) {
		for total := 0; total < finalDrainLimit && !rl.broken; {
			n, err := rl.pull(int(fd))
			if n > 0 {
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

// stop makes run finish after draining what the pipe already holds. It does not wait:
// passing that on to a slow reader may take a while (done says when it is over).
func (rl *relay) stop() {
	rl.stopping.Store(true)
	_ = rl.r.SetReadDeadline(time.Unix(1, 0))
}

// pull takes what the pipe holds: into the spool, or to out and the tail.
func (rl *relay) pull(fd int) (int, error) {
	if rl.spool != nil {
		return rl.pullSpool(fd)
	}
	n, err := unix.Read(fd, rl.buf)
	if n > 0 {
		rl.handle(rl.buf[:n])
	}
	return n, err
}

func (rl *relay) handle(p []byte) {
	rl.tail.write(rl.stream, p)
	if rl.out < 0 || rl.broken {
		return
	}
	if rl.outErr != nil {
		rl.lost += int64(len(p))
		return
	}
	n, err := writeSome(rl.out, p)
	switch {
	case err == nil:
	case err == unix.EPIPE:
		rl.broken = true
	default:
		rl.outErr = err
		rl.lost += int64(len(p) - n)
	}
}

// writeAll writes p to fd with raw write calls. Unlike os.File.Write on descriptors 1 and
// 2, EPIPE comes back as an error instead of raising SIGPIPE. A non-blocking fd is waited
// on with poll.
func writeAll(fd int, p []byte) error {
	_, err := writeSome(fd, p)
	return err
}

// writeSome is writeAll that also says how much of p it wrote before an error.
func writeSome(fd int, p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Write(fd, p[done:])
		if n > 0 {
			done += n
		}
		switch {
		case err == nil:
			if n == 0 {
				return done, errors.New("write returned no progress")
			}
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if _, perr := unix.Poll(pfd, -1); perr != nil && perr != unix.EINTR {
				return done, perr
			}
		default:
			return done, err
		}
	}
	return done, nil
}

// OutputError is Result.OutputErr when part of the job's output could not be passed on to
// cronlock's own stdout or stderr for a reason other than a reader that went away (that is
// the job's to meet, as EPIPE or SIGPIPE): no space left, an I/O error, a file size limit.
type OutputError struct {
	// Stream names cronlock's output that failed: "stdout", "stderr", or "stdout and
	// stderr" (one file or pipe for both, or both failed).
	Stream string
	// Lost is how many bytes the job wrote that did not reach it.
	Lost int64
	// Err is the first write error.
	Err error
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%s of the job's %s could not be written: %v", formatBytes(e.Lost), e.Stream, e.Err)
}

func (e *OutputError) Unwrap() error { return e.Err }

// formatBytes says n for a person: "512 bytes", "4.8 MB (4812345 bytes)". Decimal units,
// as df -H and most file managers show them; the exact count follows for a comparison
// with a file's size.
func formatBytes(n int64) string {
	if n < 1000 {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, unit := float64(n)/1e3, "kB"
	for _, u := range []string{"MB", "GB", "TB"} {
		if v < 999.95 {
			break
		}
		v, unit = v/1e3, u
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", v, unit, n)
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
