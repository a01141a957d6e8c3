// Package runstatus names the outcomes of a cronlock run, as the history, the fleet's
// record, the metrics file and check's verdict all write and read them, and says which
// of them count as failures. It has no behaviour beyond that.
package runstatus

import "slices"

// Statuses of a run. The README's table of exit codes and statuses says when a run ends
// with which; abandoned is a run whose cronlock died before it recorded the end
// (history.Reap).
const (
	Running     = "running"
	Succeeded   = "succeeded"
	Failed      = "failed"
	Timeout     = "timeout"
	LockLost    = "lock_lost"
	Interrupted = "interrupted"
	Skipped     = "skipped"
	Error       = "error"
	Abandoned   = "abandoned"
	// Missed: a --schedule run that started more than --start-deadline after its
	// tick, so its job was not started (the tick was claimed, so it is missed once).
	Missed = "missed"
	// Retried: a try of a run that failed and was followed by another try
	// (--retries). The run's outcome is its last try's: stats leave retried tries out.
	Retried = "retried"
	// Suspended: a run of a key suspended fleet-wide (cronlock suspend); its job was
	// not started.
	Suspended = "suspended"
)

// All lists every status a row can have.
var All = []string{Running, Succeeded, Failed, Timeout,
	LockLost, Interrupted, Skipped, Error, Abandoned, Missed, Retried, Suspended}

// Valid reports whether s is one of All.
func Valid(s string) bool {
	for _, v := range All {
		if s == v {
			return true
		}
	}
	return false
}

// Failures are the statuses that count as a failure: in KeyStats (Failed, the
// failure streak, LastFailure), and for the last failure of a key, which Prune and Retain
// always keep. The others are not failures: succeeded is a success, skipped and running
// say nothing about the job (yet), and interrupted (stopped by a signal someone sent
// cronlock) is neither a success nor a failure. Callers must not modify it.
var Failures = []string{Failed, Timeout, LockLost, Error, Abandoned, Missed}

// CountsAsFailure reports whether status is one of Failures.
func CountsAsFailure(status string) bool {
	return slices.Contains(Failures, status)
}
