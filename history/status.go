package history

// Statuses of a run (SPEC §3, §6).
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
)

// Statuses lists every status a row can have, in the order the SPEC gives them.
var Statuses = []string{StatusRunning, StatusSucceeded, StatusFailed, StatusTimeout,
	StatusLockLost, StatusInterrupted, StatusSkipped, StatusError, StatusAbandoned}

// ValidStatus reports whether s is one of Statuses.
func ValidStatus(s string) bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}
