package lockrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Job is one command for Supervise to run.
type Job struct {
	// Argv is the command and its arguments, executed directly, never through a shell.
	// Argv[0] without a slash is looked up in the PATH of Env (or cronlock's PATH when Env
	// has none).
	Argv []string
	// Env is the child's environment; nil means cronlock's own.
	Env []string
	// Dir is the child's working directory; "" means cronlock's.
	Dir string
	// Stdin, Stdout and Stderr are cronlock's own files, handed to the child. A nil file
	// means the null device.
	Stdin, Stdout, Stderr *os.File
	// Capture is how many bytes of the combined output tail to keep in Result.Output. With 0
	// the child writes to Stdout and Stderr itself; otherwise cronlock relays its output
	// through pipes.
	Capture int
	// Grace is the time between SIGTERM and SIGKILL whenever the job is stopped. 0 sends
	// SIGKILL right after SIGTERM.
	Grace time.Duration
	// Timeout is the longest run time; 0 means none.
	Timeout time.Duration
	// Foreground makes the child's process group the foreground group of the terminal on
	// Stdin for the run, and gives the terminal back to cronlock's group afterwards. It is
	// ignored when Stdin is not a terminal or cronlock is not in its foreground group.
	Foreground bool
	// Guard, when not nil, is armed with the job's process group once the child has started
	// and dismissed (Done) when every process of the job is gone.
	Guard *Guard
	// ContinueOnLoss lets the job run on when the lock is lost (--on-lock-lost continue);
	// the run's Reason is ReasonLockLost still. By default the job is stopped.
	ContinueOnLoss bool
}

// LockLoss is sent by the renewal keeper when the lock is lost or about to be: Supervise
// stops the job with Grace between SIGTERM and SIGKILL.
type LockLoss struct {
	Grace time.Duration
	Err   error
}

// LeaseWatch is what Supervise learns of the lock from its keeper (Keeper), which alone
// decides when a lease is lost.
type LeaseWatch interface {
	// Lost delivers at most one LockLoss while the job runs.
	Lost() <-chan LockLoss
	// Check reports a loss when the lease has already run out at this instant; Supervise
	// asks when it sees the main child's end, which counts as the job's own end only if
	// the lease still held then.
	Check() (LockLoss, bool)
}

// Reason says which event decided the outcome of a run: the first of them wins.
type Reason int

const (
	// ReasonExited: the child ended by itself (exit or a signal cronlock did not send).
	ReasonExited Reason = iota
	// ReasonTimeout: Job.Timeout passed and cronlock stopped the job.
	ReasonTimeout
	// ReasonLockLost: the lock was lost; the job was stopped unless the caller asked to
	// let it continue.
	ReasonLockLost
	// ReasonSignal: cronlock received a stop signal and forwarded it (Result.StopSignal).
	ReasonSignal
	// ReasonCanceled: the context given to Supervise was canceled and the job was stopped.
	ReasonCanceled
)

