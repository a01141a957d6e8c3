package jobrun

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"cronlock/child"
	"cronlock/runstatus"
)

// outcome is what a supervised run comes to: its history status, cronlock's exit code
// and the one line cronlock says about it (empty when the job's own exit says it all).
type outcome struct {
	Status   string
	Code     int
	ExitCode *int   // the child's own code, nil when it had none
	Signal   string // the signal that ended the child, "" if none
	Message  string
	Warning  bool // Message is a warning (quiet hides it), not an error
}

// The exit codes cronlock itself gives; any other code is the job's own, 128+N for a
// job that died of signal N, or the conflict code of a skipped run.
const (
	// ExitTimeout: cronlock stopped the job because --timeout passed.
	ExitTimeout = 124
	// ExitFailed: cronlock failed: bad usage or configuration, backend unreachable, lock
	// lost while the job ran, the job could not be started for a reason of cronlock's.
	ExitFailed = 125
	// ExitCannotExecute: the command exists but cannot be executed.
	ExitCannotExecute = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)

// outcomeOf maps a supervised run to status and exit code. The first event decides:
// lock lost, timeout, forwarded stop signal, the child's own exit.
func outcomeOf(res child.Result, o *Options) outcome {
	var out outcome
	if !res.Started {
		out.Status = runstatus.Error
		out.Code = ExitFailed
		var se *child.StartError
		if errors.As(res.StartErr, &se) {
			switch se.Kind {
			case child.NotFound:
				out.Code = ExitNotFound
			case child.NotExecutable:
				out.Code = ExitCannotExecute
			}
		}
		out.Message = fmt.Sprint(res.StartErr)
		return out
	}
	if res.Signal != 0 {
		out.Signal = unix.SignalName(res.Signal)
	} else {
		c := res.ExitCode
		out.ExitCode = &c
	}
	// own is the code the child's exit alone would give.
	own := res.ExitCode
	if res.Signal != 0 {
		own = 128 + int(res.Signal)
	}
	switch res.Reason {
	case child.ReasonLockLost:
		out.Status = runstatus.LockLost
		if o.ContinueOnLoss {
			out.Code = own
			out.Warning = true
			out.Message = fmt.Sprintf("%s: the lock was lost while the job ran (%v); --on-lock-lost continue let it finish", o.Key, res.LossErr)
		} else {
			out.Code = ExitFailed
			stopped := ""
			if res.Signal != 0 {
				stopped = "; stopped the job"
			}
			out.Message = fmt.Sprintf("%s: the lock was lost while the job ran (%v)%s. Another host may run it now", o.Key, res.LossErr, stopped)
		}
	case child.ReasonTimeout:
		out.Status = runstatus.Timeout
		out.Code = ExitTimeout
		out.Message = fmt.Sprintf("%s: the job ran longer than --timeout %v; stopped it", o.Key, o.Timeout)
		if res.Hung {
			out.Message = fmt.Sprintf("%s: the job saved no checkpoint for --heartbeat-timeout %v: it is hung; stopped it", o.Key, o.HeartbeatTimeout)
		}
	case child.ReasonSignal:
		out.Status = runstatus.Interrupted
		n := 0
		if s, ok := res.StopSignal.(syscall.Signal); ok {
			n = int(s)
		}
		out.Code = 128 + n
		out.Message = fmt.Sprintf("%s: stopped the job on %s", o.Key, unix.SignalName(syscall.Signal(n)))
		out.Warning = true
	default:
		out.Code = own
		if own == 0 {
			out.Status = runstatus.Succeeded
		} else {
			out.Status = runstatus.Failed
		}
	}
	if res.OutputErr != nil {
		outputLost(&out, res, o)
	}
	return out
}

// outputLost makes a run whose output could not all be written (no space left, an I/O
// error; child.OutputError) a failure that is never silent.
//
// A job that ended by itself, or finished under --on-lock-lost continue, gets exit 125 and
// the line, whatever its own code (which the row keeps): `pg_dump >/backup/db.sql` on a
// full disk exits 0, and must not pass for a success. Its status is failed, not error:
// the job ran under the lock and its product is incomplete, which monitoring must treat as
// a failed job (cronlock check: CRITICAL), while error is for runs whose job never did its
// work (the lock, the history, a command that cannot start). An earlier event (timeout,
// lock lost, a stop signal) keeps its status and code, as the first event decides; the
// lost output is added to its line, which is then an error that --quiet does not hide.
func outputLost(out *outcome, res child.Result, o *Options) {
	what := fmt.Sprintf("%v", res.OutputErr)
	var oe *child.OutputError
	if errors.As(res.OutputErr, &oe) {
		what = fmt.Sprintf("%s; the run failed, as its output is incomplete: make room (or mend the device) where it goes, then run the job again", oe)
	}
	ownEnd := res.Reason == child.ReasonExited || (res.Reason == child.ReasonLockLost && o.ContinueOnLoss)
	switch {
	case res.Reason == child.ReasonExited:
		out.Status = runstatus.Failed
		out.Code = ExitFailed
		out.Message = fmt.Sprintf("%s: %s", o.Key, what)
	case ownEnd:
		out.Code = ExitFailed
		out.Message += "; and " + what
	default:
		out.Message += "; and " + what
	}
	out.Warning = false
}
