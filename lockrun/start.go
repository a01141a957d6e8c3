package lockrun

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"cronlock/tty"
)

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
	env := job.Env
	if env == nil {
		env = os.Environ()
	}
	// fail is for what goes wrong before the fork (/dev/null, pipes): cronlock's own
	// failures, whatever the errno, so that an ENOENT here is not taken for the command's.
	fail := func(err error) bool {
		s.res.StartErr = &StartError{Kind: StartFailed, Name: job.Argv[0], Path: path, Err: err}
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
	if tty.InForeground(job.Stdin) {
		fd := int(job.Stdin.Fd())
		sys.Foreground, sys.Ctty = true, fd
		s.fg = fd
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
		s.res.StartErr = startErrorFor(job.Argv, env, path, err)
		return false
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
