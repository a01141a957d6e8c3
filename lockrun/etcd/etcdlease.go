package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

type mvccKV = mvccpb.KeyValue

// etcdLease is a held etcd lock: the key, and the lease it is attached to.
type etcdLease struct {
	l          *Locker
	key        string
	id         clientv3.LeaseID
	fence      int64 // the key's create revision
	ttl        time.Duration
	minHold    time.Duration
	sent       time.Duration
	runID      string
	ticked     bool
	giveBack   atomic.Bool
	acquiredUS int64
	holder     etcdHolder       // the value the lock key was created with
	wall       func() time.Time // the run's wall clock (Request.Now), for the record's end
	attempt    int              // the tick's attempt this run is (0 = 1)
	takeoverOf string           // the lost run a standby's takeover took the tick from

	record    *lockrun.RunRecord
	endUS     int64
	endRev    int64 // the release's revision
	recordErr error
	// pending are earlier runs of this host whose completion never reached the cluster
	// (SetPending): the release's transaction completes them too.
	pending []lockrun.PendingCompletion
}

// SetPending gives Release earlier runs' completions that never reached the cluster (a
// release and its retry lost to a leader change, a stopped member, a lost quorum): they
// go in the release's own transaction, at no extra round trip.
func (s *etcdLease) SetPending(p []lockrun.PendingCompletion) { s.pending = p }

// AcquiredUS is the run's start in its entry ("a"): this host's clock at the claim, µs.
func (s *etcdLease) AcquiredUS() string { return strconv.FormatInt(s.acquiredUS, 10) }

// FencingToken is the lock key's create revision: it rises across the whole cluster and
// survives restarts.
func (s *etcdLease) FencingToken() uint64 { return uint64(s.fence) }

// TTL is the lease length asked for (the server's, in whole seconds, is never shorter).
func (s *etcdLease) TTL() time.Duration { return s.ttl }

// Sent is when the read before the Grant was sent.
func (s *etcdLease) Sent() time.Duration { return s.sent }

// GiveBackTick makes Release give the tick back and ignore MinHold: the job never started.
func (s *etcdLease) GiveBackTick() { s.giveBack.Store(true) }

// SetRecord makes Release write rec to the fleet's record in its own transaction.
func (s *etcdLease) SetRecord(rec *lockrun.RunRecord) { s.record = rec }

// RecordErr is why Release could not write the record; nil when it was or none was given.
func (s *etcdLease) RecordErr() error { return s.recordErr }

// Renew keeps the lease alive once and checks that the key is still the one this lease
// created, both in one round trip. ErrLockLost: the lease is gone, or the key is gone or
// replaced.
func (s *etcdLease) Renew(ctx context.Context) error {
	alive := make(chan error, 1)
	go func() {
		alive <- s.l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
			_, err := c.KeepAliveOnce(ctx, s.id)
			return err
		})
	}()
	var resp *clientv3.GetResponse
	gerr := s.l.call(ctx, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Get(ctx, s.l.lockKey(s.key))
		return err
	})
	if err := <-alive; err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("renew lock %s: its lease expired or was revoked: %w", s.key, lockrun.ErrLockLost)
		}
		return s.l.userError("renew lock "+s.key, err)
	}
	if gerr != nil {
		return s.l.userError("renew lock "+s.key, gerr)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != s.fence || resp.Kvs[0].Lease != int64(s.id) {
		return fmt.Errorf("renew lock %s: the key was deleted or taken over: %w", s.key, lockrun.ErrLockLost)
	}
	return nil
}

