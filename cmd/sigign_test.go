package cmd

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestIgnoredSignalsStayIgnored: signals that cronlock's parent ignored (a shell's
// `trap "" SIG`, as nohup, a non-interactive shell's `cmd &` or cron leave them) are ignored
// in the job too, whichever of them Go's runtime would have replaced with its own handler;
// the others reach the job with their default action.
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	c := newCLI(t, "")
	ignored := []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
		syscall.SIGUSR1, syscall.SIGPIPE, syscall.SIGXFSZ}
	notIgnored := []syscall.Signal{syscall.SIGUSR2, syscall.SIGALRM}
	sigIgn := func(trap string) uint64 {
		t.Helper()
		script := `exec "$0" "$@"`
		if trap != "" {
			script = `trap '' ` + trap + `; ` + script
		}
		cmd := exec.Command("sh", "-c", script, cronlockBin, "run", "-k", "sigign", "--", "grep", "^SigIgn:", "/proc/self/status")
		cmd.Env, cmd.Dir = c.env, c.dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("trap %q: %v, output %q", trap, err, out)
		}
		hex := strings.TrimSpace(strings.TrimPrefix(string(out), "SigIgn:"))
		mask, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			t.Fatalf("the job's SigIgn line %q: %v", out, err)
		}
		return mask
	}
	bit := func(s syscall.Signal) uint64 { return 1 << (uint(s) - 1) }

	mask := sigIgn("HUP INT QUIT TERM USR1 PIPE XFSZ")
	for _, s := range ignored {
		if mask&bit(s) == 0 {
			t.Errorf("%v ignored by cronlock's parent is not ignored in the job (SigIgn %016x)", s, mask)
		}
	}
	for _, s := range notIgnored {
		if mask&bit(s) != 0 {
			t.Errorf("%v is ignored in the job though its parent did not ignore it (SigIgn %016x)", s, mask)
		}
	}
	// Without the trap none is ignored: cronlock catches them and the job gets the default.
	mask = sigIgn("")
	for _, s := range append(ignored, notIgnored...) {
		if mask&bit(s) != 0 {
			t.Errorf("%v is ignored in the job though nothing ignored it (SigIgn %016x)", s, mask)
		}
	}
}
