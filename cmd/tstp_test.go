package cmd

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/procfs"
)

// TestTstpPausesTheJobNotCronlock: `kill -TSTP` of cronlock without a terminal pauses the
// job, while cronlock runs on to keep its lock; `kill -CONT` resumes the job. Stopping
// cronlock alone left the job running with nobody renewing the lock.
func TestTstpPausesTheJobNotCronlock(t *testing.T) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "job.pid")
	cmd := c.command("run", "-k", "tstp", "--", "sh", "-c",
		`echo $$ > `+pidf+`; i=0; while [ $i -lt 10 ]; do sleep 0.05; i=$((i+1)); done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	pid := proctest.ReadPID(t, pidf)
	if err := cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	waitState(t, pid, 'T', "the job after SIGTSTP to cronlock")
	if st, err := procfs.ReadStat(cmd.Process.Pid); err != nil || st.State == 'T' {
		t.Errorf("cronlock state %q (%v): it must keep running to renew the lock", st.State, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := c.exitCode(cmd.Wait()); code != 0 {
		t.Fatalf("exit %d, want the resumed job's 0", code)
	}
}

// waitState waits up to 10 s for pid's state (as in /proc/PID/stat) to be want.
func waitState(t *testing.T, pid int, want byte, what string) {
	t.Helper()
	var got byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := procfs.ReadStat(pid)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got = st.State; got == want {
			return
		}
	}
	t.Fatalf("%s: state %q, want %q", what, got, want)
}
