package child

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals cronlock relays to the job's process group.
var forwarded = []syscall.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2,
}

// keptIgnored are the signals besides the forwarded ones whose inherited SIG_IGN the job
// keeps (the runtime would otherwise hand it their default action). SIGCHLD is not among
// them: cronlock reaps the job, and SIGURG and SIGPROF belong to the runtime.
var keptIgnored = []syscall.Signal{
	syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM,
}

// wasIgnored reports whether sig was ignored when cronlock started.
func wasIgnored(sig syscall.Signal) bool { return signal.Ignored(sig) || ignoredAtExec(sig) }

// Signals is cronlock's signal handling, registered once for the life of the process
// (signal.Notify and signal.Stop are costly, and a signal that arrives between a Stop and a
// new Notify would be lost).
//
// C delivers SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2, except those that were
// ignored when cronlock started: those are left ignored so the child inherits SIG_IGN (nohup).
// Before the child runs, the caller reads C itself (a stop signal then means "interrupted");
// while Supervise runs, Supervise reads C and forwards what it receives.
type Signals struct {
	// C receives the forwarded signals. It is buffered; a burst beyond its size is dropped.
	C <-chan os.Signal

	c    chan os.Signal // C, writable, for tests
	chld chan os.Signal // SIGCHLD: something may be ready to reap
	pipe chan os.Signal // SIGPIPE sink, never read

	tstpIgnored bool // SIGTSTP was ignored when cronlock started: it stays so for the job
}

// NotifySignals registers cronlock's signal handling. Call it once, at start-up, before the
// lock is taken. It also makes cronlock a child subreaper (PR_SET_CHILD_SUBREAPER), so that
// processes the job leaves behind are reparented to cronlock, which then stops and reaps them.
//
// SIGPIPE is caught (not ignored, which the child would inherit) so that a write to a closed
// stdout or stderr fails with EPIPE instead of killing cronlock: the run must go on.
//
// A signal that was ignored when cronlock started (nohup, a shell's `cmd &`, cron) is set
// back to SIG_IGN and neither caught nor forwarded: the job inherits SIG_IGN, as it would
// without cronlock. Go's runtime replaces most inherited ignores with its own handler at
// start-up (ignoredAtExec), and a caught signal is reset to the default in the child.
func NotifySignals() *Signals {
	s := newSignals(make(chan os.Signal, 16))
	for _, sg := range forwarded {
		if wasIgnored(sg) {
			signal.Ignore(sg)
			continue
		}
		signal.Notify(s.c, sg)
	}
	for _, sg := range keptIgnored {
		if wasIgnored(sg) {
			signal.Ignore(sg)
		}
	}
	if !wasIgnored(syscall.SIGPIPE) {
		signal.Notify(s.pipe, syscall.SIGPIPE)
	}
	setSubreaper()
	return s
}

// newSignals returns Signals that deliver c and SIGCHLD. Tests use it to hand Supervise
// signals without sending real ones to the test process.
func newSignals(c chan os.Signal) *Signals {
	s := &Signals{C: c, c: c, chld: make(chan os.Signal, 1), pipe: make(chan os.Signal, 1),
		tstpIgnored: wasIgnored(syscall.SIGTSTP)}
	signal.Notify(s.chld, syscall.SIGCHLD)
	return s
}

// setSubreaper makes orphaned descendants reparent to this process. A failure (very old
// kernel) only weakens the leftover hunt to the job's process group, so it is not reported.
func setSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// IsStopSignal reports whether sig asks cronlock to stop the job: SIGINT, SIGTERM, SIGHUP
// or SIGQUIT. SIGUSR1 and SIGUSR2 are only passed on.
func IsStopSignal(sig os.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}

// jobControl catches SIGTSTP and SIGCONT while a job runs, for the supervisor to pass on
// to the job's group: `kill -TSTP` meant to pause a job would otherwise stop cronlock
// alone, leaving the job running with nobody renewing its lock (another host then takes
// it) and no --timeout counting. A Ctrl-Z on a terminal goes to the job's group, not to
// cronlock, and is unchanged. Outside a job the default action holds (a waiting cronlock
// stops). stop ends the catching.
func (s *Signals) jobControl() (c <-chan os.Signal, stop func()) {
	if s.tstpIgnored {
		return nil, func() {}
	}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTSTP, syscall.SIGCONT)
	return ch, func() { signal.Stop(ch) }
}
