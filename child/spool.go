package child

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DefaultSpoolDir is where a spool goes when no folder is given: on disk, unlike /tmp,
// which is often memory that a chatty job would take from everything else.
const DefaultSpoolDir = "/var/tmp"

// spoolAhead is how far ahead of the writes the spool file's blocks are reserved
// (fallocate): ext4 then skips its per-block reservation of delayed allocation, about a
// fifth of the cost of holding 1 GiB (BENCHMARKS.md). Never beyond the limit.
const spoolAhead = 64 << 20

// Spool holds a run's output in unnamed files on disk until the run's outcome is known
// (--output on-failure): Finish writes it to cronlock's stdout and stderr when the run did
// not succeed, and drops it otherwise. One Spool serves every Supervise call of a run
// (Job.Spool); each appends to it.
//
// The files have no name from the moment they exist (O_TMPFILE, or a name unlinked at
// once), so nothing is left behind however cronlock ends, SIGKILL included. Up to max
// bytes per stream nothing is lost; beyond it the first half and the last half are kept
// (the second half as a ring inside the file, so the disk use never passes max) and
// Finish says how many bytes were dropped between them.
//
// The job still writes to pipes, as it does when its output is relayed: a pipe shared by
// stdout and stderr when they go to the same file or pipe (their order is then the
// kernel's, exactly), else one per stream, each into its own spool file. The relay reads
// and writes with its usual buffer; splice(2) was slower here, as it holds the pipe's
// lock while it writes into the file, and the job's writes then wait on it.
type Spool struct {
	shared  bool
	streams [2]*spoolStream // stdout's (both streams' when shared) and stderr's
	done    bool
}

// spoolStream is one spool file and where its bytes go in the end.
type spoolStream struct {
	f     *os.File
	fd    int
	name  string // the stream, for messages: "stdout", "stderr", "stdout and stderr"
	out   int    // cronlock's descriptor it is written to; -1 = none
	max   int64  // bytes kept at most
	half  int64  // the first part kept: [0, half); the ring of the last bytes is [half, max)
	total int64  // bytes received, kept or not
	alloc int64  // the file's blocks are reserved up to here (or the filesystem cannot)
	last  byte   // the last byte received (when total > 0): the end of what Finish writes
}

// OpenSpool makes the spool of a run whose output goes to stdout and stderr, each file
// holding at most limit bytes (limit > 0), in dir ("" = DefaultSpoolDir). A filesystem
// without O_TMPFILE gets a file created and unlinked at once. The error says why no spool
// could be made (a folder that does not exist or that cronlock may not write).
func OpenSpool(dir string, limit int64, stdout, stderr *os.File) (*Spool, error) {
	if dir == "" {
		dir = DefaultSpoolDir
	}
	if limit <= 0 {
		return nil, errors.New("child: spool size must be positive")
	}
	s := &Spool{shared: sameFile(stdout, stderr)}
	targets := []*os.File{stdout, stderr}
	names := []string{"stdout", "stderr"}
	if s.shared {
		targets, names = targets[:1], []string{"stdout and stderr"}
	}
	for i, t := range targets {
		f, err := openUnnamed(dir)
		if err != nil {
			s.Close()
			return nil, err
		}
		out := -1
		if t != nil {
			out = int(t.Fd())
		}
		s.streams[i] = &spoolStream{f: f, fd: int(f.Fd()), name: names[i], out: out, max: limit, half: limit / 2}
	}
	return s, nil
}

