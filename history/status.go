package history

import "slices"

// Statuses of a run. The README's table of exit codes and statuses says when a run ends
// with which; abandoned is a run whose cronlock died before it recorded the end (Reap).
const (
	StatusRunning     = "running"
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusTimeout     = "timeout"
	StatusLockLost    = "lock_lost"
	StatusInterrupted = "interrupted"
	StatusSkipped     = "skipped"
	StatusError       = "error"
	StatusAbandoned   = "abandoned"
	// StatusMissed: a --schedule run that started more than --start-deadline after its
	// tick, so its job was not started (the tick was claimed, so it is missed once).
	StatusMissed = "missed"
	// StatusRetried: a try of a run that failed and was followed by another try
	// (--retries). The run's outcome is its last try's: stats leave retried tries out.
	StatusRetried = "retried"
)

// Statuses lists every status a row can have.
var Statuses = []string{StatusRunning, StatusSucceeded, StatusFailed, StatusTimeout,
	StatusLockLost, StatusInterrupted, StatusSkipped, StatusError, StatusAbandoned, StatusMissed, StatusRetried}

// ValidStatus reports whether s is one of Statuses.
func ValidStatus(s string) bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// FailureStatuses are the statuses that count as a failure: in KeyStats (Failed, the
// failure streak, LastFailure), and for the last failure of a key, which Prune and Retain
// always keep. The others are not failures: succeeded is a success, skipped and running
// say nothing about the job (yet), and interrupted (stopped by a signal someone sent
// cronlock) is neither a success nor a failure. Callers must not modify it.
var FailureStatuses = []string{StatusFailed, StatusTimeout, StatusLockLost, StatusError, StatusAbandoned, StatusMissed}

// CountsAsFailure reports whether status is one of FailureStatuses.
func CountsAsFailure(status string) bool {
	return slices.Contains(FailureStatuses, status)
}
