package child

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"testing"
	"time"
)

// Helpers that more than one test file of this package uses.

// testSignals returns Signals fed by the returned channel instead of real signals.
func testSignals(t *testing.T) (*Signals, chan os.Signal) {
	t.Helper()
	c := make(chan os.Signal, 4)
	s := newSignals(c)
	t.Cleanup(func() { signal.Stop(s.chld) })
	setSubreaper()
	return s, c
}

// supervise runs Supervise with a watchdog, so that a hang fails the test instead of
// stalling the suite, then waits for the output (Result.WaitOutput). The duration is
// Supervise's own.
func supervise(t *testing.T, job Job, sig *Signals, lease Watch, started func(int)) (Result, time.Duration) {
	t.Helper()
	if sig == nil {
		sig, _ = testSignals(t)
	}
	type out struct {
		r Result
		d time.Duration
	}
	ch := make(chan out, 1)
	go func() {
		t0 := time.Now()
		r := Supervise(context.Background(), job, sig, lease, started)
		d := time.Since(t0)
		r.WaitOutput()
		ch <- out{r, d}
	}()
	select {
	case o := <-ch:
		return o.r, o.d
	case <-time.After(20 * time.Second):
		t.Fatalf("Supervise did not return within 20s")
	}
	panic("unreachable")
}

func sh(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, args...)
}

// procGone reports whether pid has no /proc entry at all (exited and reaped).
func procGone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

// chanWatch is a Watch fed by a test: a loss on its channel, and what Check says.
type chanWatch struct {
	c       chan Stop
	expired func() bool // nil: the lease never runs out by itself
}

func (w chanWatch) Lost() <-chan Stop { return w.c }

func (w chanWatch) Check() (Stop, bool) {
	if w.expired != nil && w.expired() {
		return Stop{Err: errors.New("ran out")}, true
	}
	return Stop{}, false
}

// sink stands for cronlock's stdout or stderr when that is a pipe (cron's mail pipe): a
// goroutine reads everything written to w. With mark, it creates that file once bytes have
// arrived; with countOnly, it keeps only their number.
type sink struct {
	w    *os.File
	done chan struct{}
	buf  bytes.Buffer
	n    int64
}

func newSink(t *testing.T, mark string, countOnly bool) *sink {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	k := &sink{w: w, done: make(chan struct{})}
	t.Cleanup(func() { w.Close(); <-k.done })
	go func() {
		defer close(k.done)
		defer r.Close()
		b := make([]byte, 64<<10)
		for {
			n, err := r.Read(b)
			if n > 0 {
				k.n += int64(n)
				if !countOnly {
					k.buf.Write(b[:n])
				}
				if mark != "" {
					os.WriteFile(mark, nil, 0o644)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return k
}

// all closes the test's write end and returns everything the sink got.
func (k *sink) all() ([]byte, int64) {
	k.w.Close()
	<-k.done
	return k.buf.Bytes(), k.n
}

// errLockLost stands for the keeper's reason in a Stop.
var errLockLost = errors.New("lock lost")
