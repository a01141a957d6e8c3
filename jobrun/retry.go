package jobrun

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"cronlock/child"
	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/runstatus"
	"cronlock/tty"
)

// maxRetryDelay caps the delay before a try however many tries came before it.
const maxRetryDelay = 10 * time.Minute

// tries runs the job under the lease once, and again for each --retries while its tries
// fail by their own exit, and returns the last try's Result. The lease is kept by keeper
// throughout, delays included, so no other host runs the job between two tries.
//
// end is set when the run ended between two tries (a stop signal, the lock lost, the
// --timeout spent): it is then the run's outcome, and its row is the try that did not
// start; res is the previous try's, whose output is already through.
//
// spool (nil without --output on-failure) holds the output of every try; the caller
// writes it out, or drops it, by the run's final outcome.
func (r *runner) tries(sig *child.Signals, keeper *keeperWatch, lease lockrun.Lease, guard *child.Guard, spool *child.Spool) (res child.Result, end *outcome) {
	o := r.o
	first := time.Now() // monotonic: --timeout bounds every try and delay together
	for {
		job := child.Job{
			Argv: o.Command, Env: childEnv(o, r.runID, lease.FencingToken(), r.locker.Name(), r.tick, r.row.Try, r.attempt, r.takeoverOf),
			Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr,
			Capture: int(o.Capture), Grace: o.Grace, Timeout: o.Timeout,
			Guard: guard, ContinueOnLoss: o.ContinueOnLoss, Spool: spool,
		}
		job.Env = r.ckpt.forTry(job.Env, r.row.Try)
		hung, stopBeat := r.ckpt.heartbeat(o.HeartbeatTimeout)
		job.Hung = hung
		if o.Timeout > 0 {
			job.Timeout = max(o.Timeout-time.Since(first), time.Nanosecond)
		}
		r.pingStart() // once, for the run's first try
		res = child.Supervise(context.Background(), job, sig, keeper, nil)
		stopBeat()
		r.row.FinishedAt = wallNow()
		if o.Retries <= 0 || r.row.Try > o.Retries {
			return res, nil
		}
		res.WaitOutput() // the try's outcome decides; nobody waits for the lock meanwhile
		out := outcomeOf(res, o)
		if !r.retryable(res, out) {
			return res, nil
		}
		delay := r.retryDelay(r.row.Try)
		if o.Timeout > 0 && time.Since(first)+delay >= o.Timeout {
			r.verbosef("%s: try %d failed (exit %d); no time is left for another within --timeout %v", o.Key, r.row.Try, out.Code, o.Timeout)
			return res, nil
		}
		r.finishTry(res, out, delay)
		// The next try's row starts now, with its delay: should cronlock die while it
		// waits, the run is recorded (abandoned) rather than ending at a retried try.
		r.nextTry()
		if end := r.retryWait(sig, keeper, delay); end != nil {
			return res, end
		}
	}
}

// retryable reports whether a try may be followed by another: only a job that ran and
// ended by itself with a failing code (any, or one of --retry-on). A timeout, a lost
// lock, a stop signal, a command that cannot start (126, 127) and output that could not
// be written are never tried again: another try would meet the same end, or should not
// run at all.
func (r *runner) retryable(res child.Result, out outcome) bool {
	if !res.Started || res.Reason != child.ReasonExited || res.LossErr != nil || res.OutputErr != nil {
		return false
	}
	if out.Status != runstatus.Failed {
		return false
	}
	return len(r.o.RetryOn) == 0 || slices.Contains(r.o.RetryOn, out.Code)
}

// retryDelay is the delay after try n (1, 2, …): --retry-delay doubled for each try
// before, capped at maxRetryDelay, of which a uniformly random part is taken (full
// jitter), so that the hosts of a fleet whose job failed together do not retry together.
func (r *runner) retryDelay(n int) time.Duration {
	d := r.o.RetryDelay
	for i := 1; i < n && d < maxRetryDelay; i++ {
		d *= 2
	}
	d = min(d, maxRetryDelay)
	if d <= 0 {
		return 0
	}
	return randN(d)
}

// finishTry records the try that is about to be tried again: status retried, with the
// try's own exit, output and error.
func (r *runner) finishTry(res child.Result, out outcome, delay time.Duration) {
	o := r.o
	r.row.Status, r.row.ExitCode, r.row.Signal, r.row.Output = runstatus.Retried, out.ExitCode, out.Signal, res.Output
	r.row.Exit = &out.Code
	r.row.Streams = streamsOf(res)
	r.row.Error = fmt.Sprintf("try %d of %d failed with exit %d; try %d to follow after %v", r.row.Try, o.Retries+1, out.Code, r.row.Try+1, delay.Round(time.Millisecond))
	r.queueFinish()
	// Cron mails whatever is said: a try that the next one mends is news only to a person
	// at a terminal, or with -v.
	if o.Verbose || (!o.Quiet && tty.IsTerminal(o.Stderr)) {
		r.infof("%s: try %d of %d failed with exit %d; trying again in %v", o.Key, r.row.Try, o.Retries+1, out.Code, delay.Round(time.Millisecond))
	}
}

// retryWait waits delay before the next try while the lease is kept. A stop signal or a
// lost lock ends the run there, the next try never started: that try's row says so, and
// the outcome it returns is the run's.
func (r *runner) retryWait(sig *child.Signals, keeper *keeperWatch, delay time.Duration) *outcome {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if loss, lost := keeper.Check(); lost {
				return r.lostBetween(loss)
			}
			return nil
		case loss := <-keeper.Lost():
			return r.lostBetween(loss)
		case s := <-sig.C:
			if !child.IsStopSignal(s) {
				continue // USR1/USR2 between tries: no job to forward them to
			}
			sg := s.(syscall.Signal)
			name := unix.SignalName(sg)
			return &outcome{Status: runstatus.Interrupted, Code: 128 + int(sg),
				Message: fmt.Sprintf("%s: stopped by %s before try %d started", r.o.Key, name, r.row.Try), Warning: true}
		}
	}
}

// lostBetween is the outcome of a run whose lock was lost while it waited to try again:
// the next try does not start, as it would run without the lock.
func (r *runner) lostBetween(loss child.Stop) *outcome {
	return &outcome{Status: runstatus.LockLost, Code: ExitFailed,
		Message: fmt.Sprintf("%s: the lock was lost between tries (%v); try %d was not started. Another host may run the job now", r.o.Key, loss.Err, r.row.Try)}
}

// nextTry makes the row of the run's next try: a row of its own, linked to the run by its
// first try's id, and claimed as the previous one was. It starts with the delay before
// the try, so its duration includes that delay.
func (r *runner) nextTry() {
	id := fmt.Sprintf("%s-%d", r.runID, r.row.Try+1) // should the clock or entropy fail
	if u, err := uuid.NewV7(); err == nil {
		id = u.String()
	}
	prev := r.row
	r.row = &history.Run{ID: id, RunID: r.runID, Try: prev.Try + 1, Key: prev.Key, Node: prev.Node,
		PID: os.Getpid(), Command: prev.Command, StartedAt: wallNow(), Attempt: prev.Attempt,
		ScheduledFor: prev.ScheduledFor, Backend: prev.Backend, FencingToken: prev.FencingToken,
		Status: runstatus.Running}
	r.recordStart()
}

// streamsOf is res's output segments as the history stores them (the same numbers).
func streamsOf(res child.Result) []history.Segment {
	var segs []history.Segment
	for _, sg := range res.Streams {
		segs = append(segs, history.Segment{Stream: history.Stream(sg.Stream), Len: sg.Len})
	}
	return segs
}
