package jobrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/proctest"
)

// TestShouldWarn: a warning that every run would repeat is said once an hour per subject
// and cause where cron would mail it, and every time on a terminal.
func TestShouldWarn(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	dir := t.TempDir()
	run := &runner{o: &Options{Stderr: w, StampDir: dir}}
	full := fmt.Errorf("history: claim run 0193: %w", &fs.PathError{Op: "write", Path: "/h-runs/0193", Err: syscall.ENOSPC})
	fullAgain := fmt.Errorf("history: claim run 0194: %w", &fs.PathError{Op: "write", Path: "/h-runs/0194", Err: syscall.ENOSPC})
	corrupt := errors.New("history: /h.db is corrupt or not a cronlock history")
	steps := []struct {
		what, subject string
		err           error
		want          bool
	}{
		{"history", "/h.db", full, true},
		{"history", "/h.db", fullAgain, false}, // the same cause, whatever the run id
		{"history", "/h.db", corrupt, true},    // a new cause is said at once
		{"history", "/other.db", full, true},   // so is the same cause of another file
		{"metrics", "/h.db", full, true},       // and of another kind of warning
		{"history", "/h.db", corrupt, false},
		{"history", "/h.db", named{"disk full", errors.New("disk I/O error")}, true},
		// A cause that names itself is that cause, whatever the innermost error says.
		{"history", "/h.db", named{"disk full", errors.New("database or disk is full")}, false},
	}
	for i, s := range steps {
		if got := run.shouldWarn(s.what, s.subject, s.err); got != s.want {
			t.Fatalf("step %d (%s %s %v): shouldWarn = %v, want %v", i, s.what, s.subject, s.err, got, s.want)
		}
	}
	if note := run.repeatNote(); note == "" {
		t.Fatal("a limited warning does not say that it repeats at most once an hour")
	}

	// On a terminal a person is reading: every run says it, with no note about repeats.
	_, pts := proctest.OpenPTY(t)
	run.o.Stderr = pts
	for i := 0; i < 3; i++ {
		if !run.shouldWarn("history", "/h.db", full) {
			t.Fatalf("on a terminal, warning %d was held back", i+1)
		}
	}
	if note := run.repeatNote(); note != "" {
		t.Fatalf("on a terminal the warning ends with %q", note)
	}
}

// named is an error with a Cause of its own.
type named struct {
	cause string
	err   error
}

func (n named) Error() string { return n.cause + ": " + n.err.Error() }
func (n named) Unwrap() error { return n.err }
func (n named) Cause() string { return n.cause }

func TestHeldFor(t *testing.T) {
	for d, want := range map[time.Duration]string{
		312*time.Millisecond + 400*time.Microsecond:   "312ms",
		999 * time.Millisecond:                        "999ms",
		1149 * time.Millisecond:                       "1.1s",
		12*time.Second + 340*time.Millisecond:         "12.3s",
		90*time.Second + 400*time.Millisecond:         "1m30s",
		5 * time.Minute:                               "5m",
		26*time.Hour + 12*time.Second:                 "26h",
		26*time.Hour + 3*time.Minute + 40*time.Second: "26h4m",
	} {
		if got := heldFor(d); got != want {
			t.Errorf("heldFor(%v) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", 200 * time.Millisecond: "200ms", 90 * time.Minute: "1h30m",
		time.Minute: "1m", 61 * time.Second: "1m1s", 0: "0s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
