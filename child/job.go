package child

import (
	"os"
	"strconv"
	"syscall"
	"time"
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
	// means the null device. When Stdin is a terminal whose foreground group is cronlock's,
	// the child's process group takes the terminal over for the run (a job that reads it
	// must not stop on SIGTTIN), and cronlock's group gets it back afterwards.
	Stdin, Stdout, Stderr *os.File
	// Capture is how many bytes of the combined output tail to keep in Result.Output. With 0
	// the child writes to Stdout and Stderr itself; otherwise cronlock relays its output
	// through pipes.
	Capture int
	// Spool, when not nil, holds the job's output instead of passing it on (--output
	// on-failure; the caller ends it with Spool.Finish once the run's outcome is known).
	// The output then always goes through pipes, and Capture's tail is read back from
	// the spool.
	Spool *Spool
	// Grace is the time between SIGTERM and SIGKILL whenever the job is stopped. 0 sends
	// SIGKILL right after SIGTERM.
	Grace time.Duration
	// Timeout is the longest run time; 0 means none.
	Timeout time.Duration
	// Hung, when not nil, is closed when the job is to be stopped as hung (it sent no
	// heartbeat in time): it is stopped as for Timeout, ReasonTimeout with Result.Hung.
	Hung <-chan struct{}
	// Guard, when not nil, is armed with the job's process group once the child has started
	// and disarmed when every process of the job is gone. Its owner dismisses it (Done)
	// once no job will follow: one guard serves every try of a run.
	Guard *Guard
	// ContinueOnLoss lets the job run on when the lock is lost (--on-lock-lost continue);
	// the run's Reason is ReasonLockLost still. By default the job is stopped.
	ContinueOnLoss bool
}

// Stop is an order to stop the job before its time is up: SIGTERM now, SIGKILL Grace
// later (at once when Grace is 0). Err says why; it becomes Result.LossErr.
type Stop struct {
	Grace time.Duration
	Err   error
}

// Watch tells Supervise to stop the job early. In cronlock it is the lease's keeper,
// which alone decides when a lease is lost; Supervise knows only the order.
type Watch interface {
	// Lost delivers at most one Stop while the job runs.
	Lost() <-chan Stop
	// Check reports a Stop that is due at this instant although Lost has not said so
	// yet (cronlock itself was frozen past the lease). Supervise asks when it sees the
	// main child's end, which counts as the job's own end only if no Stop was due then.
	Check() (Stop, bool)
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
	// LossErr is the error of the Stop that arrived, if one did (whatever the Reason).
	LossErr error
	// Hung: the timeout that stopped the job was Job.Hung's, not Job.Timeout's.
	Hung bool
	// Output is the bounded tail of the combined stdout and stderr, in arrival order; nil
	// when Job.Capture is 0. Set by WaitOutput.
	//
	// Where cronlock's stdout or stderr is a regular file, the job was given the file
	// itself and its part of the tail was read back from the file afterwards: the bytes
	// written to it during the run (others appending to the same file at the same time
	// may be among them). When stdout and stderr went to different places of which at
	// least one was such a file, their order is not known: Output is the end of stdout,
	// then the end of stderr, each given at least half of Job.Capture when both have
	// more than that.
	Output []byte
	// Streams says which stream each part of Output came from: oldest first, consecutive
	// segments of different streams, lengths summing to len(Output). It is nil when Output
	// is empty or unmarked: Job.Capture is 0, or Job.Stdout and Job.Stderr are the same file
	// or pipe, so the child got one pipe (or that file) for both and its streams cannot be
	// told apart. Set by WaitOutput.
	Streams []Segment
	// OutputErr says that output was lost: an *OutputError when part of the job's output
	// could not be written to cronlock's stdout or stderr (no space left, an I/O error; not
	// a reader that went away, which the job meets itself as EPIPE or SIGPIPE), or an
	// internal error of Supervise. The job was not stopped for it. Set by WaitOutput.
	OutputErr error
	// Started is false when the child could not be started; StartErr then says why.
	Started bool
	// StartErr is a *StartError when Started is false.
	StartErr error
	// PID is the child's process id (also its process group id).
	PID int
	// Duration is the time from start to the end of the main child.
	Duration time.Duration

	out *outputs // what WaitOutput waits for; nil once it has
}

// OutputDone reports whether the job's output has all been passed on, waiting for it at
// most within: when the job's processes are gone, the relays drain what the pipes still
// hold in microseconds unless a reader is slow. It does not set Output (WaitOutput does).
func (r *Result) OutputDone(within time.Duration) bool {
	if r.out == nil {
		return true
	}
	var timer <-chan time.Time
	for _, rl := range r.out.relays {
		select {
		case <-rl.done:
			continue
		default:
		}
		if timer == nil {
			if within <= 0 {
				return false
			}
			t := time.NewTimer(within)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-rl.done:
		case <-timer:
			return false
		}
	}
	return true
}

// WaitOutput waits until the job's output has all been passed on to cronlock's stdout and
// stderr, then sets Output, Streams and OutputErr. Supervise returns as soon as the job's
// processes are gone, which may be before a slow reader has taken everything: the caller
// releases the lock first and waits here afterwards. Without a slow reader it returns at
// once. It waits for at most what the pipes held when the job ended, unless a reader never
// reads and never goes away (as the job's own writes would wait, without cronlock). Calling
// it again, or on a Result without captured output, does nothing.
func (r *Result) WaitOutput() {
	o := r.out
	if o == nil {
		return
	}
	r.out = nil
	out, segs, err := o.wait()
	r.Output, r.Streams = out, segs
	if r.OutputErr == nil {
		r.OutputErr = err
	}
}
