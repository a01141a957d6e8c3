package jobrun

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"cronlock/child"
	"cronlock/runstatus"
)

// TestOutcome: the status and exit code of every way a supervised run can end. The
// first event decides (lockrun reports it as Reason): lock lost, timeout, forwarded stop
// signal, the child's own exit; the child's own end only fills in its code or signal.
func TestOutcome(t *testing.T) {
	loss := errors.New("no renewal confirmed before the lease ran out")
	type end struct {
		code int            // the child's exit code; -1 when a signal ended it
		sig  syscall.Signal // the signal that ended it, 0 if none
	}
	exit := func(c int) end { return end{code: c} }
	killed := func(s syscall.Signal) end { return end{code: -1, sig: s} }
	for _, tc := range []struct {
		name       string
		reason     child.Reason
		end        end
		stopSignal syscall.Signal // for ReasonSignal
		cont       bool           // --on-lock-lost continue
		status     string
		code       int
		message    string // a part of the one line cronlock says; "" = says nothing
		warning    bool
	}{
		{"exit 0", child.ReasonExited, exit(0), 0, false, runstatus.Succeeded, 0, "", false},
		{"exit 3", child.ReasonExited, exit(3), 0, false, runstatus.Failed, 3, "", false},
		{"exit 255", child.ReasonExited, exit(255), 0, false, runstatus.Failed, 255, "", false},
		{"exit 124 of its own", child.ReasonExited, exit(124), 0, false, runstatus.Failed, 124, "", false},
		{"killed by a signal cronlock did not send", child.ReasonExited, killed(syscall.SIGSEGV), 0, false, runstatus.Failed, 128 + 11, "", false},
		{"SIGKILL from outside", child.ReasonExited, killed(syscall.SIGKILL), 0, false, runstatus.Failed, 137, "", false},

		{"timeout, job stopped by SIGTERM", child.ReasonTimeout, killed(syscall.SIGTERM), 0, false, runstatus.Timeout, ExitTimeout, "longer than --timeout", false},
		{"timeout, job needed SIGKILL", child.ReasonTimeout, killed(syscall.SIGKILL), 0, false, runstatus.Timeout, ExitTimeout, "longer than --timeout", false},
		{"timeout, job exits 0 in the grace", child.ReasonTimeout, exit(0), 0, false, runstatus.Timeout, ExitTimeout, "longer than --timeout", false},
		{"timeout, job exits 1 in the grace", child.ReasonTimeout, exit(1), 0, false, runstatus.Timeout, ExitTimeout, "longer than --timeout", false},

		{"SIGTERM forwarded, job dies of it", child.ReasonSignal, killed(syscall.SIGTERM), syscall.SIGTERM, false, runstatus.Interrupted, 143, "stopped the job on SIGTERM", true},
		{"SIGINT forwarded, job exits 0", child.ReasonSignal, exit(0), syscall.SIGINT, false, runstatus.Interrupted, 130, "stopped the job on SIGINT", true},
		{"SIGHUP forwarded, job needed SIGKILL", child.ReasonSignal, killed(syscall.SIGKILL), syscall.SIGHUP, false, runstatus.Interrupted, 129, "stopped the job on SIGHUP", true},

		{"lock lost, job stopped", child.ReasonLockLost, killed(syscall.SIGTERM), 0, false, runstatus.LockLost, ExitFailed, "the lock was lost while the job ran", false},
		{"lock lost, job exits 0 in the grace", child.ReasonLockLost, exit(0), 0, false, runstatus.LockLost, ExitFailed, "the lock was lost", false},
		{"lock lost, continue, job exits 0", child.ReasonLockLost, exit(0), 0, true, runstatus.LockLost, 0, "--on-lock-lost continue let it finish", true},
		{"lock lost, continue, job exits 2", child.ReasonLockLost, exit(2), 0, true, runstatus.LockLost, 2, "--on-lock-lost continue let it finish", true},
		{"lock lost, continue, job killed from outside", child.ReasonLockLost, killed(syscall.SIGKILL), 0, true, runstatus.LockLost, 137, "let it finish", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := child.Result{Started: true, Reason: tc.reason, ExitCode: tc.end.code, Signal: tc.end.sig}
			if tc.reason == child.ReasonSignal {
				res.StopSignal = tc.stopSignal
			}
			if tc.reason == child.ReasonLockLost {
				res.LossErr = loss
			}
			got := outcomeOf(res, &Options{Key: "k", ContinueOnLoss: tc.cont})
			if got.Status != tc.status || got.Code != tc.code {
				t.Fatalf("status %s, exit %d; want %s, exit %d", got.Status, got.Code, tc.status, tc.code)
			}
			if tc.message == "" && got.Message != "" || !strings.Contains(got.Message, tc.message) || got.Warning != tc.warning {
				t.Fatalf("message %q (warning %v); want one containing %q (warning %v)", got.Message, got.Warning, tc.message, tc.warning)
			}
			if tc.end.sig != 0 {
				if got.ExitCode != nil || got.Signal == "" {
					t.Fatalf("a job ended by a signal: exit_code %v, signal %q; want null and the signal's name", got.ExitCode, got.Signal)
				}
			} else if got.ExitCode == nil || *got.ExitCode != tc.end.code || got.Signal != "" {
				t.Fatalf("exit_code %v, signal %q; want %d and none", got.ExitCode, got.Signal, tc.end.code)
			}
		})
	}
}

