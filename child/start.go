package child

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
	// The guard is forked now, beside the output set-up, and is running before the child
	// is: a cronlock killed just after the child's start (the job's pipeline already
	// forking) would otherwise leave the job's processes with no guard at all.
	job.Guard.Prestart()
	env := job.Env
	if env == nil {
		env = os.Environ()
	}
	var readers []*os.File // read ends of the output pipes, for the relays
	// closeReaders undoes the output set-up when the child cannot be started.
	closeReaders := func() {
		for _, r := range readers {
			r.Close()
		}
		if s.out != nil {
			s.out.abandon()
			s.out = nil
		}
	}
	// fail is for what goes wrong before the fork (/dev/null, pipes): cronlock's own
	// failures, whatever the errno, so that an ENOENT here is not taken for the command's.
	fail := func(err error) bool {
		closeReaders()
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
	var relayTo []relayTarget
	if job.Capture > 0 || job.Spool != nil {
		o := &outputs{capture: job.Capture, shared: sameFile(job.Stdout, job.Stderr)}
		s.out = o
		if job.Spool != nil {
			// Everything goes through pipes into the spool, whatever the outputs are.
			o.spool, o.shared = true, job.Spool.shared
		} else {
			// A regular file is handed to the job as it is; anything else (a pipe, a
			// terminal, a device) goes through a pipe of cronlock's and a relay.
			o.files[0] = newHandoff(job.Stdout)
			if !o.shared {
				o.files[1] = newHandoff(job.Stderr)
			}
		}
		fdOf := func(f *os.File) int {
			if f == nil {
				return -1
			}
			return int(f.Fd())
		}
		pipeFor := func(f *os.File, name string, st Stream) (*os.File, error) {
			r, w, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			growPipe(r)
			closeAfter = append(closeAfter, w)
			readers = append(readers, r)
			relayTo = append(relayTo, relayTarget{fdOf(f), name, st, job.Spool.stream(st)})
			return w, nil
		}
		if o.shared {
			// One pipe for both streams keeps their order but not which is which: that
			// tail is left unmarked (Result.Streams nil) rather than claim stderr lines
			// as stdout. The same holds for one file handed to the job.
			if o.files[0] == nil {
				w, err := pipeFor(job.Stdout, "stdout and stderr", StreamStdout)
				if err != nil {
					return fail(err)
				}
				stdout, stderr = w, w
			}
		} else {
			if o.files[0] == nil {
				if stdout, err = pipeFor(job.Stdout, "stdout", StreamStdout); err != nil {
					return fail(err)
				}
			}
			if o.files[1] == nil {
				if stderr, err = pipeFor(job.Stderr, "stderr", StreamStderr); err != nil {
					return fail(err)
				}
			}
		}
		if len(readers) > 0 && !o.spool {
			o.tail = newTail(job.Capture, !o.shared)
		}
	} else {
		if stdout, err = orNull(stdout); err != nil {
			return fail(err)
		}
		if stderr, err = orNull(stderr); err != nil {
			return fail(err)
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
	job.Guard.PID() // waits for the guard's fork and exec, begun by Prestart
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
		t := relayTo[i]
		fd := t.fd
		if t.spool != nil {
			fd = -1 // the spool's destination is written only by Spool.Finish
		}
		rl := newRelay(r, fd, t.name, s.out.tail, t.stream)
		if t.spool != nil {
			rl.spool, rl.from = t.spool, t.spool.total
		}
		s.out.relays = append(s.out.relays, rl)
		go rl.run()
	}
	return true
}

// relayTarget is where a relay passes a pipe's bytes on to, and what it calls them.
type relayTarget struct {
	fd     int          // cronlock's stdout or stderr; -1 = none
	name   string       // for OutputError
	stream Stream       // how the tail marks them
	spool  *spoolStream // takes them instead, when not nil (Job.Spool)
}
