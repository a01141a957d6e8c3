package child

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often the leftover hunt looks for processes again while it waits for
// them to die: orphans are reparented to cronlock at any time, and a process group that only
// holds processes that are not cronlock's children sends cronlock no SIGCHLD.
const pollInterval = 20 * time.Millisecond

// Supervise starts job and supervises it until every process of the job is gone: the main
// child, the rest of its process group, and every process reparented to cronlock meanwhile
// (cronlock is a child subreaper). Leftovers get SIGTERM when the main child ends, and
// SIGKILL after Job.Grace. It returns then, without waiting for a slow reader of cronlock's
// stdout or stderr to take the rest of the job's output: the caller releases the lock, then
// calls Result.WaitOutput, which also fills in Output, Streams and OutputErr.
//
// sig (from NotifySignals; nil = no forwarding) is read for the run: stop signals are
// forwarded to the job's process group and start the grace period; SIGUSR1 and SIGUSR2 are
// just forwarded. lease (nil = no lock to watch) reports a lost lock: the job is stopped,
// or with Job.ContinueOnLoss let run, and Reason is ReasonLockLost. started, when not nil,
// is called with the child's pid once it runs.
//
// While Supervise runs it owns all reaping of cronlock's children (wait4(-1)): nothing else
// in the process may start and wait for children meanwhile. It never panics; a child that
// could not be started gives Started=false and a *StartError.
func Supervise(ctx context.Context, job Job, sig *Signals, lease Watch, started func(pid int)) (res Result) {
	res.ExitCode = -1
	if len(job.Argv) == 0 || job.Argv[0] == "" {
		res.StartErr = &StartError{Kind: NotFound, Name: "", Err: errors.New("empty command")}
		return res
	}
	if sig == nil {
		// Reaping still needs SIGCHLD; there is just nothing to forward.
		sig = newSignals(nil)
		defer signal.Stop(sig.chld)
		setSubreaper()
	}
	s := &supervisor{job: job, sig: sig, lease: lease}
	defer func() {
		// A bug must not leave the job running or crash cronlock mid-run.
		if p := recover(); p != nil {
			s.panicked(p)
			res = s.res
		}
	}()
	s.run(ctx, started)
	return s.res
}

type supervisor struct {
	job   Job
	sig   *Signals
	lease Watch // nil: no lock to watch

	res      Result
	pgid     int
	self     int
	start    time.Time
	decided  bool      // res.Reason is set by the first event
	mainDone bool      // the main child is reaped
	killAt   time.Time // SIGKILL deadline of the group; zero when no stop is under way
	killed   bool      // SIGKILL went out to the group
	// others are the job's processes outside its process group (a setsid) or reparented
	// to cronlock, each with its own SIGKILL deadline, counted from when the hunt found it.
	others map[int]time.Time
	// guardStale: others changed since the guard was last told; guardAt: when it was.
	guardStale bool
	guardAt    time.Time
	// lastCall is the latest instant any process of the job may live: the end of a lost
	// lease, or one grace after the group's SIGKILL; zero while neither happened.
	lastCall time.Time
	fg       int  // terminal fd handed to the child's group; -1 when none
	locked   bool // the goroutine is locked to the thread that forked the child

	out *outputs // the job's output when Job.Capture > 0; nil otherwise
}