func (r Reason) String() string {
	switch r {
	case ReasonExited:
		return "exited"
	case ReasonTimeout:
		return "timeout"
	case ReasonLockLost:
		return "lock lost"
	case ReasonSignal:
		return "signal"
	case ReasonCanceled:
		return "canceled"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Result is what Supervise observed.
type Result struct {
	Reason Reason
	// ExitCode is the child's exit code; -1 when it was killed by a signal or not started.
	ExitCode int
	// Signal is the signal that ended the child; 0 if none.
	Signal syscall.Signal
	// StopSignal is, for ReasonSignal, the forwarded stop signal that decided the outcome.
	StopSignal os.Signal
	// LossErr is the error of the LockLoss that arrived, if one did (whatever the Reason).
	LossErr error
	// Output is the bounded tail of the combined stdout and stderr, in arrival order; nil
	// when Job.Capture is 0.
	Output []byte
	// Streams says which stream each part of Output came from: oldest first, consecutive
	// segments of different streams, lengths summing to len(Output). It is nil when Output
	// is empty or unmarked: Job.Capture is 0, or Job.Stdout and Job.Stderr are the same file
	// or pipe, so the child got one pipe for both and its streams cannot be told apart.
	Streams []Segment
	// OutputErr is the first error writing the job's output to cronlock's own stdout or
	// stderr (EPIPE…). It did not end the run; the tail was kept regardless.
	OutputErr error
	// Started is false when the child could not be started; StartErr then says why.
	Started bool
	// StartErr is a *StartError when Started is false.
	StartErr error
	// PID is the child's process id (also its process group id).
	PID int
	// Duration is the time from start to the end of the main child.
	Duration time.Duration
}

// StartErrorKind tells why a child could not be started.
type StartErrorKind int

const (
	// NotFound: no such command (exit code 127).
	NotFound StartErrorKind = iota + 1
	// NotExecutable: the command exists but cannot be executed (exit code 126).
	NotExecutable
	// StartFailed: cronlock could not start the child for another reason: no more
	// processes, a bad Dir, a pipe that could not be made (exit code 125).
	StartFailed
)

// StartError reports a child that could not be started. Its message has no "cronlock: "
// prefix; the caller adds it.
type StartError struct {
	Kind StartErrorKind
	Name string // the command as given
	Path string // the file found, "" when none
	Err  error
}

func (e *StartError) Error() string {
	switch e.Kind {
	case NotFound:
		if e.Path != "" {
			return fmt.Sprintf("%s: no such file or directory", e.Name)
		}
		return fmt.Sprintf("%s: command not found", e.Name)
	case NotExecutable:
		return fmt.Sprintf("%s: cannot execute: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("%s: cannot start: %v", e.Name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// ExitCode is the exit code cronlock uses for the error: 127, 126 or 125.
func (e *StartError) ExitCode() int {
	switch e.Kind {
	case NotFound:
		return 127
	case NotExecutable:
		return 126
	}
	return 125
}

// pollInterval is how often the leftover hunt looks for processes again while it waits for
// them to die: orphans are reparented to cronlock at any time, and a process group that only
// holds processes that are not cronlock's children sends cronlock no SIGCHLD.
const pollInterval = 20 * time.Millisecond

// Supervise starts job and supervises it until every process of the job is gone: the main
// child, the rest of its process group, and every process reparented to cronlock meanwhile
// (cronlock is a child subreaper). Leftovers get SIGTERM when the main child ends, and
// SIGKILL after Job.Grace.
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
func Supervise(ctx context.Context, job Job, sig *Signals, lease LeaseWatch, started func(pid int)) (res Result) {
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
	lease LeaseWatch // nil: no lock to watch

	res      Result
	pgid     int
	self     int
	start    time.Time
	decided  bool      // res.Reason is set by the first event
	mainDone bool      // the main child is reaped
	killAt   time.Time // SIGKILL deadline; zero when no stop is under way
	killed   bool      // SIGKILL went out to the group
	others   map[int]bool
	relays   []*relay
	tail     *tail
	fg       int  // terminal fd handed to the child's group; -1 when none
	locked   bool // the goroutine is locked to the thread that forked the child
}

func (s *supervisor) run(ctx context.Context, started func(pid int)) {
	s.self = os.Getpid()
	s.fg = -1
	s.others = map[int]bool{}
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
	killT := time.NewTimer(time.Hour)
	killT.Stop()
	defer killT.Stop()
	var pollC <-chan time.Time // ticks only once the main child is gone
	var loss <-chan LockLoss
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
	for !s.finished() {
		if s.mainDone && pollC == nil {
			// The main child is gone: what is left of the job is stopped now.
			s.stop(s.job.Grace, true)
			armKill()
			poll := time.NewTicker(pollInterval)
			defer poll.Stop()
			pollC = poll.C
			s.hunt()
			continue
		}
		select {
		case <-s.sig.chld:
			s.reap()
		case <-pollC:
			s.reap()
			s.hunt()
		case sg := <-sigC:
			s.forward(sg)
			if IsStopSignal(sg) {
				if !s.decided && !s.mainDone {
					s.decide(ReasonSignal)
					s.res.StopSignal = sg
				}
				s.deadline(s.job.Grace)
				armKill()
			}
		case l, ok := <-loss:
			loss = nil
			if !ok {
				continue // the keeper ended without a loss
			}
			s.lockLost(l)
			armKill()
		case <-timeoutC:
			if !s.mainDone {
				if !s.decided {
					s.decide(ReasonTimeout)
				}
				s.stop(s.job.Grace, false)
				armKill()
			}
		case <-done:
			done = nil
			if !s.decided && !s.mainDone {
				s.decide(ReasonCanceled)
			}
			s.stop(s.job.Grace, false)
			armKill()
		case <-killT.C:
			s.kill()
		}
	}
	s.finish()
}

// startChild resolves the command, makes the pipes and starts the child on a locked OS
// thread that stays alive until the run ends: Pdeathsig fires when the thread that forked
// the child exits, not when the process does.
func (s *supervisor) startChild() bool {
	job := s.job
	path, serr := lookCommand(job.Argv[0], job.Env, job.Dir)
	if serr != nil {
		s.res.StartErr = serr
		return false
	}
	fail := func(err error) bool {
		s.res.StartErr = startErrorFor(job.Argv[0], path, err)
		return false
	}

	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	var null *os.File
	nullFile := func() (*os.File, error) {
		if null == nil {
			f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				return nil, err
			}
			null = f
			closeAfter = append(closeAfter, f)
		}
		return null, nil
	}
	orNull := func(f *os.File) (*os.File, error) {
		if f != nil {
			return f, nil
		}
		return nullFile()
	}
	stdin, err := orNull(job.Stdin)
	if err != nil {
		return fail(err)
	}
	stdout, stderr := job.Stdout, job.Stderr
	var readers []*os.File
	var outFds []int
	if job.Capture > 0 {
		// One pipe for both streams keeps their order but not which is which: that tail
		// is left unmarked (Result.Streams nil) rather than claim stderr lines as stdout.
		shared := sameFile(job.Stdout, job.Stderr)
		s.tail = newTail(job.Capture, !shared)
		fdOf := func(f *os.File) int {
			if f == nil {
				return -1
			}
			return int(f.Fd())
		}
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		growPipe(r)
		closeAfter = append(closeAfter, w)
		readers, outFds = append(readers, r), append(outFds, fdOf(job.Stdout))
		if shared {
			stdout, stderr = w, w
		} else {
			r2, w2, err := os.Pipe()
			if err != nil {
				r.Close()
				return fail(err)
			}
			growPipe(r2)
			closeAfter = append(closeAfter, w2)
			readers, outFds = append(readers, r2), append(outFds, fdOf(job.Stderr))
			stdout, stderr = w, w2
		}
	} else {
		if stdout, err = orNull(stdout); err != nil {
			return fail(err)
		}
		if stderr, err = orNull(stderr); err != nil {
			return fail(err)
		}
	}
	closeReaders := func() {
		for _, r := range readers {
			r.Close()
		}
	}

	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if job.Foreground && job.Stdin != nil {
		if fd := int(job.Stdin.Fd()); isForegroundTTY(fd) {
			sys.Foreground, sys.Ctty = true, fd
			s.fg = fd
		}
	}
	env := job.Env
	if env == nil {
		env = os.Environ()
	}
	attr := &syscall.ProcAttr{
		Dir:   job.Dir,
		Env:   env,
		Files: []uintptr{stdin.Fd(), stdout.Fd(), stderr.Fd()},
		Sys:   sys,
	}

	// Pdeathsig fires when the thread that forked the child exits, not the process: the
	// fork happens on this goroutine's thread, locked to it until the run is over (run
	// unlocks it when every process of the job is gone).
	runtime.LockOSThread()
	s.locked = true
	pid, err := syscall.ForkExec(path, job.Argv, attr)
	if err != nil && sys.Foreground {
		// The terminal could not be handed over (a race with the shell's job control):
		// run in the background rather than not at all.
		sys.Foreground, sys.Ctty = false, 0
		s.fg = -1
		pid, err = syscall.ForkExec(path, job.Argv, attr)
	}
	if err != nil {
		closeReaders()
		s.fg = -1
		return fail(err)
	}
	s.start = time.Now()
	s.res.Started, s.res.PID, s.pgid = true, pid, pid
	// Arm before anything else can go wrong: from here on, cronlock's death must take
	// the whole group with it.
	// An error means the guard died; the run goes on without it (Done copes).
	_ = job.Guard.Arm(s.pgid)
	if s.fg >= 0 {
		// cronlock now writes to a terminal it is in the background of (relayed output,
		// messages): with `stty tostop` that would stop cronlock. Ignored only now, after
		// the fork, so that the child does not inherit SIG_IGN.
		signal.Ignore(syscall.SIGTTOU)
	}
	for i, r := range readers {
		rl := newRelay(r, outFds[i], s.tail, []Stream{StreamStdout, StreamStderr}[i])
		s.relays = append(s.relays, rl)
		go rl.run()
	}
	return true
}

// reap collects every child that has ended. The main child's status becomes the result;
// the guard and any other child are just reaped.
func (s *supervisor) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
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
			s.job.Guard.markReaped()
		default:
			delete(s.others, pid)
		}
	}
}

// leaseCheck asks the keeper whether the lease has run out by now.
func (s *supervisor) leaseCheck() (LockLoss, bool) {
	if s.lease == nil {
		return LockLoss{}, false
	}
	return s.lease.Check()
}

// lockLost takes in a loss the keeper reported: it decides the run unless an earlier
// event did, and stops the job (unless it may continue) so that even leftovers are dead
// before the lease ends. The caller arms the SIGKILL deadline.
func (s *supervisor) lockLost(l LockLoss) {
	s.res.LossErr = l.Err
	if !s.decided {
		s.decide(ReasonLockLost)
	}
	if !s.job.ContinueOnLoss {
		s.stop(l.Grace, false)
	}
}

func (s *supervisor) decide(r Reason) {
	s.decided = true
	s.res.Reason = r
}

// forward passes a received signal on to the job's process group.
func (s *supervisor) forward(sg os.Signal) {
	if n, ok := sg.(syscall.Signal); ok {
		_ = unix.Kill(-s.pgid, n)
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
// and, with all, to every other process of the job cronlock knows, and sets the SIGKILL
// deadline.
func (s *supervisor) stop(grace time.Duration, all bool) {
	if !s.killed {
		s.signalJob(unix.SIGTERM, all)
		s.signalJob(unix.SIGCONT, all)
	}
	s.deadline(grace)
}

// kill sends SIGKILL to everything of the job, now and (via hunt) to whatever turns up later.
func (s *supervisor) kill() {
	s.killed = true
	s.hunt()
	s.signalJob(unix.SIGKILL, true)
}

func (s *supervisor) signalJob(sg unix.Signal, all bool) {
	_ = unix.Kill(-s.pgid, sg)
	if !all {
		return
	}
	for pid := range s.others {
		killTree(pid, sg, s.self)
	}
}

// killTree signals pid, and its process group when it leads one (a job process that called
// setsid, with its own pipeline under it). Never cronlock's own group.
func killTree(pid int, sg unix.Signal, self int) {
	_ = unix.Kill(pid, sg)
	if pg, err := unix.Getpgid(pid); err == nil && pg == pid && pg != unix.Getpgrp() && pg != self {
		_ = unix.Kill(-pg, sg)
	}
}

// hunt finds cronlock's children other than the main child and the guard: job processes
// reparented to cronlock. New ones get the treatment the rest of the job already got.
func (s *supervisor) hunt() {
	if !s.mainDone && s.killAt.IsZero() {
		return
	}
	pids := childPIDs(s.self)
	guard := s.guardAmong(pids)
	for _, pid := range pids {
		if pid == s.res.PID || pid == guard || s.others[pid] {
			continue
		}
		s.others[pid] = true
		if s.killed {
			killTree(pid, unix.SIGKILL, s.self)
		} else {
			killTree(pid, unix.SIGTERM, s.self)
			killTree(pid, unix.SIGCONT, s.self)
		}
	}
	if s.killed {
		// A process of the group may have forked after the first SIGKILL went out.
		_ = unix.Kill(-s.pgid, unix.SIGKILL)
	}
}

// finished reports whether the run is over: the main child is reaped, its process group is
// empty, and no other child of cronlock (but the guard) is left to reap.
func (s *supervisor) finished() bool {
	if !s.mainDone {
		return false
	}
	if unix.Kill(-s.pgid, 0) == nil { // also true while zombies of the group wait for a reaper
		return false
	}
	pids := childPIDs(s.self)
	guard := s.guardAmong(pids)
	for _, pid := range pids {
		if pid != guard {
			s.others[pid] = true
			return false
		}
	}
	return len(s.others) == 0 || s.othersGone()
}

// guardAmong returns the guard's pid when children lists any child, else 0. Only then may
// the guard be among them, so only then is it worth waiting for the guard's fork and exec
// to finish (Guard.PID), which a short job otherwise ends before.
func (s *supervisor) guardAmong(children []int) int {
	if len(children) == 0 {
		return 0
	}
	return s.job.Guard.PID()
}

// othersGone drops processes from others that no longer exist and reports whether none is left.
func (s *supervisor) othersGone() bool {
	for pid := range s.others {
		if unix.Kill(pid, 0) == unix.ESRCH {
			delete(s.others, pid)
		}
	}
	return len(s.others) == 0
}

// finish ends the output relays, gives the terminal back and dismisses the guard.
func (s *supervisor) finish() {
	// Every process of the job is gone, so only something outside the job can still hold
	// the pipes: take what they hold now and stop.
	for _, rl := range s.relays {
		rl.stop()
	}
	for _, rl := range s.relays {
		<-rl.done
		if s.res.OutputErr == nil && rl.outErr != nil {
			s.res.OutputErr = rl.outErr
		}
	}
	if s.tail != nil {
		s.res.Output, s.res.Streams = s.tail.contents()
	}
	s.restoreForeground()
	s.job.Guard.Done()
}

// panicked is the safety net of a bug: kill the job, give the terminal back, report.
func (s *supervisor) panicked(p any) {
	if s.pgid > 0 {
		_ = unix.Kill(-s.pgid, unix.SIGKILL)
	}
	for _, rl := range s.relays {
		rl.stop()
	}
	s.restoreForeground()
	s.job.Guard.Done()
	if s.res.Started {
		s.res.OutputErr = fmt.Errorf("lockrun: internal error while supervising: %v", p)
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

// childPIDs lists the orphans that were reparented to process self, a child subreaper:
// the kernel hands them to its main thread (the first live thread of the group, and Go
// never ends its main thread), so /proc/<pid>/task/<pid>/children lists them all. The
// children cronlock forked itself (the job, the guard) hang under the thread that forked
// them, are known by pid, and need no listing. Reading only that one file matters: listing
// /proc/<pid>/task fills the dentry cache with an entry per thread, which the kernel walks
// when cronlock's parent reaps it, and that walk cost cron (and every benchmark) a fifth of
// the CPU time of a short run. Without the file (a kernel built without
// CONFIG_PROC_CHILDREN) every process's stat is read.
func childPIDs(self int) []int {
	var pids []int
	me := strconv.Itoa(self)
	if b, err := readSmall("/proc/"+me+"/task/"+me+"/children", make([]byte, 4096)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return pids
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := statPPID(n); ok && ppid == self {
			pids = append(pids, n)
		}
	}
	return pids
}

// readSmall reads a small /proc file with three plain system calls: os.ReadFile costs
// three times as many (poller registration, fcntl), and childPIDs runs more than once per
// run.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	if n == len(buf) {
		// More children than fit: fall back to reading it whole.
		return os.ReadFile(path)
	}
	return buf[:n], nil
}

// statPPID reads the parent pid from /proc/<pid>/stat (the field after the ")" that ends
// the command name, which may itself contain spaces and parentheses).
func statPPID(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	return n, err == nil
}

// lookCommand resolves name like a shell would, telling "not found" (127) from "found but
// not executable" (126) before anything is forked.
func lookCommand(name string, env []string, dir string) (string, *StartError) {
	if strings.Contains(name, "/") {
		p := name
		if dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", &StartError{Kind: NotFound, Name: name, Path: name, Err: err}
			}
			return "", &StartError{Kind: NotExecutable, Name: name, Path: name, Err: err}
		}
		return name, nil
	}
	pathEnv, ok := envLookup(env, "PATH")
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	var firstBad *StartError
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "." // POSIX: an empty PATH entry is the current directory
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && firstBad == nil {
			firstBad = &StartError{Kind: NotExecutable, Name: name, Path: p, Err: err}
		}
	}
	if firstBad != nil {
		return "", firstBad
	}
	return "", &StartError{Kind: NotFound, Name: name, Err: fs.ErrNotExist}
}

