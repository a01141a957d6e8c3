package child

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestOutputTailRing checks the ring against a plain "keep the last n bytes" model with
// writes of every size around the capacity, marked (one stream) and unmarked.
func TestOutputTailRing(t *testing.T) {
	for _, marked := range []bool{false, true} {
		for _, size := range []int{1, 7, 64, 1000} {
			tl := newTail(size, marked)
			var all []byte
			r := rand.New(rand.NewPCG(1, uint64(size)))
			for i := 0; i < 2000; i++ {
				n := r.IntN(3*size + 2)
				p := make([]byte, n)
				for j := range p {
					p[j] = byte(r.IntN(256))
				}
				tl.write(StreamStderr, p)
				all = append(all, p...)
				want := all[max(0, len(all)-size):]
				got, segs := tl.contents()
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d, write %d (%d bytes): got %d bytes, want %d", size, i, n, len(got), len(want))
				}
				var wantSegs []Segment
				if marked && len(want) > 0 {
					wantSegs = []Segment{{StreamStderr, len(want)}}
				}
				if !slices.Equal(segs, wantSegs) {
					t.Fatalf("marked %v, size %d, write %d: segments %v, want %v", marked, size, i, segs, wantSegs)
				}
			}
		}
	}
	if got, segs := newTail(10, true).contents(); got == nil || len(got) != 0 || segs != nil {
		t.Fatalf("empty tail: %q %v", got, segs)
	}
}

// modelTail is the obvious, slow tail with marks: runs of (stream, bytes); append, keep the
// last size bytes, then drop whole runs from the front while there are more than maxRuns.
type modelTail struct {
	size, maxRuns int
	runs          []modelRun
}

type modelRun struct {
	s Stream
	b []byte
}

func (m *modelTail) write(s Stream, p []byte) {
	if len(p) == 0 {
		return
	}
	if k := len(m.runs); k > 0 && m.runs[k-1].s == s {
		m.runs[k-1].b = append(m.runs[k-1].b, p...)
	} else {
		m.runs = append(m.runs, modelRun{s, slices.Clone(p)})
	}
	total := 0
	for _, r := range m.runs {
		total += len(r.b)
	}
	for over := total - m.size; over > 0; {
		if len(m.runs[0].b) > over {
			m.runs[0].b = m.runs[0].b[over:]
			break
		}
		over -= len(m.runs[0].b)
		m.runs = m.runs[1:]
	}
	for len(m.runs) > m.maxRuns {
		m.runs = m.runs[1:]
	}
}

func (m *modelTail) contents() ([]byte, []Segment) {
	out := []byte{}
	var segs []Segment
	for _, r := range m.runs {
		out = append(out, r.b...)
		segs = append(segs, Segment{r.s, len(r.b)})
	}
	return out, segs
}

// checkSegments: consecutive segments differ in stream, none is empty, and their lengths
// sum to the bytes held.
func checkSegments(t *testing.T, out []byte, segs []Segment) {
	t.Helper()
	sum := 0
	for i, sg := range segs {
		if sg.Len <= 0 || sg.Stream != StreamStdout && sg.Stream != StreamStderr || i > 0 && segs[i-1].Stream == sg.Stream {
			t.Fatalf("bad segment %d in %v", i, segs)
		}
		sum += sg.Len
	}
	if sum != len(out) {
		t.Fatalf("segments %v sum to %d, the tail holds %d bytes", segs, sum, len(out))
	}
}

// TestOutputTailStreams compares a marked tail with the model under random writes of both
// streams: small ones that keep the run ring full, sizes around the capacity, and the
// wrap-around falling anywhere inside a run.
func TestOutputTailStreams(t *testing.T) {
	for _, size := range []int{1, 2, 7, 64, 100, 1000, 4096} {
		for _, small := range []int{1, 3, 40, 0} {
			tl := newTail(size, true)
			m := &modelTail{size: size, maxRuns: len(tl.runs)}
			r := rand.New(rand.NewPCG(2, uint64(size*10+small)))
			for i := 0; i < 3000; i++ {
				n := r.IntN(3*size + 2)
				if small > 0 {
					n = r.IntN(small + 1)
				}
				p := make([]byte, n)
				for j := range p {
					p[j] = byte(r.IntN(256))
				}
				s := StreamStdout
				if r.IntN(3) == 0 {
					s = StreamStderr
				}
				tl.write(s, p)
				m.write(s, p)
				got, segs := tl.contents()
				want, wantSegs := m.contents()
				if !bytes.Equal(got, want) || !slices.Equal(segs, wantSegs) {
					t.Fatalf("size %d, small %d, write %d (%d bytes of %d): got %d bytes %v, want %d bytes %v",
						size, small, i, n, s, len(got), segs, len(want), wantSegs)
				}
				checkSegments(t, got, segs)
			}
		}
	}
}

// TestOutputTailWrapInsideSegment: bytes falling off the front shorten the oldest run
// without moving any mark, across the end of the byte ring.
func TestOutputTailWrapInsideSegment(t *testing.T) {
	tl := newTail(10, true)
	step := func(s Stream, p, want string, wantSegs ...Segment) {
		t.Helper()
		tl.write(s, []byte(p))
		got, segs := tl.contents()
		if string(got) != want || !slices.Equal(segs, wantSegs) {
			t.Fatalf("after %q: got %q %v, want %q %v", p, got, segs, want, wantSegs)
		}
	}
	step(StreamStdout, "aaaaaa", "aaaaaa", Segment{StreamStdout, 6})
	step(StreamStderr, "bbbbbb", "aaaabbbbbb", Segment{StreamStdout, 4}, Segment{StreamStderr, 6})
	step(StreamStdout, "cc", "aabbbbbbcc", Segment{StreamStdout, 2}, Segment{StreamStderr, 6}, Segment{StreamStdout, 2})
	step(StreamStdout, "ddd", "bbbbbccddd", Segment{StreamStderr, 5}, Segment{StreamStdout, 5})
	step(StreamStderr, "e", "bbbbccddde", Segment{StreamStderr, 4}, Segment{StreamStdout, 5}, Segment{StreamStderr, 1})
	// A write of the whole size or more leaves one run.
	step(StreamStdout, "0123456789xy", "23456789xy", Segment{StreamStdout, 10})
	step(StreamStderr, "0123456789", "0123456789", Segment{StreamStderr, 10})
}

