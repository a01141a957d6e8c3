package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/internal/proctest"
)

// TestArgumentListTooLong: a command line longer than execve takes exits 126, as a shell
// says of it, with one line on stderr and a history row of status error.
//
// The child's argv is cronlock's own tail, so a command line too long for the child is
// too long for cronlock too, unless the limit shrinks in between: cronlock is started
// under a 16 MiB stack limit (it may take 4 MiB of arguments), waits for a lock held by
// another run, and meanwhile gets an 8 MiB limit (2 MiB of arguments) from prlimit(2),
// which its child inherits.
func TestArgumentListTooLong(t *testing.T) {
	const roomy, tight = 16 << 20, 8 << 20
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max != unix.RLIM_INFINITY && lim.Max < roomy {
		t.Skipf("hard stack limit %d: cannot raise it to %d for cronlock's own exec", lim.Max, roomy)
	}
	c := newCLI(t, "")
	held, release := filepath.Join(c.dir, "held"), filepath.Join(c.dir, "release")
	holder := c.command("run", "-k", "argmax", "--", "sh", "-c",
		`touch "$0"; while [ ! -e "$1" ]; do sleep 0.02; done`, held, release)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Signal(syscall.SIGTERM); holder.Wait() }()
	proctest.WaitFile(t, held)

	// 30 arguments of 100 kB: 3 MB, each under the 128 KiB Linux takes in one.
	args := append([]string{"run", "-k", "argmax", "--wait", "30s", "--", "true"},
		slices.Repeat([]string{strings.Repeat("a", 100_000)}, 30)...)
	waiter := c.command(args...)
	var stdout, stderr bytes.Buffer
	waiter.Stdout, waiter.Stderr = &stdout, &stderr
	// The raised limit is this test process's for as long as Start takes: the tests of
	// this package that run at the same time only get a larger stack limit for their
	// children, which changes nothing they check.
	roomyLim := unix.Rlimit{Cur: roomy, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_STACK, &roomyLim); err != nil {
		t.Fatal(err)
	}
	err := waiter.Start()
	if rerr := unix.Setrlimit(unix.RLIMIT_STACK, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Not before cronlock has a second thread: execve stores the stack limit it started
	// with back into the process after the point where Start returns, and would undo a
	// prlimit that came too soon. A Go runtime with threads is past all that.
	pid := waiter.Process.Pid
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		if tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task"); len(tasks) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cronlock has no second thread after 20s")
		}
	}
	tightLim := unix.Rlimit{Cur: tight, Max: lim.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_STACK, &tightLim, nil); err != nil {
		waiter.Process.Kill()
		waiter.Wait()
		t.Fatalf("prlimit cronlock: %v", err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code := 0
	if err := waiter.Wait(); err != nil {
		code = waiter.ProcessState.ExitCode()
	}
	if code != 126 {
		t.Fatalf("exit %d, want 126; stderr:\n%.2000s", code, stderr.String())
	}
	want := regexp.MustCompile(`^cronlock: true: cannot execute: argument list too long: [0-9.]+ MiB of arguments and environment, over the 2 MiB Linux takes here \(a quarter of ulimit -s\); pass large data in a file or on stdin \(error, 1 try, [0-9.]+[µm]?s\)\n$`)
	if !want.MatchString(stderr.String()) {
		t.Errorf("stderr %.2000q, want one line matching %s", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %.200q, want nothing", stdout.String())
	}

	rows := c.history("argmax")
	if len(rows) != 2 {
		t.Fatalf("%d history rows, want 2 (the holder's and the failed run's)", len(rows))
	}
	r := rows[0] // newest first
	if r.Status != "error" || r.ExitCode != nil || !strings.Contains(r.Error, "true: cannot execute: argument list too long: ") ||
		len(r.Command) != 31 || r.Command[0] != "true" {
		t.Errorf("history row: status %s, exit code %v, error %q, %d words of command; want error, none, the E2BIG line, 31",
			r.Status, r.ExitCode, r.Error, len(r.Command))
	}
}