// checkExecutable returns nil when p is a file this process may execute.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return fs.ErrNotExist
		}
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("permission denied (not executable; chmod +x it)")
	}
	if err := unix.Access(p, unix.X_OK); err != nil {
		return fmt.Errorf("permission denied: %w", err)
	}
	return nil
}

// startErrorFor classifies an exec failure of a file that lookCommand found.
func startErrorFor(name, path string, err error) *StartError {
	var en syscall.Errno
	if errors.As(err, &en) {
		switch en {
		case syscall.ENOENT:
			// The file was there a moment ago: a missing interpreter (#!) or loader, as
			// a shell says with "bad interpreter".
			return &StartError{Kind: NotExecutable, Name: name, Path: path,
				Err: errors.New("bad interpreter or loader: no such file or directory")}
		case syscall.EACCES, syscall.EPERM, syscall.EISDIR, syscall.ENOEXEC, syscall.ETXTBSY, syscall.ELIBBAD:
			return &StartError{Kind: NotExecutable, Name: name, Path: path, Err: err}
		}
	}
	return &StartError{Kind: StartFailed, Name: name, Path: path, Err: err}
}

func envLookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// isForegroundTTY reports whether fd is a terminal whose foreground group is cronlock's:
// only then may the job take the terminal (a cronlock started in the background with `&`
// must not steal it).
func isForegroundTTY(fd int) bool {
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}

// restoreForeground gives the terminal back to cronlock's process group. cronlock is in
// a background group at that moment, so tcsetpgrp would raise SIGTTOU; blocking it on this
// thread makes the kernel allow the call without stopping cronlock.
func (s *supervisor) restoreForeground() {
	if s.fg < 0 {
		return
	}
	fd := s.fg
	s.fg = -1
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	sigaddset(&set, unix.SIGTTOU)
	if unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old) != nil {
		return
	}
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	signal.Reset(syscall.SIGTTOU)
}

func sigaddset(set *unix.Sigset_t, sg unix.Signal) {
	n := uint(sg) - 1
	const bits = 64 // Sigset_t.Val is []uint64 on linux
	set.Val[n/bits] |= 1 << (n % bits)
}