// TestOutputTailSegmentBound: output that switches stream at every byte cannot grow the run
// ring; the oldest runs go with their bytes, and the newest bytes keep their marks.
func TestOutputTailSegmentBound(t *testing.T) {
	const size = 64 << 10
	tl := newTail(size, true)
	maxRuns := len(tl.runs)
	if maxRuns != size/segmentBytes {
		t.Fatalf("a %d-byte tail keeps %d runs, want %d", size, maxRuns, size/segmentBytes)
	}
	for i := 0; i < 10*maxRuns; i++ {
		tl.write(Stream(1+i%2), []byte{byte(i)})
	}
	got, segs := tl.contents()
	if len(segs) != maxRuns || len(got) != maxRuns || len(tl.runs) != maxRuns {
		t.Fatalf("after %d one-byte runs: %d bytes, %d segments, ring %d; want %d of each",
			10*maxRuns, len(got), len(segs), len(tl.runs), maxRuns)
	}
	checkSegments(t, got, segs)
	last := 10*maxRuns - 1
	if got[len(got)-1] != byte(last) || segs[len(segs)-1].Stream != Stream(1+last%2) {
		t.Fatalf("newest byte %d of %v, want %d of %v", got[len(got)-1], segs[len(segs)-1], byte(last), Stream(1+last%2))
	}
	// Long runs again: the tail fills up to its size.
	tl.write(StreamStdout, bytes.Repeat([]byte("o"), size/2))
	tl.write(StreamStderr, bytes.Repeat([]byte("e"), size/2))
	got, segs = tl.contents()
	checkSegments(t, got, segs)
	if len(got) != size || segs[len(segs)-1] != (Segment{StreamStderr, size / 2}) {
		t.Fatalf("after two long runs: %d bytes, last segment %v", len(got), segs[len(segs)-1])
	}
	// Small tails keep a run per byte.
	if n := len(newTail(10, true).runs); n != 10 {
		t.Fatalf("a 10-byte tail keeps %d runs, want 10", n)
	}
}

// TestOutputTailHugeWrite: one write far larger than the tail keeps its end as one run.
func TestOutputTailHugeWrite(t *testing.T) {
	tl := newTail(1000, true)
	tl.write(StreamStdout, []byte("before"))
	huge := make([]byte, 8<<20)
	for i := range huge {
		huge[i] = byte(i)
	}
	tl.write(StreamStderr, huge)
	got, segs := tl.contents()
	if !bytes.Equal(got, huge[len(huge)-1000:]) || !slices.Equal(segs, []Segment{{StreamStderr, 1000}}) {
		t.Fatalf("got %d bytes %v", len(got), segs)
	}
}

// TestOutputTailConcurrent: the two relays write at once (run with -race); every byte keeps
// the mark of the stream that wrote it.
func TestOutputTailConcurrent(t *testing.T) {
	tl := newTail(4096, true)
	var wg sync.WaitGroup
	for _, s := range []Stream{StreamStdout, StreamStderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(3, uint64(s)))
			for i := 0; i < 20000; i++ {
				tl.write(s, bytes.Repeat([]byte{byte(s)}, r.IntN(300)))
			}
		}()
	}
	wg.Wait()
	got, segs := tl.contents()
	checkSegments(t, got, segs)
	at := 0
	for _, sg := range segs {
		for _, b := range got[at : at+sg.Len] {
			if b != byte(sg.Stream) {
				t.Fatalf("byte %d of stream %d in a segment of stream %d", b, b, sg.Stream)
			}
		}
		at += sg.Len
	}
}

// BenchmarkOutputTail is the tail alone: the relay's big reads, and a chatty job switching
// stream on every small write.
func BenchmarkOutputTail(b *testing.B) {
	for _, c := range []struct {
		name      string
		chunk     int
		alternate bool
	}{{"256K", 256 << 10, false}, {"4K", 4 << 10, false}, {"40B", 40, false}, {"40B-alternating", 40, true}} {
		b.Run(c.name, func(b *testing.B) {
			tl := newTail(64<<10, true)
			p := make([]byte, c.chunk)
			b.SetBytes(int64(c.chunk))
			for i := 0; i < b.N; i++ {
				s := StreamStdout
				if c.alternate && i%2 == 1 {
					s = StreamStderr
				}
				tl.write(s, p)
			}
		})
	}
}

// BenchmarkOutputRelay relays 256 MiB to /dev/null with a 64 KiB tail; compare with
// `head -c 256M /dev/zero | cat >/dev/null`.
func BenchmarkOutputRelay(b *testing.B) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	const size = 256 << 20
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		res := Supervise(context.Background(), Job{
			Argv:    []string{"head", "-c", strconv.Itoa(size), "/dev/zero"},
			Stdout:  null,
			Stderr:  os.Stderr,
			Capture: 64 << 10,
			Grace:   time.Second,
		}, nil, nil, nil)
		res.WaitOutput()
		if res.ExitCode != 0 || len(res.Output) != 64<<10 {
			b.Fatalf("got %+v", res.ExitCode)
		}
	}
}
