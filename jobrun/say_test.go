package jobrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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
	pts := openPTS(t)
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

// openPTS returns the terminal side of a new pseudo-terminal.
func openPTS(t *testing.T) *os.File {
	t.Helper()
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { unix.Close(master) })
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(master, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}