// openUnnamed opens a new file in dir, mode 0600, that has no name.
func openUnnamed(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(spool)"), nil
	}
	// EOPNOTSUPP: the filesystem has no O_TMPFILE (some overlays and network file
	// systems); EISDIR: a kernel without it. A name, unlinked at once, does as well.
	if err != unix.EOPNOTSUPP && err != unix.EISDIR && err != unix.EINVAL {
		return nil, &os.PathError{Op: "open unnamed file in", Path: dir, Err: err}
	}
	f, cerr := os.CreateTemp(dir, ".cronlock-spool-*")
	if cerr != nil {
		return nil, cerr
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// stream is the spool file that takes the output of the pipe for stream st; nil on a nil
// Spool.
func (s *Spool) stream(st Stream) *spoolStream {
	if s == nil {
		return nil
	}
	if s.shared || st == StreamStdout {
		return s.streams[0]
	}
	return s.streams[1]
}

// Finish ends the spool: when the run did not succeed its output is written to cronlock's
// stdout and stderr, every byte (or, past the limit, both halves and the line that says
// what was dropped); else it is dropped. A reader that has gone (EPIPE) ends the writing
// quietly, as it would have ended the job's own writes; any other write error comes back
// as an *OutputError. The files are closed either way. Calling it again, or on a nil
// Spool, does nothing.
func (s *Spool) Finish(succeeded bool) error {
	if s == nil || s.done {
		return nil
	}
	defer s.Close()
	if succeeded {
		return nil
	}
	var errs []*OutputError
	for _, st := range s.streams {
		if st == nil {
			continue
		}
		if err := st.writeOut(); err != nil {
			errs = append(errs, err)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return &OutputError{Stream: "stdout and stderr", Lost: errs[0].Lost + errs[1].Lost, Err: errs[0].Err}
}

// EndsMidLine reports whether what the spool writes (or wrote) to cronlock's stderr ended
// without a newline, so that a line of cronlock's after it must start a line of its own.
// The spool holds every byte even when no tail is captured (--capture 0), so it knows
// where a run's tail cannot tell. False on a nil Spool, or with nothing for stderr.
func (s *Spool) EndsMidLine() bool {
	st := s.stream(StreamStderr)
	return st != nil && st.out >= 0 && st.total > 0 && st.last != '\n'
}

// Close drops whatever the spool holds. Safe on a nil Spool, and more than once.
func (s *Spool) Close() {
	if s == nil {
		return
	}
	s.done = true
	for _, st := range s.streams {
		if st != nil {
			st.f.Close()
		}
	}
}

// ring is the size of the part that keeps the last bytes once max has been passed.
func (st *spoolStream) ring() int64 { return st.max - st.half }

// at is where byte p of the stream lies in the file (while the file still holds it).
func (st *spoolStream) at(p int64) int64 {
	if p < st.half {
		return p
	}
	return st.half + (p-st.half)%st.ring()
}

// pull moves what the job's pipe holds into the file, at most up to the end of the file's
// room. n is what it took from the pipe; rerr is the pipe's (EAGAIN when empty; n == 0 and
// no error at end-of-file); werr the spool's own (no space left…), after which the caller
// drains the pipe without keeping anything.
func (st *spoolStream) pull(pipe int, buf []byte) (n int, rerr, werr error) {
	off := st.at(st.total)
	room := int(min(st.max-off, int64(len(buf))))
	n, rerr = unix.Read(pipe, buf[:room])
	if n <= 0 {
		return 0, rerr, nil
	}
	if end := off + int64(n); end > st.alloc && st.alloc < st.max {
		// A filesystem that cannot reserve (or has no room to) just writes: the write
		// itself then says whether there is space.
		// Doubling from 1 MiB: a job that prints a line reserves little.
		step := max(min(max(st.alloc, 1<<20), spoolAhead), end-st.alloc)
		step = min(step, st.max-st.alloc)
		if unix.Fallocate(st.fd, unix.FALLOC_FL_KEEP_SIZE, st.alloc, step) != nil {
			step = st.max - st.alloc
		}
		st.alloc += step
	}
	done := 0
	for done < n {
		w, err := unix.Pwrite(st.fd, buf[done:n], off+int64(done))
		if w > 0 {
			done += w
		}
		if err != nil && err != unix.EINTR {
			st.total += int64(done)
			return n, nil, err
		}
	}
	st.total += int64(n)
	st.last = buf[n-1]
	return n, nil, nil
}

// tail returns the last n bytes the stream received since byte from that the file still
// holds; nil when n is 0.
func (st *spoolStream) tail(from int64, n int) []byte {
	if n <= 0 {
		return nil
	}
	start := max(from, st.total-int64(n))
	if st.total > st.max {
		start = max(start, st.total-st.ring()) // the ring only: the first half lies before a gap
	}
	buf := make([]byte, max(st.total-start, 0))
	got := 0
	for got < len(buf) {
		off := st.at(start + int64(got))
		end := min(int64(len(buf)), int64(got)+st.max-off)
		m, err := unix.Pread(st.fd, buf[got:end], off)
		if err == unix.EINTR {
			continue
		}
		if m <= 0 {
			break
		}
		got += m
	}
	return buf[:got]
}

// writeOut writes what the file holds to the stream's destination, oldest first.
func (st *spoolStream) writeOut() *OutputError {
	if st.out < 0 || st.total == 0 {
		return nil
	}
	if st.total <= st.max {
		return st.copyOut([]span{{0, st.total}}, nil)
	}
	mid := st.at(st.total) // the oldest byte of the ring
	dropped := st.total - st.max
	line := fmt.Sprintf("cronlock: --output-max %d: dropped %s of the job's output here, between the first %d and the last %d bytes\n",
		st.max, formatBytes(dropped), st.half, st.ring())
	if st.half > 0 {
		var b [1]byte
		if n, _ := unix.Pread(st.fd, b[:], st.half-1); n == 1 && b[0] != '\n' {
			line = "\n" + line
		}
	}
	return st.copyOut([]span{{0, st.half}, {mid, st.max - mid}, {st.half, mid - st.half}}, []byte(line))
}

// span is a part of the spool file: from off, n bytes.
type span struct{ off, n int64 }

// copyOut writes the spans to the destination, with note between the first and the
// second. sendfile(2) moves the bytes inside the kernel; a destination it cannot write
// (a terminal, an O_APPEND file) gets them read and written.
func (st *spoolStream) copyOut(spans []span, note []byte) *OutputError {
	var left int64
	for _, sp := range spans {
		left += sp.n
	}
	buf := []byte(nil)
	fail := func(err error) *OutputError {
		if err == unix.EPIPE {
			return nil // the reader has gone: as the job's own writes would have ended
		}
		return &OutputError{Stream: st.name, Lost: left, Err: err}
	}
	for i, sp := range spans {
		if i == 1 && note != nil {
			if err := writeAll(st.out, note); err != nil {
				return fail(err)
			}
		}
		off, end := sp.off, sp.off+sp.n
		for off < end {
			if buf == nil {
				n, err := unix.Sendfile(st.out, st.fd, &off, int(min(end-off, 1<<30)))
				if n > 0 {
					left -= int64(n)
					continue
				}
				switch err {
				case unix.EINTR:
					continue
				case unix.EAGAIN:
					pfd := []unix.PollFd{{Fd: int32(st.out), Events: unix.POLLOUT}}
					_, _ = unix.Poll(pfd, -1)
					continue
				case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
					buf = make([]byte, relayBufSize)
					continue
				case nil:
					return fail(errors.New("the spool file is shorter than what it was given"))
				}
				return fail(err)
			}
			n, err := unix.Pread(st.fd, buf[:min(end-off, int64(len(buf)))], off)
			if err == unix.EINTR {
				continue
			}
			if n <= 0 {
				return fail(fmt.Errorf("read spool file: %v", err))
			}
			if err := writeAll(st.out, buf[:n]); err != nil {
				return fail(err)
			}
			off += int64(n)
			left -= int64(n)
		}
	}
	return nil
}

// pullSpool is the relay's step for a spooled stream: what the pipe holds goes into the
// spool. After a spool write error the pipe is drained and what is read counted as lost,
// so that the job never blocks; the run then fails (OutputError).
func (rl *relay) pullSpool(fd int) (int, error) {
	if rl.outErr == nil {
		before := rl.spool.total
		n, rerr, werr := rl.spool.pull(fd, rl.buf)
		if werr == nil {
			return n, rerr
		}
		rl.outErr = fmt.Errorf("spool for --output on-failure: %w", werr)
		if n > 0 {
			rl.lost += int64(n) - (rl.spool.total - before)
			return n, nil
		}
	}
	n, err := unix.Read(fd, rl.buf)
	if n > 0 {
		rl.lost += int64(n)
	}
	return n, err
}

// spoolTail is the run's output tail taken back from the spool: the bytes each relay put
// there during this Supervise call.
func (o *outputs) spoolTail() ([]byte, []Segment) {
	if o.capture == 0 {
		return nil, nil
	}
	var parts [2][]byte
	for _, rl := range o.relays {
		i := 0
		if rl.stream == StreamStderr {
			i = 1
		}
		parts[i] = rl.spool.tail(rl.from, o.capture)
	}
	if o.shared {
		return parts[0], nil
	}
	return joinParts(o.capture, parts)
}
