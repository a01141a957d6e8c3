package child

import (
	"bufio"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// IsGuard reports whether args (os.Args) start cronlock's binary as the guard process.
func IsGuard(args []string) bool {
	return len(args) == 2 && args[1] == GuardArg
}

// RunGuard is the guard process without a shell: guardScript's loop in Go. It keeps the
// targets of the last "arm" line read on stdin (none after "disarm"), exits on "done",
// and at end-of-file (cronlock died) kills them twice, 20 ms apart, then until the group
// is gone, holding its fd 3 (a local lock file, Keep) open until then. It returns the
// exit code.
func RunGuard() int {
	// The same signals as the script's trap: a Ctrl-C or a stop meant for cronlock's
	// group, or a hang-up, must not end the guard.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE, syscall.SIGUSR1, syscall.SIGUSR2)
	var targets []int
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, maxArmLine), maxArmLine)
	for in.Scan() {
		switch line := in.Text(); {
		case line == "done":
			return 0
		case line == "disarm":
			targets = nil
		case strings.HasPrefix(line, "arm "):
			targets = parseTargets(strings.TrimPrefix(line, "arm "))
		}
	}
	if len(targets) == 0 {
		return 0
	}
	group, pids := targets[0], targets[1:]
	kill := func() {
		unix.Kill(-group, unix.SIGKILL)
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
	}
	kill()
	time.Sleep(20 * time.Millisecond)
	kill()
	for unix.Kill(-group, 0) == nil {
		time.Sleep(20 * time.Millisecond)
		unix.Kill(-group, unix.SIGKILL)
	}
	return 0
}

// parseTargets reads "PGID PID…"; a line with anything else arms nothing (only cronlock
// writes to the guard, so that is a bug, and killing a guess would be worse).
func parseTargets(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 1 {
			return nil
		}
		out = append(out, n)
	}
	return out
}
