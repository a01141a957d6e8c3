package redis

import (
	"errors"
	"fmt"
	"strings"
)

// ACL refusals of the commands the HA forms add to the README's ACL line: WAIT
// (--min-replicas) and CLUSTER SLOTS (the discovery of redis-cluster://).

// waitRefusedError is an error reply to the WAIT sent after a script that ran: the
// script's writes happened (an acquire took the lock), so the caller must undo them.
type waitRefusedError struct{ err error }

func (e *waitRefusedError) Error() string { return e.err.Error() }

func (e *waitRefusedError) Unwrap() error { return e.err }

// scriptRan reports an error met after the script had run (its writes stand).
func scriptRan(err error) bool {
	var w *waitRefusedError
	return errors.As(err, &w)
}

// aclHint is the advice for a NOPERM reply that names one of those commands, else "".
func aclHint(detail string) string {
	switch {
	case strings.Contains(detail, "'wait'"):
		return "--min-replicas sends WAIT: add +wait to the Redis ACL user, or set --min-replicas (CRONLOCK_REDIS_MIN_REPLICAS) to 0"
	case strings.Contains(detail, "'cluster|slots'"), strings.Contains(detail, "'cluster'"):
		return "redis-cluster:// finds the nodes with CLUSTER SLOTS: add +cluster|slots to the Redis ACL user on every node"
	}
	return ""
}

// noPermMessage is the message of a NOPERM reply from server.
func noPermMessage(server, detail, prefix string) string {
	if hint := aclHint(detail); hint != "" {
		return fmt.Sprintf("%s refused: %s (%s; see docs/backends-redis.md)", server, detail, hint)
	}
	return fmt.Sprintf("%s refused: %s (the Redis ACL user needs EVAL and EVALSHA with GET, SET, PEXPIRE, DEL, TIME, INFO inside it, SCAN, PTTL, SUBSCRIBE, SELECT for a database other than 0, and the %s* keys; see the ACL line in docs/backends-redis.md)", server, detail, prefix)
}
