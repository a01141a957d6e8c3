package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
	"cronlock/runstatus"
)

// exitError is the exit code of a run that ends with status error (jobrun.ExitFailed):
// the code its ledger entry records when the backend ends the run itself.
const exitError = 125

// --min-replicas: WAIT N is pipelined right after the acquire and every renewal, on the
// connection that ran the script (WAIT counts the replicas that acknowledged that
// connection's writes). It cannot run inside the script. On a Cluster it goes to the
// master of the lock's slot, which go-redis would not do for a command without a key.
// The script goes by SHA1 there too (redisscript.go); on NOSCRIPT the body follows with
// a WAIT of its own, as the first WAIT came after a script that did not run.

// ReplicaError is returned by Acquire when fewer replicas than --min-replicas
// acknowledged the new lock in time. The lock was let go (and a claimed tick given back).
type ReplicaError struct {
	Key    string
	Server string
	Want   int
	Got    int64
	Within time.Duration // the time WAIT was given
}

func (e *ReplicaError) Error() string {
	return fmt.Sprintf("only %d of %d replicas acknowledged the lock %s within %s on %s; the lock was let go and the job not started: check the replicas (INFO replication on the master), or lower --min-replicas (CRONLOCK_REDIS_MIN_REPLICAS)",
		e.Got, e.Want, e.Key, e.Within.Round(time.Millisecond), e.Server)
}

// acked is what one evalAcked attempt learned from WAIT.
type acked struct {
	n      int64         // replicas that acknowledged; -1 = WAIT not sent
	within time.Duration // the time WAIT was given
	// replicas is the master's connected_slaves (INFO replication, sent with an
	// acquire's WAIT); -1 = not known.
	replicas int
}

// evalAcked is eval for the scripts that take or extend a lease: with minReplicas it
// sends WAIT right after the script in the same round trip, and returns its count; with
// countReplicas (an acquire) also INFO replication, in that round trip too.
func (l *Locker) evalAcked(ctx context.Context, countReplicas bool, script string, keys []string, args ...any) (any, acked, bool, error) {
	if l.minReplicas <= 0 {
		res, unknown, err := l.eval(ctx, script, keys, args...)
		return res, acked{n: -1, replicas: -1}, unknown, err
	}
	a := acked{replicas: -1}
	res, unknown, err := l.retry(ctx, func(octx context.Context) (any, error) {
		p, err := l.srv.PipelinerFor(octx, keys[0])
		if err != nil {
			return nil, err
		}
		var info *redis.Cmd
		send := func(p conn.Pipeliner, asking bool) (ev, w *redis.Cmd) {
			a.within = waitTimeout(octx)
			bySHA := !evalshaDenied.Load()
			if bySHA && !scriptRanBySHA(script) {
				// The server may not know the script (a restart, a failover, its first
				// run): WAIT is answered after the script's NOSCRIPT, and on a connection
				// whose earlier writes a lagging replica has not acknowledged it blocks for
				// all it was given. Half is left for the body to be sent with a WAIT of its
				// own.
				a.within = (a.within / 2).Truncate(time.Millisecond)
			}
			ev, w, info = l.pipelineAcked(octx, p, asking, bySHA, countReplicas, a.within, script, keys, args...)
			if bySHA && ev.Err() == nil {
				scriptSeen.Store(scriptSHA(script), true)
			}
			if err := ev.Err(); err != nil && evalshaFallback(err) {
				// The script did not run (NOSCRIPT, or an ACL without +evalsha): send its
				// body, with a WAIT of its own, in one more round trip.
				a.within = waitTimeout(octx)
				ev, w, info = l.pipelineAcked(octx, p, asking, false, countReplicas, a.within, script, keys, args...)
			}
			return ev, w
		}
		ev, w := send(p, false)
		if addr, ok := conn.AskTarget(ev.Err()); ok {
			// The slot is being migrated and its keys are already on addr: ask there, as
			// go-redis does for a command it routes itself.
			np := l.srv.NodeClient(addr)
			ev, w = send(np, true)
			np.Close()
		}
		if info != nil {
			// An error (an ACL without +info, a late reply) leaves it unknown: the
			// eviction check already warns about +info.
			a.replicas = connectedReplicas(info)
		}
		res, err := ev.Result()
		if err != nil && lockrun.IsTimeout(err) && res != nil {
			// The script's reply was read, and only WAIT's was late: go-redis (on a
			// Cluster node's pipeline) then gives every command of the pipeline the error.
			err = nil
		}
		if err != nil {
			return nil, l.srv.Redirected(octx, err)
		}
		if a.n, err = w.Int64(); err != nil {
			// The script's reply came but WAIT's did not within the operation (the dial
			// took part of it): no replica acknowledged in time, as far as can be known.
			var rerr redis.Error
			if errors.As(err, &rerr) {
				// The server answered WAIT with an error (an ACL without +wait): the
				// script's writes stand, and the caller must undo an acquire's.
				return nil, &waitRefusedError{err}
			}
			if !lockrun.IsTimeout(err) {
				// A connection cut after the script's reply (a failover): retried as any
				// network error, the script being safe to repeat.
				return nil, err
			}
			a.n = 0
		}
		return res, nil
	})
	return res, a, unknown, err
}

