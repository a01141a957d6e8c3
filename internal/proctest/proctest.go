// Package proctest has the small process and file probes that cronlock's tests share:
// waiting for a file a job writes, reading a pid from it, and telling whether a process
// is still alive. It is for tests only.
package proctest

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/procfs"

	"golang.org/x/sys/unix"
)

// WaitFile waits up to 20 s for path to exist.
func WaitFile(t testing.TB, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within 20s", path)
}

// ReadPID waits for path and returns the pid written in it (the write may be in progress).
func ReadPID(t testing.TB, path string) int {
	t.Helper()
	WaitFile(t, path)
	for i := 0; i < 400; i++ {
		b, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// Dead reports whether pid is gone or a zombie (exited, not yet reaped).
func Dead(pid int) bool {
	st, err := procfs.ReadStat(pid)
	var perr *fs.PathError
	if errors.As(err, &perr) {
		return true // no /proc entry: gone, and reaped
	}
	return err == nil && st.State == 'Z'
}

// WaitDead waits up to within for pid to be Dead and fails the test otherwise.
func WaitDead(t testing.TB, pid int, within time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if Dead(pid) {
			return
		}
	}
	t.Fatalf("%s (pid %d) still alive after %v", what, pid, within)
}

// OpenPTY opens a new pseudo-terminal: master (non-blocking, so that read deadlines work)
// and pts, its terminal side, neither of them this process's controlling terminal. Both
// are closed when the test ends. The test is skipped where there are no pseudo-terminals.
func OpenPTY(t testing.TB) (master, pts *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return master, pts
}
