package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
)

// transientRedisError reports a server error that goes away by itself. READONLY is a
// master demoted in a failover: go-redis closes that connection, and the next dial of a
// redis-sentinel:// URL asks the Sentinels where the master is now.
//
// ASK, MOVED and TRYAGAIN are a Cluster slot on its way between two masters (none of
// them ran the command): go-redis follows a redirection itself, but only MaxRedirects
// times in a row, with no pause, and every TRYAGAIN counts as one; a script whose keys
// are split between the two nodes gets TRYAGAIN from both until the move ends (the
// source sends it ASK for a key it no longer has, the target TRYAGAIN while any is
// missing), so its redirections run out within a millisecond and the last reply
// (ASK, or TRYAGAIN) reaches the caller. Asked again later, the slot has settled.
func transientRedisError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN", "READONLY", "ASK ", "MOVED "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// slotMoving reports a Cluster reply that names a slot on its way between two nodes.
func slotMoving(detail string) bool {
	for _, p := range []string{"ASK ", "MOVED ", "TRYAGAIN"} {
		if strings.HasPrefix(detail, p) {
			return true
		}
	}
	return false
}

// isDialError reports an error from before anything was sent: a refused or failed dial
// (or go-redis's cached copy of one).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// redisError is an error a user reads: it names the server and what to check, and it
// never shows the password, whatever the wrapped error says.
type redisError struct {
	msg string
	err error
}

func (e *redisError) Error() string { return e.msg }

func (e *redisError) Unwrap() error { return e.err }

// userError turns a go-redis error into a message that says what failed and what to do.
func (l *Locker) userError(op string, err error) error {
	server := l.target.Server()
	detail := err.Error()
	var msg string
	var nm *conn.NoMasterError
	var sa *conn.SentinelAuthError
	switch {
	case errors.As(err, &nm): // before the data servers' password advice
		msg = fmt.Sprintf("%s: %s: %s", op, server, nm)
	case errors.As(err, &sa):
		msg = fmt.Sprintf("%s: %s: %s", op, server, sa)
	case errors.Is(err, context.Canceled):
		msg = fmt.Sprintf("%s: %s: interrupted", op, server)
	case conn.IsAuthError(detail) && l.target.Password == "":
		// Redis answers a client without a password with NOAUTH, or, for a command with
		// more than 10 arguments, with "Protocol error: unauthenticated multibulk length".
		msg = fmt.Sprintf("%s authentication failed: the server requires a password and none was given (%s); put it in --redis-password-file / CRONLOCK_REDIS_PASSWORD_FILE", server, detail)
	case conn.IsAuthError(detail):
		msg = fmt.Sprintf("%s authentication failed: %s (check the password in --redis-password-file / CRONLOCK_REDIS_PASSWORD_FILE or in --redis / CRONLOCK_REDIS_URL)", server, detail)
	case strings.Contains(detail, "NOPERM"):
		msg = noPermMessage(server, detail, l.prefix)
	case strings.HasPrefix(detail, "READONLY"):
		msg = l.readOnlyMessage(op, detail)
	case strings.Contains(detail, "DB index is out of range"):
		msg = fmt.Sprintf("%s: %s has no database %d (%s); give one below the server's databases setting (16 unless changed) in --redis / CRONLOCK_REDIS_URL", op, server, l.target.DB, detail)
	case strings.HasPrefix(detail, "OOM"):
		// Only a new lock needs memory: renewals and releases go through on a full server.
		msg = fmt.Sprintf("%s is full: %s (maxmemory reached under noeviction: no new lock can be taken until memory is freed on the server or maxmemory raised)", server, detail)
	case lockrun.IsTimeout(err) && l.unreachable() != nil && l.target.TLSAdvice(l.unreachable()) != "":
		msg = fmt.Sprintf("%s unreachable: %s (%s)", server, l.unreachable(), l.target.TLSAdvice(l.unreachable()))
	case lockrun.IsTimeout(err) && l.unreachable() != nil:
		// The time ran out waiting for a connection: say why none could be made.
		msg = fmt.Sprintf("%s unreachable: %s (check --redis / CRONLOCK_REDIS_URL)", server, l.unreachable())
	case lockrun.IsTimeout(err):
		msg = fmt.Sprintf("%s did not answer within %s: %s (check --redis / CRONLOCK_REDIS_URL, or raise --redis-timeout)", server, l.timeout, detail)
	case isNetworkError(err) && l.target.TLSAdvice(err) != "":
		msg = fmt.Sprintf("%s unreachable: %s (%s)", server, detail, l.target.TLSAdvice(err))
	case isNetworkError(err):
		msg = fmt.Sprintf("%s unreachable: %s (check --redis / CRONLOCK_REDIS_URL)", server, detail)
	case l.target.Scheme == conn.SchemeCluster && slotMoving(detail):
		msg = fmt.Sprintf("%s: %s: the key's slot is being moved between Cluster nodes (%s) and did not settle within --redis-timeout %s: a reshard that holds a slot half-way for longer fails runs; let it finish (redis-cli --cluster fix ends one left half-way), or raise --redis-timeout / CRONLOCK_REDIS_TIMEOUT",
			op, server, strings.TrimSpace(detail), l.timeout)
	case kindHint(detail) != "":
		detail, _, _ = strings.Cut(detail, ", with args beginning with") // the lock's token, keys
		msg = fmt.Sprintf("%s: %s: %s (%s)", op, server, strings.TrimSpace(detail), kindHint(detail))
	default:
		msg = fmt.Sprintf("%s: %s: %s", op, server, detail)
	}
	// Built from parts that never hold the password (the server is host:port, and Redis
	// does not echo a password back), so nothing is replaced in it: replacing the text of
	// a short password ("1") would garble the message and show where the password was.
	return &redisError{msg: msg, err: err}
}