// scriptSeen holds the SHA1s of the scripts a server of this process ran by SHA: their
// next EVALSHA will most likely not meet NOSCRIPT.
var scriptSeen sync.Map

func scriptRanBySHA(script string) bool {
	_, ok := scriptSeen.Load(scriptSHA(script))
	return ok
}

// pipelineAcked sends the script (by SHA1 when bySHA, else its body), WAIT and, with
// countReplicas, INFO replication in one round trip on p, and returns their replies
// (info nil without countReplicas).
func (l *Locker) pipelineAcked(octx context.Context, p conn.Pipeliner, asking, bySHA, countReplicas bool, within time.Duration, script string, keys []string, args ...any) (ev, w, info *redis.Cmd) {
	p.Pipelined(octx, func(pp redis.Pipeliner) error {
		if asking {
			pp.Do(octx, "ASKING")
		}
		if bySHA {
			ev = pp.EvalSha(octx, scriptSHA(script), keys, args...)
		} else {
			ev = pp.Eval(octx, script, keys, args...)
		}
		w = pp.Do(octx, "WAIT", l.minReplicas, within.Milliseconds())
		if countReplicas {
			info = pp.Do(octx, "INFO", "replication")
		}
		return nil
	})
	return ev, w, info
}

// connectedReplicas is connected_slaves from INFO replication's reply; -1 when the reply
// is an error or lacks it.
func connectedReplicas(info *redis.Cmd) int {
	text, err := info.Text()
	if err != nil {
		return -1
	}
	_, rest, ok := strings.Cut(text, "connected_slaves:")
	if !ok {
		return -1
	}
	line, _, _ := strings.Cut(rest, "\n")
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return -1
	}
	return n
}

// MinorityError is passed to Request.Warn when --min-replicas is not a majority of the
// master's replicas: a partition can then leave the master, and a holder, with enough
// replicas to acknowledge while the Sentinels promote one of the others. The lock was
// taken.
type MinorityError struct {
	Server   string
	Want     int // --min-replicas
	Replicas int // connected_slaves
}

func (e *MinorityError) Error() string {
	return fmt.Sprintf("--min-replicas %d is not a majority of the %d replicas of %s: a partition can leave the master with replicas that acknowledge on its side while the others are promoted, so it does not keep two hosts from running the job; set --min-replicas (CRONLOCK_REDIS_MIN_REPLICAS) to %d or more",
		e.Want, e.Replicas, e.Server, e.Replicas/2+1)
}

// checkMajority warns when an acquire's --min-replicas is not a majority of the master's
// replicas. It says nothing when their number is not known.
func (l *Locker) checkMajority(req lockrun.Request, a acked) {
	if l.minReplicas <= 0 || a.replicas < 0 || 2*l.minReplicas > a.replicas || req.Warn == nil {
		return
	}
	req.Warn(&MinorityError{Server: l.target.Server(), Want: l.minReplicas, Replicas: a.replicas})
}

// waitTimeout is WAIT's time-out: what is left of the operation, less a margin for the
// reply to come back before the client gives up on it; never 0, which means forever.
func waitTimeout(octx context.Context) time.Duration {
	left := time.Second
	if dl, ok := octx.Deadline(); ok {
		left = time.Until(dl)
	}
	return max(left-max(left/10, 5*time.Millisecond), time.Millisecond).Truncate(time.Millisecond)
}

// checkAcquireAcks lets a lease go when fewer than minReplicas acknowledged it.
func (l *Locker) checkAcquireAcks(ctx context.Context, lease *redisLease, a acked, node string, tick time.Time) error {
	if l.minReplicas <= 0 || a.n >= int64(l.minReplicas) {
		return nil
	}
	lease.GiveBackTick()
	lease.noAck = true
	rerr := &ReplicaError{Key: lease.key, Server: l.target.Server(), Want: l.minReplicas, Got: max(a.n, 0), Within: a.within}
	// The claim's entry is completed as the run's error in the same script: a
	// shortfall has an entry.
	lease.SetRecord(&lockrun.RunRecord{RunID: lease.runID, Node: node, Status: runstatus.Error, Exit: exitError,
		Tick: tick, Tries: 1, Error: rerr.Error()})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	lease.Release(rctx) // best effort: an unreleased lock expires after its TTL
	cancel()
	return rerr
}

// renewAcks is the error of a renewal that fewer than minReplicas acknowledged: not a
// lost lock, but not a confirmed one either, so the fail-closed clock keeps running.
func (l *Locker) renewAcks(key string, a acked) error {
	if l.minReplicas <= 0 || a.n >= int64(l.minReplicas) {
		return nil
	}
	return fmt.Errorf("renew lock %s: only %d of %d replicas acknowledged the renewal within %s on %s; it counts as unconfirmed (check the replicas: INFO replication on the master; or lower --min-replicas, CRONLOCK_REDIS_MIN_REPLICAS)",
		key, max(a.n, 0), l.minReplicas, a.within.Round(time.Millisecond), l.target.Server())
}