func (s *supervisor) run(ctx context.Context, started func(pid int)) {
	s.self = os.Getpid()
	s.fg = -1
	s.others = map[int]time.Time{}
	jobctl, stopJobctl := s.sig.jobControl()
	defer stopJobctl()
	ok := s.startChild()
	if s.locked {
		defer runtime.UnlockOSThread()
	}
	if !ok {
		return
	}
	if started != nil {
		started(s.res.PID)
	}

	var timeoutC <-chan time.Time
	if s.job.Timeout > 0 {
		t := time.NewTimer(s.job.Timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	hungC := s.job.Hung
	killT := time.NewTimer(time.Hour)
	killT.Stop()
	defer killT.Stop()
	var pollC <-chan time.Time // ticks only while the hunt is on (see hunting)
	var loss <-chan Stop
	if s.lease != nil {
		loss = s.lease.Lost()
	}
	sigC := s.sig.C
	done := ctx.Done()

	armKill := func() {
		if s.killAt.IsZero() {
			return // no stop under way (a loss the job may continue through)
		}
		if d := time.Until(s.killAt); d > 0 {
			killT.Reset(d)
		} else {
			s.kill()
		}
	}

	s.reap()
	stopped := false // the leftovers were told to stop once the main child was gone
	for !s.finished() {
		if s.mainDone && !stopped {
			// The main child is gone: what is left of the job is stopped now.
			stopped = true
			s.stop(s.job.Grace)
			armKill()
			s.hunt()
		}
		if pollC == nil && s.hunting() {
			// The hunt looks again and again: a process may leave the group (setsid) or
			// be reparented to cronlock at any time, and its SIGKILL deadline comes.
			poll := time.NewTicker(pollInterval)
			defer poll.Stop()
			pollC = poll.C
			s.hunt()
		}
		select {
		case <-s.sig.chld:
			s.reap()
		case <-pollC:
			s.reap()
			s.hunt()
		case sg := <-jobctl:
			// Passed on as it is: a job that handles SIGTSTP decides what pausing means.
			_ = unix.Kill(-s.pgid, sg.(syscall.Signal))
		case sg := <-sigC:
			s.forward(sg)
			if IsStopSignal(sg) {
				if !s.decided && !s.mainDone {
					s.decide(ReasonSignal)
					s.res.StopSignal = sg
				}
				s.deadline(s.job.Grace)
				armKill()
				s.hunt()
			}
		case l, ok := <-loss:
			loss = nil
			if !ok {
				continue // the keeper ended without a loss
			}
			s.lockLost(l)
			armKill()
			s.hunt()
		case <-hungC:
			hungC = nil
			if !s.mainDone {
				if !s.decided {
					s.decide(ReasonTimeout)
					s.res.Hung = true
				}
				s.stop(s.job.Grace)
				armKill()
				s.hunt()
			}
		case <-timeoutC:
			if !s.mainDone {
				if !s.decided {
					s.decide(ReasonTimeout)
				}
				s.stop(s.job.Grace)
				armKill()
				s.hunt()
			}
		case <-done:
			done = nil
			if !s.decided && !s.mainDone {
				s.decide(ReasonCanceled)
			}
			s.stop(s.job.Grace)
			armKill()
			s.hunt()
		case <-killT.C:
			s.kill()
		}
	}
	s.finish()
}

// reap collects every child that has ended. The main child's status becomes the result;
// the guard and any other child are just reaped.
func (s *supervisor) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WUNTRACED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ws.Stopped() {
			if pid == s.res.PID && !s.mainDone {
				s.suspend()
			}
			continue
		}
		switch pid {
		case s.res.PID:
			if s.mainDone {
				continue
			}
			s.mainDone = true
			s.res.Duration = time.Since(s.start)
			if ws.Signaled() {
				s.res.Signal = ws.Signal()
				s.res.ExitCode = -1
			} else {
				s.res.ExitCode = ws.ExitStatus()
			}
			if !s.decided {
				if l, lost := s.leaseCheck(); lost {
					// The lease ran out before this end was seen (cronlock was frozen):
					// the job may have run beside another holder.
					s.lockLost(l)
				} else {
					s.decide(ReasonExited)
				}
			}
		case s.job.Guard.PID():
			// The guard: reaped, and nothing more to do.
		default:
			if _, known := s.others[pid]; known {
				delete(s.others, pid)
				s.guardStale = true
			}
		}
	}
}

