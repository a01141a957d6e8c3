package child

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// handoff is one of cronlock's outputs that is a regular file, handed to the job as it is
// (no pipe, no relay): the job writes at full speed and meets its own write errors (ENOSPC,
// EFBIG and SIGXFSZ), exactly as without cronlock. The tail is read back from the file once
// the job is gone, from the part the job wrote: from where the file ended (O_APPEND) or
// where its offset stood when the job started, to where it ends now.
type handoff struct {
	f       *os.File // cronlock's own stdout or stderr; not owned
	rd      *os.File // a readable descriptor of the same file, owned; nil when f is readable
	appends bool     // f has O_APPEND: the job's writes go to the end, whatever the offset
	start   int64    // where the job's part begins
	// data is the end of the job's part, read by read once the job is gone.
	data []byte
}

// newHandoff returns a handoff of f when f is a regular file whose written part can be read
// back, else nil (the output is then relayed). A write-only descriptor (`>file` opens
// O_WRONLY) cannot be read: the file is opened again for reading through /proc/self/fd,
// which reaches it even when it was deleted or the path is no longer the same file.
func newHandoff(f *os.File) *handoff {
	if f == nil {
		return nil
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil
	}
	h := &handoff{f: f, appends: fl&unix.O_APPEND != 0}
	switch fl & unix.O_ACCMODE {
	case unix.O_RDWR:
	case unix.O_WRONLY:
		rd, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY, 0)
		if err != nil {
			return nil // no /proc, or a file cronlock may write but not read
		}
		h.rd = rd
	default:
		// Read-only: the job's writes fail with EBADF, as they would without cronlock;
		// there is nothing to read back.
	}
	if h.appends {
		h.start = st.Size
	} else if h.start, err = unix.Seek(fd, 0, unix.SEEK_CUR); err != nil {
		h.close()
		return nil
	}
	return h
}

// read keeps the last n bytes of the job's part of the file in data, and closes the
// readable descriptor. Call it once the job is gone. A file truncated meanwhile
// (logrotate's copytruncate) shrinks below where the job began: then all it holds now
// counts as the job's. A failed read keeps what it got: the tail is a convenience, the
// file itself has the output.
func (h *handoff) read(n int) {
	defer h.close()
	h.data = []byte{}
	fd := int(h.f.Fd())
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	end := st.Size
	if !h.appends {
		// Beyond the offset are bytes the job did not write (an older, longer file that
		// `1<>file` writes over); before it, a file truncated below the offset is shorter.
		if off, err := unix.Seek(fd, 0, unix.SEEK_CUR); err == nil && off < end {
			end = off
		}
	}
	start := h.start
	if end < start {
		start = 0
	}
	from := max(start, end-int64(n))
	buf := make([]byte, end-from)
	rfd := fd
	if h.rd != nil {
		rfd = int(h.rd.Fd())
	}
	got := 0
	for got < len(buf) {
		m, err := unix.Pread(rfd, buf[got:], from+int64(got))
		if err == unix.EINTR {
			continue
		}
		if m <= 0 {
			break
		}
		got += m
	}
	h.data = buf[:got]
}

func (h *handoff) close() {
	if h.rd != nil {
		h.rd.Close()
		h.rd = nil
	}
}

// outputs is what keeps one run's output: the relays and their tail, and the files handed
// to the job.
type outputs struct {
	capture int
	// shared: stdout and stderr are one file or pipe, so the job got one pipe or the one
	// file for both: the tail keeps their order but is not marked.
	shared bool
	relays []*relay
	tail   *tail       // the relays' tail; nil when nothing is relayed
	files  [2]*handoff // stdout's and stderr's files handed to the job; when shared, files[0]
	spool  bool        // the relays write into a Spool, which gives the tail back
}

// jobGone is called when every process of the job is gone: the relays are told to pass on
// what the pipes hold and stop (without waiting for them: a slow reader must not keep the
// lock), and the tails of the handed-off files are read.
func (o *outputs) jobGone() {
	for _, rl := range o.relays {
		rl.stop()
	}
	for _, h := range o.files {
		if h != nil && h.data == nil {
			h.read(o.capture)
		}
	}
}

// abandon closes what jobGone would have read (the run ended in a panic).
func (o *outputs) abandon() {
	for _, rl := range o.relays {
		rl.stop()
	}
	for _, h := range o.files {
		if h != nil {
			h.close()
		}
	}
}

// wait waits for the relays to end and returns the tail, its stream marks and the output
// error (see Result).
//
// When one stream was relayed and the other handed off as a file, or both went to two
// different files, the order in which the job wrote them is not known: the tail holds the
// end of stdout, then the end of stderr, marked. Each gets half of the capture when both
// have more than that, and a stream with less leaves the rest to the other.
func (o *outputs) wait() ([]byte, []Segment, error) {
	var lost int64
	var first error
	var names []string
	for _, rl := range o.relays {
		<-rl.done
		if rl.outErr != nil {
			if first == nil {
				first = rl.outErr
			}
			lost += rl.lost
			names = append(names, rl.name)
		}
	}
	var err error
	if first != nil {
		name := names[0]
		if len(names) > 1 {
			name = "stdout and stderr"
		}
		err = &OutputError{Stream: name, Lost: lost, Err: first}
	}
	if o.spool {
		out, segs := o.spoolTail()
		return out, segs, err
	}
	if o.files[0] == nil && o.files[1] == nil {
		if o.tail == nil {
			return []byte{}, nil, err
		}
		out, segs := o.tail.contents()
		return out, segs, err
	}
	if o.shared {
		return o.files[0].data, nil, err
	}
	var parts [2][]byte
	var relayed []byte
	if o.tail != nil {
		relayed, _ = o.tail.contents() // one stream only: the other is a file
	}
	for i, h := range o.files {
		if h != nil {
			parts[i] = h.data
		} else {
			parts[i] = relayed
		}
	}
	out, segs := joinParts(o.capture, parts)
	return out, segs, err
}

// joinParts puts the ends of stdout and stderr one after the other, marked, sharing the
// capture between them (splitCapture).
func joinParts(capture int, parts [2][]byte) ([]byte, []Segment) {
	a, b := splitCapture(capture, len(parts[0]), len(parts[1]))
	out := make([]byte, 0, a+b)
	out = append(out, parts[0][len(parts[0])-a:]...)
	out = append(out, parts[1][len(parts[1])-b:]...)
	var segs []Segment
	if a > 0 {
		segs = append(segs, Segment{Stream: StreamStdout, Len: a})
	}
	if b > 0 {
		segs = append(segs, Segment{Stream: StreamStderr, Len: b})
	}
	return out, segs
}

// splitCapture shares capture bytes between two parts of na and nb bytes: each gets at
// least half when it has that much, and what one does not need goes to the other.
func splitCapture(capture, na, nb int) (int, int) {
	a := min(na, max(capture/2, capture-nb))
	return a, min(nb, capture-a)
}
