package cmd

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