// TestOutcomeNotStarted: a job that never started is an error, with the shell's codes.
func TestOutcomeNotStarted(t *testing.T) {
	for _, tc := range []struct {
		kind child.StartErrorKind
		code int
	}{
		{child.NotFound, ExitNotFound},
		{child.NotExecutable, ExitCannotExecute},
		{child.StartFailed, ExitFailed},
	} {
		se := &child.StartError{Kind: tc.kind, Name: "job", Err: fs.ErrNotExist}
		got := outcomeOf(child.Result{ExitCode: -1, StartErr: se}, &Options{Key: "k"})
		if got.Status != runstatus.Error || got.Code != tc.code || got.Message != se.Error() || got.ExitCode != nil {
			t.Errorf("kind %d: %+v; want status error, exit %d, message %q", tc.kind, got, tc.code, se.Error())
		}
	}
}

// TestOutcomeOutputLost: output that could not be written fails a run the job ended by
// itself (exit 125, status failed, whatever its own code); an earlier event keeps its
// status and code, and the loss is added to its line, as an error.
func TestOutcomeOutputLost(t *testing.T) {
	lost := &child.OutputError{Stream: "stdout", Lost: 4_800_000, Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name   string
		reason child.Reason
		code   int // the child's
		cont   bool
		status string
		exit   int
		before string // the part of the line the event itself says
	}{
		{"exit 0", child.ReasonExited, 0, false, runstatus.Failed, ExitFailed, ""},
		{"exit 3", child.ReasonExited, 3, false, runstatus.Failed, ExitFailed, ""},
		{"timeout", child.ReasonTimeout, 0, false, runstatus.Timeout, ExitTimeout, "longer than --timeout"},
		{"lock lost", child.ReasonLockLost, 0, false, runstatus.LockLost, ExitFailed, "the lock was lost"},
		{"lock lost, continue", child.ReasonLockLost, 0, true, runstatus.LockLost, ExitFailed, "let it finish"},
		{"stop signal", child.ReasonSignal, 0, false, runstatus.Interrupted, 143, "stopped the job on SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := child.Result{Started: true, Reason: tc.reason, ExitCode: tc.code, OutputErr: lost,
				LossErr: errors.New("gone"), StopSignal: syscall.SIGTERM}
			got := outcomeOf(res, &Options{Key: "k", ContinueOnLoss: tc.cont})
			if got.Status != tc.status || got.Code != tc.exit || got.Warning {
				t.Fatalf("status %s, exit %d, warning %v; want %s, exit %d, an error", got.Status, got.Code, got.Warning, tc.status, tc.exit)
			}
			if got.ExitCode == nil || *got.ExitCode != tc.code {
				t.Fatalf("exit_code %v, want the child's own %d", got.ExitCode, tc.code)
			}
			want := "4.8 MB (4800000 bytes) of the job's stdout could not be written: no space left on device"
			if !strings.Contains(got.Message, want) || !strings.Contains(got.Message, tc.before) || strings.Contains(got.Message, "\n") {
				t.Fatalf("message %q; want one line with %q and %q", got.Message, tc.before, want)
			}
		})
	}
}