// leaseCheck asks the keeper whether the lease has run out by now.
func (s *supervisor) leaseCheck() (Stop, bool) {
	if s.lease == nil {
		return Stop{}, false
	}
	return s.lease.Check()
}

// lockLost takes in a loss the keeper reported: it decides the run unless an earlier
// event did, and stops the job (unless it may continue) so that even leftovers are dead
// before the lease ends. The caller arms the SIGKILL deadline.
func (s *supervisor) lockLost(l Stop) {
	s.res.LossErr = l.Err
	if !s.decided {
		s.decide(ReasonLockLost)
	}
	if !s.job.ContinueOnLoss {
		s.stop(l.Grace)
		s.endBy(time.Now().Add(max(l.Grace, 0)))
	}
}

// endBy brings lastCall forward to at: no process of the job may live past it.
func (s *supervisor) endBy(at time.Time) {
	if s.lastCall.IsZero() || at.Before(s.lastCall) {
		s.lastCall = at
	}
}

func (s *supervisor) decide(r Reason) {
	s.decided = true
	s.res.Reason = r
}

// forward passes a received signal on to the job's process group. A stop signal is
// followed by SIGCONT: a stopped job (kill -STOP, or Ctrl-Z) could not act on it until
// its grace ran out.
func (s *supervisor) forward(sg os.Signal) {
	if n, ok := sg.(syscall.Signal); ok {
		_ = unix.Kill(-s.pgid, n)
		if IsStopSignal(sg) {
			_ = unix.Kill(-s.pgid, unix.SIGCONT)
		}
	}
}

// deadline moves the SIGKILL deadline to now+grace unless it is already earlier.
func (s *supervisor) deadline(grace time.Duration) {
	at := time.Now().Add(max(grace, 0))
	if s.killAt.IsZero() || at.Before(s.killAt) {
		s.killAt = at
	}
}

// stop sends SIGTERM (and SIGCONT, so a stopped process can act on it) to the job's group
// and sets the group's SIGKILL deadline. The processes outside the group get theirs from
// the hunt, which the caller starts.
func (s *supervisor) stop(grace time.Duration) {
	if !s.killed {
		_ = unix.Kill(-s.pgid, unix.SIGTERM)
		_ = unix.Kill(-s.pgid, unix.SIGCONT)
	}
	s.deadline(grace)
}

// kill sends SIGKILL to the group and to every process of the job outside it that the
// hunt knows; one grace later at most, nothing of the job may live (lastCall), however
// late a process escaped.
func (s *supervisor) kill() {
	s.killed = true
	s.endBy(time.Now().Add(max(s.job.Grace, 0)))
	_ = unix.Kill(-s.pgid, unix.SIGKILL)
	for pid := range s.others {
		s.others[pid] = time.Time{}
	}
	s.hunt()
}

// finish tells the output relays to end, gives the terminal back and disarms the guard.
// It does not wait for the relays: passing on what a slow reader has not taken yet happens
// after the lock is released (Result.WaitOutput).
func (s *supervisor) finish() {
	// Every process of the job is gone, so only something outside the job can still hold
	// the pipes: take what they hold now and stop.
	if s.out != nil {
		s.out.jobGone()
		s.res.out = s.out
	}
	s.restoreForeground()
	s.job.Guard.Disarm()
}

// panicked is the safety net of a bug: kill the job, give the terminal back, report.
func (s *supervisor) panicked(p any) {
	if s.pgid > 0 {
		_ = unix.Kill(-s.pgid, unix.SIGKILL)
	}
	if s.out != nil {
		s.out.abandon()
		s.res.out = s.out
	}
	s.restoreForeground()
	s.job.Guard.Disarm()
	if s.res.Started {
		s.res.OutputErr = fmt.Errorf("child: internal error while supervising: %v", p)
	} else {
		s.res.StartErr = &StartError{Kind: StartFailed, Name: firstArg(s.job.Argv), Err: fmt.Errorf("internal error: %v", p)}
	}
}

func firstArg(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}
