package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/child"
	"cronlock/internal/proctest"
)

// TestGuardKillsHuntedEscapee: the main child has ended and left a setsid process that
// ignores SIGTERM; cronlock, waiting out its grace, is SIGKILLed. The guard must take the
// escapee with it: the lock is free at once, and the next run would run beside it.
func TestGuardKillsHuntedEscapee(t *testing.T) {
	c := newCLI(t, "")
	pidf, termed, later := filepath.Join(c.dir, "escapee.pid"), filepath.Join(c.dir, "termed"), filepath.Join(c.dir, "later")
	// The escapee marks the hunt's SIGTERM with shell builtins only: an external touch in
	// its trap would be one more of the job's processes outside the group, which the next
	// look of the hunt (every 20 ms) gives its own SIGTERM, often before it made the file.
	// Its trap is set before its pid is written, so before the hunt can begin.
	//
	// The hunt that finds the escapee tells the guard right after its signals (armGuard).
	// A sleep started once the trap has run was not there for that look, so a SIGTERM that
	// ends such a sleep (143) comes from a later look: "later" appears only once the guard
	// has been told.
	cmd := c.command("run", "-k", "hunted", "--grace", "60s", "--", "sh", "-c",
		`setsid sh -c 'trap ": > `+termed+`" TERM; echo $$ > `+pidf+`
			while :; do t=; [ -e `+termed+` ] && t=1; sleep 0.1; [ $? = 143 ] && [ -n "$t" ] && : > `+later+`; done' &
		while [ ! -s `+pidf+` ]; do sleep 0.01; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, pidf)
	t.Cleanup(func() { killIfAlive(pid) })
	proctest.WaitFile(t, termed)
	proctest.WaitFile(t, later)
	cmd.Process.Kill()
	cmd.Wait()
	proctest.WaitDead(t, pid, 5*time.Second, "escapee found by the hunt, after cronlock was SIGKILLed")
}

// TestGuardCoversLaterTries: cronlock SIGKILLed during a second try kills that try's
// process group, as it does the first's.
func TestGuardCoversLaterTries(t *testing.T) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "try2.pid")
	cmd := c.command("run", "-k", "try2", "--retries", "1", "--retry-delay", "1ms", "--", "sh", "-c",
		`[ "$CRONLOCK_TRY" = 1 ] && exit 1; sh -c 'echo $$ > `+pidf+`; exec sleep 60' | cat`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, pidf)
	t.Cleanup(func() { killIfAlive(pid) })
	cmd.Process.Kill()
	cmd.Wait()
	proctest.WaitDead(t, pid, 5*time.Second, "the second try's pipeline, after cronlock was SIGKILLed")
}

// killIfAlive keeps a failed test from leaving its process running for a minute.
func killIfAlive(pid int) {
	if !proctest.Dead(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestGuardWithoutShell: on a machine without /bin/sh (a distroless image; here a mount
// namespace in which /bin/sh is a file that cannot be executed) the guard is cronlock's
// own binary, and still kills the job's pipeline once cronlock is SIGKILLed.
func TestGuardWithoutShell(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to hide /bin/sh in a mount namespace")
		}
		t.Skip("needs root: hides /bin/sh in a mount namespace")
	}
	c := newCLI(t, "")
	noexec, pidf := filepath.Join(c.dir, "noexec"), filepath.Join(c.dir, "gc.pid")
	if err := os.WriteFile(noexec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// unshare and bash exec each other and then cronlock: the process started is cronlock.
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "/usr/bin/bash", "-c",
		`mount --bind "$1" /bin/sh && exec "$2" run -k noshell -- /usr/bin/bash -c "$3"`, "bash",
		noexec, cronlockBin, `/usr/bin/bash -c 'echo $$ > `+pidf+`; exec sleep 60' | cat`)
	cmd.Env, cmd.Dir = c.env, c.dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, pidf)
	t.Cleanup(func() { killIfAlive(pid) })
	// The guard is forked beside the job: wait for cronlock's child that is its binary.
	var guard int
	waitUntil(t, 5*time.Second, "cronlock's own binary as the guard", func() bool {
		guard = childWithArg(cmd.Process.Pid, child.GuardArg)
		return guard > 0
	})
	cmd.Process.Kill()
	cmd.Wait()
	proctest.WaitDead(t, pid, 5*time.Second, "the job's pipeline, after cronlock without /bin/sh was SIGKILLed")
	if strings.Contains(errb.String(), "no guard") {
		t.Errorf("stderr %q says there is no guard", errb.String())
	}
}

// childWithArg is a child process of parent with arg in its command line; 0 = none.
func childWithArg(parent int, arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The parent is the second field after the command's closing parenthesis.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if string(a) == arg {
				return pid
			}
		}
	}
	return 0
}