// Release deletes the lock if it is still ours, writing the fleet's entry in the same
// transaction; with MinHold left, it moves the key to a lease of the hold left instead,
// marked released. The old lease is revoked either way: without a hold, in the same round
// trip as the transaction (the revoke deletes only keys of this lease, so it can never
// remove another holder's lock). It returns an error wrapping ErrLockLost when the lock
// was no longer ours (nothing is removed then).
func (s *etcdLease) Release(ctx context.Context) error {
	giveBack := s.ticked && s.giveBack.Load()
	if giveBack {
		s.l.giveBackTick(ctx, s.key, s.runID)
	}
	lockKey := s.l.lockKey(s.key)
	mine := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lockKey), "=", s.fence),
		clientv3.Compare(clientv3.LeaseValue(lockKey), "=", s.id)}
	then := []clientv3.Op{clientv3.OpDelete(lockKey)}
	hold := s.minHold - (lockrun.ClockOr(s.l.now)() - s.sent)
	if hold > 0 && !giveBack {
		var g *clientv3.LeaseGrantResponse
		err := s.l.op(ctx, "release lock "+s.key, func(ctx context.Context, c *clientv3.Client) (err error) {
			g, err = c.Grant(ctx, leaseSeconds(hold))
			return err
		})
		if err != nil {
			return err
		}
		h := s.holder
		h.ReleasedUS = s.wall().UnixMicro()
		b, _ := json.Marshal(h)
		then = []clientv3.Op{clientv3.OpPut(lockKey, string(b), clientv3.WithLease(g.ID))}
	}
	// Without a hold, the revoke goes beside the transaction. The cluster nearly always
	// applies them in the order sent; when the revoke came first, it deleted the key, the
	// transaction finds it gone (and still writes the entry), and the revoke's success says
	// the lease was alive until then: the lock was released, not lost.
	revoked := make(chan error, 1)
	if hold <= 0 || giveBack {
		go func() { revoked <- s.l.revoke(ctx, s.id) }()
	}
	s.endUS = s.wall().UnixMicro()
	var extra []clientv3.Op
	entryKey := s.l.runsDir(s.key) + s.runID
	pend := s.l.pendingOps(s.key, s.pending)
	switch {
	case s.record != nil:
		// The count and the tick record last: afterEntry reads them there.
		extra = append(append([]clientv3.Op{clientv3.OpPut(entryKey, lockrun.EncodeFleetEntry(s.record, uint64(s.fence))+entryTail(s.acquiredUS, s.endUS, 0))}, pend...),
			clientv3.OpGet(s.l.runsDir(s.key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(s.l.tickKey(s.key)))
	case giveBack:
		// A run stopped before its job started, with no outcome to record: its claim is
		// undone (the tick goes to the next host), and so is its running entry, which would
		// otherwise read as abandoned, and as a second run of the tick once another host
		// runs it.
		extra = append([]clientv3.Op{clientv3.OpDelete(entryKey)}, pend...)
	default:
		extra = pend
	}
	var resp *clientv3.TxnResponse
	err := s.l.op(ctx, "release lock "+s.key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Txn(ctx).If(mine...).Then(append(then, extra...)...).Else(append([]clientv3.Op{clientv3.OpGet(lockKey)}, extra...)...).Commit()
		return err
	})
	if hold > 0 && !giveBack {
		// After the key has moved to the hold's lease; not after a time-out, which the
		// revoke would most likely spend again: the lease then ends by itself.
		if err != nil && retryableEtcdError(err) {
			revoked <- err
		} else {
			revoked <- s.l.revoke(ctx, s.id)
		}
	}
	rerr := <-revoked
	if err != nil {
		recorded := s.record != nil
		s.record = nil
		// A refusal (the NOSPACE alarm refuses the transaction for its fleet's entry) is no
		// reason to hold the lock for the rest of its TTL, past the alarm's end: the revoke
		// deleted the key if it was still this lease's. A time-out leaves the lease to end
		// by itself.
		if rerr != nil {
			return err
		}
		if recorded || len(s.pending) > 0 {
			// Not written: the earlier runs' completions are kept for a later run too.
			s.recordErr = err
		}
		return nil
	}
	s.endRev = resp.Header.Revision
	if s.record != nil {
		off := len(resp.Responses) - 2
		s.l.afterEntry(ctx, s.key, entryKey, s.runID, resp, off, resp.Header.Revision)
	}
	if !resp.Succeeded && (rerr != nil || firstKV(resp, 0) != nil) {
		return fmt.Errorf("release lock %s: it had already expired or been taken over: %w", s.key, lockrun.ErrLockLost)
	}
	return nil
}

// WriteRecord writes rec now, in a round trip of its own: for a run whose outcome was not
// final when it let the lock go.
func (s *etcdLease) WriteRecord(ctx context.Context, rec *lockrun.RunRecord) error {
	end := s.endUS
	if end == 0 {
		end = s.wall().UnixMicro()
	}
	return s.l.putEntry(ctx, s.key, rec, uint64(s.fence), s.acquiredUS, end, s.endRev)
}

// giveBackTick restores the tick record a run claimed, when it still names that run: the
// tick it replaced comes back (or the record goes), so the next host runs this tick.
func (l *Locker) giveBackTick(ctx context.Context, key, runID string) {
	tickKey := l.tickKey(key)
	l.op(ctx, "give back the tick of "+key, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.Get(ctx, tickKey)
		if err != nil || len(resp.Kvs) == 0 {
			return err
		}
		kv := resp.Kvs[0]
		var r map[string]any
		if json.Unmarshal(kv.Value, &r) != nil || r["run_id"] != runID {
			return nil
		}
		op := clientv3.OpDelete(tickKey)
		if prev, _ := r["prev_us"].(string); prev != "" {
			r["tick_us"], r["prev_us"], r["given_back"], r["run_id"], r["node"] = prev, "", runID, "", ""
			b, _ := json.Marshal(r)
			op = clientv3.OpPut(tickKey, string(b))
		}
		_, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(tickKey), "=", kv.ModRevision)).Then(op).Commit()
		return err
	})
}
