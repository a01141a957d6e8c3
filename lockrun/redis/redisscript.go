package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun/redis/conn"
)

// Scripts go by their SHA1 (EVALSHA), and the body (EVAL) only when Redis answers
// NOSCRIPT: after a restart, a failover or SCRIPT FLUSH, once per script until some run
// has sent it again. A body sent with every EVAL costs Redis a SHA1 of its kilobytes on
// every call (the largest single item of its CPU time in the herd benchmark, ahead of
// the scripts themselves) and the network their bytes; NOSCRIPT costs the first runs
// after a restart one round trip per script. NOSCRIPT means the script did not run, so
// the fallback is always safe to send. So is a refusal of EVALSHA by an ACL written for
// an older cronlock (+eval without +evalsha): such a fleet keeps working, at the cost of
// that round trip, which the rest of the process then saves by sending EVAL alone.

// scriptSHAs maps a script's body to its SHA1 in hex, computed once per process.
var scriptSHAs sync.Map

func scriptSHA(script string) string {
	if v, ok := scriptSHAs.Load(script); ok {
		return v.(string)
	}
	sum := sha1.Sum([]byte(script))
	sha := hex.EncodeToString(sum[:])
	scriptSHAs.Store(script, sha)
	return sha
}

// evalshaDenied is set once the server's ACL refused EVALSHA to this process.
var evalshaDenied atomic.Bool

// evalScript runs script with EVALSHA, falling back to EVAL when Redis lacks it or the
// ACL forbids EVALSHA.
func evalScript(ctx context.Context, c conn.Commands, script string, keys []string, args ...any) *redis.Cmd {
	if evalshaDenied.Load() {
		return c.Eval(ctx, script, keys, args...)
	}
	cmd := c.EvalSha(ctx, scriptSHA(script), keys, args...)
	if evalshaFallback(cmd.Err()) {
		return c.Eval(ctx, script, keys, args...)
	}
	return cmd
}

// evalshaFallback reports an EVALSHA error after which the body must be sent: NOSCRIPT,
// or an ACL that refuses EVALSHA (remembered for the rest of the process).
func evalshaFallback(err error) bool {
	switch {
	case err == nil:
		return false
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return true
	case redis.HasErrorPrefix(err, "NOPERM") && strings.Contains(strings.ToLower(err.Error()), "'evalsha'"):
		evalshaDenied.Store(true)
		return true
	}
	return false
}