// retryableRedisError reports an error of an operation that asking again later may cure:
// the server could not be reached or did not answer in time, a connection broke, or it
// was loading its data. Not a refusal (auth, ACL), an error reply, or a reply cronlock
// does not understand.
func retryableRedisError(err error) bool {
	var re *redisError
	if !errors.As(err, &re) || errors.Is(err, context.Canceled) || conn.IsAuthError(err.Error()) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return transientRedisError(rerr)
	}
	return lockrun.IsTimeout(re.err) || isNetworkError(re.err)
}

func isNetworkError(err error) bool {
	var ne net.Error
	var rerr redis.Error
	return errors.As(err, &ne) || (!errors.As(err, &rerr) && err != nil)
}

// readOnlyMessage is the message of a write refused by a replica, which stayed one for
// the whole operation.
func (l *Locker) readOnlyMessage(op, detail string) string {
	detail, _, _ = strings.Cut(detail, " script:") // the script's SHA1 and line say nothing here
	server := l.target.Server()
	if l.target.Scheme == conn.SchemeSentinel {
		return fmt.Sprintf("%s: %s: the server the Sentinels name as the master %s is a read-only replica (%s): a failover is under way, or a server was made a replica by hand and the Sentinels have not seen it yet; if it lasts, compare SENTINEL GET-MASTER-ADDR-BY-NAME %s with INFO replication on the servers",
			op, server, l.target.Master, detail, l.target.Master)
	}
	return fmt.Sprintf("%s: %s is a read-only replica (%s): point --redis / CRONLOCK_REDIS_URL at the master, or use a redis-sentinel:// URL to find it", op, server, detail)
}

// kindHint is the advice for a server of another kind than the URL's scheme expects (a
// data server named as a Sentinel, a Sentinel as a data server, a server outside a
// Cluster in redis-cluster://), told by its reply to the first command; else "". The
// command's arguments, which go-redis's reply quotes, are cut: they hold the lock's token.
func kindHint(detail string) string {
	switch {
	case strings.Contains(detail, "unknown command 'sentinel'"):
		return "it is not a Sentinel: list the Sentinels (port 26379 unless given) in redis-sentinel://, or use redis:// for one server; check --redis / CRONLOCK_REDIS_URL"
	case strings.Contains(detail, "cluster support disabled"):
		return "it is not a Cluster node: use redis:// for one server, or redis-sentinel:// for its Sentinels; check --redis / CRONLOCK_REDIS_URL"
	case strings.Contains(detail, "unknown command '"):
		return "is it a Sentinel? Then use redis-sentinel://HOST:PORT/MASTER; or was the command renamed (rename-command)? Check --redis / CRONLOCK_REDIS_URL"
	}
	return ""
}
