package lockrun

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestOutputTailRing checks the ring against a plain "keep the last n bytes" model with
// writes of every size around the capacity.
func TestOutputTailRing(t *testing.T) {
	for _, size := range []int{1, 7, 64, 1000} {
		tl := newTail(size)
		var all []byte
		r := rand.New(rand.NewPCG(1, uint64(size)))
		for i := 0; i < 2000; i++ {
			n := r.IntN(3*size + 2)
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(r.IntN(256))
			}
			tl.Write(p)
			all = append(all, p...)
			want := all[max(0, len(all)-size):]
			if got := tl.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("size %d, write %d (%d bytes): got %d bytes, want %d", size, i, n, len(got), len(want))
			}
		}
	}
	if got := newTail(10).Bytes(); got == nil || len(got) != 0 {
		t.Fatalf("empty tail: %q", got)
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
		}, nil, nil, false, nil)
		if res.ExitCode != 0 || len(res.Output) != 64<<10 {
			b.Fatalf("got %+v", res.ExitCode)
		}
	}
}
