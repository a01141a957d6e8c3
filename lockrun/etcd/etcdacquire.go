package etcd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"cronlock/lockrun"
	"cronlock/runstatus"
)

// Acquire takes req.Key: it reads the lock (and the tick record), and only when the lock
// is free grants a lease and creates the key in a transaction that succeeds only if the
// key is still absent (and the tick record unchanged), the grant and the transaction
// sent together. A held lock thus costs one round trip; a taken one two. With req.Wait
// it waits on a watch of the key, woken by its deletion, and also polls every
// min(1s, ttl/3).
func (l *Locker) Acquire(ctx context.Context, req lockrun.Request) (lockrun.Lease, error) {
	if err := lockrun.ValidKey(req.Key); err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("the lock TTL must be positive, not %s (--ttl)", req.TTL)
	}
	if req.Wait <= 0 {
		lease, held, err := l.attemptOutlasting(ctx, req)
		if err != nil {
			return nil, err
		}
		if held != nil {
			return nil, &lockrun.HeldError{Key: req.Key, Holder: held}
		}
		return lease, nil
	}
	var rev int64 // the lock key's revision that the last attempt saw held
	return lockrun.Wait(ctx, req, lockrun.Waiter{
		Attempt: func(ctx context.Context) (lockrun.Lease, *lockrun.Holder, error) {
			lease, held, r, err := l.attempt(ctx, req, false)
			rev = r
			if lease == nil {
				return nil, held, err // not a typed nil in the interface
			}
			return lease, held, err
		},
		Retryable: retryableEtcdError,
		Sleep: func(ctx context.Context, d time.Duration, _ *lockrun.Holder) error {
			return l.waitDelete(ctx, req.Key, rev, d)
		},
		Poll: l.poll,
	})
}

// attemptOutlasting is one attempt that rides out a leader election: the cluster's "no
// leader" and "leader changed" are asked again for up to one operation time-out (an
// election takes about a second), as the Redis backend rides out a restart.
func (l *Locker) attemptOutlasting(ctx context.Context, req lockrun.Request) (lockrun.Lease, *lockrun.Holder, error) {
	deadline := time.Now().Add(l.timeout)
	for {
		lease, held, _, err := l.attempt(ctx, req, false)
		if err == nil || !serverBusy(err) || time.Now().After(deadline) {
			return lease, held, err
		}
		req.OnTry = nil // the same try, asked again: not another attempt of the run
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, err
		case <-t.C:
		}
	}
}

// waitDelete returns when the lock key is deleted after revision rev (0: unknown, then
// it only sleeps), after d, or with ctx's error.
func (l *Locker) waitDelete(ctx context.Context, key string, rev int64, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var events clientv3.WatchChan
	if rev > 0 {
		// A watch that cannot start (no login) leaves the poll to wake the waiter.
		l.call(wctx, func(ctx context.Context, c *clientv3.Client) error {
			events = c.Watch(clientv3.WithRequireLeader(ctx), l.lockKey(key), clientv3.WithRev(rev+1), clientv3.WithFilterPut())
			return nil
		})
	}
	for {
		select {
		case w, ok := <-events:
			if !ok || w.Err() != nil || len(w.Events) > 0 {
				if !ok || w.Err() != nil {
					events = nil // a broken watch: the poll still wakes the waiter
					continue
				}
				return nil
			}
		case <-wctx.Done():
			return ctx.Err()
		}
	}
}

// ClaimMissed claims req.Tick as missed without taking the lock.
func (l *Locker) ClaimMissed(ctx context.Context, req lockrun.Request) error {
	if req.Tick.IsZero() {
		return fmt.Errorf("claim a missed tick of %s: no tick given", req.Key)
	}
	_, _, _, err := l.attempt(ctx, req, true)
	return err
}

// attempt asks for the lock once (a changed tick record is read again, a few times). It
// returns the lease, or the holder and the revision it was seen at when another run holds
// the lock. With missed it claims the tick alone, as missed.
func (l *Locker) attempt(ctx context.Context, req lockrun.Request, missed bool) (lockrun.Lease, *lockrun.Holder, int64, error) {
	c, err := l.client()
	if err != nil {
		return nil, nil, 0, err
	}
	if req.OnTry != nil {
		req.OnTry()
	}
	lockKey, tickKey := l.lockKey(req.Key), l.tickKey(req.Key)
	scheduled := !req.Tick.IsZero()
	for range 5 {
		// The lease counts from before the Grant was sent.
		sent := lockrun.ClockOr(l.now)()
		var read *clientv3.TxnResponse
		suspIdx := 0
		err := l.op(ctx, "take lock "+req.Key, func(ctx context.Context, c *clientv3.Client) (err error) {
			ops := []clientv3.Op{clientv3.OpGet(lockKey), clientv3.OpGet(tickKey)}
			if scheduled && req.Known {
				// The data-loss check: a key this host claimed has entries (or a tick record).
				ops = append(ops, clientv3.OpGet(l.runsDir(req.Key), clientv3.WithPrefix(), clientv3.WithCountOnly()))
			}
			// The suspension (cronlock suspend), in the same read.
			suspIdx = len(ops)
			ops = append(ops, clientv3.OpGet(l.suspendKey(req.Key)))
			read, err = c.Txn(ctx).Then(ops...).Commit()
			return err
		})
		if err != nil {
			return nil, nil, 0, err
		}
		lockKV, tickKV := firstKV(read, 0), firstKV(read, 1)
		var rec *lockrun.TickValue
		var tickRev int64
		if tickKV != nil {
			tickRev = tickKV.ModRevision
			var r lockrun.TickValue
			if json.Unmarshal(tickKV.Value, &r) == nil && digits(r.TickUS) {
				rec = &r
			}
		}
		// Suspended: nothing is claimed, also by a standby about to take the tick over.
		if kv := firstKV(read, suspIdx); kv != nil {
			if s := inForce(kv.Value, req.WallNow()); s != nil {
				return nil, nil, 0, l.suspended(ctx, req, s, tickRev, rec)
			}
		}
		var newTick string
		var marks claimMarks
		var to *takeover
		if scheduled {
			tickUS := strconv.FormatInt(req.Tick.UnixMicro(), 10)
			if !missed && req.Standby.Mode != "" && rec != nil && rec.RunID != req.RunID && rec.RunID != "" && rec.TickUS == tickUS && !rec.Missed {
				var lv []byte
				var ll int64
				if lockKV != nil {
					lv, ll = lockKV.Value, lockKV.Lease
				}
				if to, err = l.standby(ctx, req, rec, lv, ll); err != nil {
					return nil, nil, 0, err
				}
			}
			if rec != nil && rec.RunID != req.RunID && !greaterDec(tickUS, rec.TickUS) && to == nil {
				l.countSkip(ctx, c, req.Key, tickRev, *rec)
				rec.Skips++
				raw, _ := json.Marshal(rec)
				return nil, nil, 0, lockrun.TickErrorOf(req, string(raw))
			}
			marks.TickMarks = lockrun.ClaimMarks(rec, req, req.WallNow().UnixMicro())
			// etcd has no fencing counter (the token is the lock key's create revision): a
			// key this host claimed before with neither a tick record nor an entry left was
			// lost (a restore from an older snapshot, keys deleted by hand).
			marks.dataLoss = !missed && req.Known && tickKV == nil && countOf(read, 2) == 0
			newTick = l.newTickRecord(req, rec, tickUS, missed, marks.Sched, to)
		}
		if missed {
			// The missed run's entry comes with its claim; the run completes it (its exit,
			// its line) in a round trip of its own, off the success path.
			now := req.WallNow().UnixMicro()
			var resp *clientv3.TxnResponse
			err := l.op(ctx, "claim the tick of "+req.Key, func(ctx context.Context, c *clientv3.Client) (err error) {
				then := append([]clientv3.Op{clientv3.OpPut(tickKey, newTick),
					clientv3.OpPut(l.runsDir(req.Key)+req.RunID, marks.entry(req, runstatus.Missed, now, now))}, l.neverFiredOps(req, marks, now)...)
				resp, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(tickKey), "=", tickRev)).Then(then...).Commit()
				return err
			})
			if err != nil {
				return nil, nil, 0, err
			}
			if resp.Succeeded {
				l.warnMarks(req, marks)
				return nil, nil, 0, nil
			}
			continue // claimed meanwhile: judge the new record
		}
		if lockKV != nil {
			if scheduled {
				l.noteHeld(ctx, req, tickRev, rec)
			}
			return nil, holderOf(lockKV.Value, lockKV.CreateRevision), read.Header.Revision, nil
		}
		lease, retry, err := l.create(ctx, c, req, sent, tickRev, newTick, marks, to)
		if err != nil || !retry {
			if lease == nil {
				return nil, nil, 0, err // not a typed nil in the interface
			}
			l.warnMarks(req, marks)
			return marks.wrap(lease), nil, 0, err
		}
		// Taken, or the tick claimed, since the read: read again.
	}
	return nil, nil, 0, fmt.Errorf("take lock %s on %s: the tick record kept changing under this run; try again", req.Key, l.Describe())
}

// create grants the lease and creates the lock key (and claims the tick) if the key is
// still absent and the tick record unchanged. retry reports that it was not: read again.
// When no reply came, the lease is revoked, which deletes a key it may have created.
//
// The grant and the transaction travel together, in one round trip: the lease's ID is
// chosen here, so the transaction can name it before the grant has answered. The cluster
// nearly always applies them in the order sent; a transaction that overtook its grant is
// refused whole ("lease not found") and is sent again once the grant has answered.
func (l *Locker) create(ctx context.Context, c *clientv3.Client, req lockrun.Request, sent time.Duration, tickRev int64, newTick string, marks claimMarks, to *takeover) (lease *etcdLease, retry bool, err error) {
	id := newLeaseID()
	granted := make(chan error, 1)
	go func() {
		granted <- l.op(ctx, "take lock "+req.Key, func(ctx context.Context, c *clientv3.Client) error {
			_, err := pb.NewLeaseClient(c.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: leaseSeconds(req.TTL), ID: int64(id)})
			return rpctypes.Error(err)
		})
	}()
	now := req.WallNow()
	holder := etcdHolder{Node: req.Node, PID: req.PID, RunID: req.RunID, SinceMS: now.UnixMilli(),
		AcquiredUS: now.UnixMicro(), TTLMS: req.TTL.Milliseconds()}
	v, _ := json.Marshal(holder)
	lockKey, tickKey := l.lockKey(req.Key), l.tickKey(req.Key)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lockKey), "=", 0)}
	// The run's entry in the fleet's record exists from its claim, status running, so a
	// run that dies holding the lock stays visible (abandoned, as readers derive it) after
	// later claims; its release completes it.
	then := []clientv3.Op{clientv3.OpPut(lockKey, string(v), clientv3.WithLease(id)),
		clientv3.OpPut(l.runsDir(req.Key)+req.RunID, marks.entry(req, runstatus.Running, now.UnixMicro(), 0))}
	if newTick != "" {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(tickKey), "=", tickRev))
		then = append(then, clientv3.OpPut(tickKey, newTick))
		then = append(then, l.neverFiredOps(req, marks, now.UnixMicro())...)
	}
	if to != nil {
		// The lost run's entry must be as the standby judged it: not completed meanwhile.
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(to.entryKey), "=", to.entryRev))
		if to.slot != nil {
			// The standby's slot goes with the takeover, if it is still on the standby's lease.
			k := string(to.slot.Key)
			then = append(then, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(k), "=", to.slot.Lease)},
				[]clientv3.Op{clientv3.OpDelete(k)}, nil))
		}
		if to.abandon != "" {
			then = append(then, clientv3.OpPut(to.entryKey, to.abandon))
		}
	}
	var resp *clientv3.TxnResponse
	commit := func() error {
		return l.op(ctx, "take lock "+req.Key, func(ctx context.Context, c *clientv3.Client) (err error) {
			resp, err = c.Txn(ctx).If(cmps...).Then(then...).Else(clientv3.OpGet(lockKey)).Commit()
			return err
		})
	}
	err = commit()
	gerr := <-granted
	switch {
	case gerr != nil && errors.Is(gerr, rpctypes.ErrLeaseExist):
		return nil, true, nil // another run's lease has this ID (1 in 2^63): another ID
	case gerr != nil:
		// The lease may exist (a reply that never came) and hold the key: end it.
		l.revoke(ctx, id)
		return nil, false, gerr
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		err = commit() // it overtook the grant: the lease exists now
	}
	if err != nil {
		// The outcome is unknown: revoking the lease deletes the key if it was created.
		l.revoke(ctx, id)
		return nil, false, err
	}
	el := &etcdLease{l: l, key: req.Key, id: id, ttl: req.TTL, minHold: req.MinHold, sent: sent,
		runID: req.RunID, ticked: newTick != "", acquiredUS: now.UnixMicro(), holder: holder, wall: req.WallNow}
	if to != nil {
		el.attempt, el.takeoverOf = to.at, to.of
	}
	if resp.Succeeded {
		el.fence = resp.Header.Revision // the key was created by this very revision
		return el, false, nil
	}
	l.revoke(ctx, id)
	if kv := firstKV(resp, 0); kv != nil && kv.Lease == int64(id) {
		el.fence = kv.CreateRevision // a retried commit whose first reply was lost
		return el, false, nil
	}
	return nil, true, nil
}

// newLeaseID is a random lease ID: positive (etcd reserves 0 for "choose one"), 63 bits.
func newLeaseID() clientv3.LeaseID {
	var b [8]byte
	rand.Read(b[:])
	return clientv3.LeaseID(binary.BigEndian.Uint64(b[:])>>1 | 1)
}

// revoke ends a lease (and deletes its keys), within its own time-out; most callers
// take it as best effort.
func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	return l.call(rctx, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.Revoke(ctx, id)
		return err
	})
}

// newTickRecord is the JSON of this run's claim of its tick (acquire.lua's claimTick).
func (l *Locker) newTickRecord(req lockrun.Request, rec *lockrun.TickValue, tickUS string, missed bool, sched lockrun.SchedHistory, to *takeover) string {
	prev := ""
	if rec != nil {
		prev = rec.TickUS
		if rec.RunID == req.RunID || to != nil {
			prev = rec.PrevUS // a takeover keeps the tick before: a give-back must not leave this one claimed
		}
	}
	v := lockrun.TickValue{TickUS: tickUS, PrevUS: prev, Expr: req.Schedule, TZ: req.Zone,
		Node: req.Node, RunID: req.RunID, Missed: missed, ClaimedUS: strconv.FormatInt(req.WallNow().UnixMicro(), 10),
		CX: req.Canonical, Sched: sched, NT: req.Standby.NonTakeable}
	if to != nil {
		v.At, v.To = to.at, to.of
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// countSkip raises the skip count of the tick record, and of the claimer's entry in the
// fleet's record when its run has ended already. Best effort: the count is a nicety, and
// a record changed meanwhile is left as it is.
func (l *Locker) countSkip(ctx context.Context, c *clientv3.Client, key string, rev int64, rec lockrun.TickValue) {
	rec.Skips++
	b, _ := json.Marshal(rec)
	entryKey := l.runsDir(key) + rec.RunID
	var resp *clientv3.TxnResponse
	l.op(ctx, "count a skip", func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(l.tickKey(key)), "=", rev)).
			Then(clientv3.OpPut(l.tickKey(key), string(b)), clientv3.OpGet(entryKey)).Commit()
		return err
	})
	if resp == nil || !resp.Succeeded || rec.RunID == "" {
		return
	}
	if kv := firstKV(resp, 1); kv != nil {
		l.setEntrySkips(ctx, entryKey, kv.Value, kv.ModRevision, rec.Skips)
	}
}

// firstKV is the first key of the i-th response of a transaction, nil when none.
func firstKV(resp *clientv3.TxnResponse, i int) *mvccKV {
	if resp == nil || i >= len(resp.Responses) {
		return nil
	}
	r := resp.Responses[i].GetResponseRange()
	if r == nil || len(r.Kvs) == 0 {
		return nil
	}
	return r.Kvs[0]
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// greaterDec is a > b for decimal strings without leading zeros.
func greaterDec(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// etcdError is an error a user reads: it names the cluster and what to check.
type etcdError struct {
	msg string
	err error
}

func (e *etcdError) Error() string { return e.msg }
func (e *etcdError) Unwrap() error { return e.err }

// userError turns a client error into a message that says what failed and what to do.
// The client's errors never hold the password: etcd does not echo it.
func (l *Locker) userError(op string, err error) error {
	var ee *etcdError
	if errors.As(err, &ee) {
		return err
	}
	server := l.Describe()
	detail := err.Error()
	if s, ok := status.FromError(err); ok && s.Message() != "" {
		detail = s.Message()
	}
	// The client reports a request that never found a connection as a bare time-out; the
	// connection's own failure says more.
	timedOut, cause := lockrun.IsTimeout(err) || status.Code(err) == codes.DeadlineExceeded, ""
	if timedOut {
		cause = l.conn.cause()
	}
	var msg string
	switch {
	case errors.Is(err, context.Canceled):
		msg = fmt.Sprintf("%s: %s: interrupted", op, server)
	case errors.Is(err, rpctypes.ErrAuthFailed) || strings.Contains(detail, "authentication failed"):
		msg = fmt.Sprintf("%s authentication failed: %s (check --etcd-user / CRONLOCK_ETCD_USER and the password in CRONLOCK_ETCD_PASSWORD_FILE)", server, detail)
	case errors.Is(err, rpctypes.ErrUserEmpty) || strings.Contains(detail, "user name is empty") || strings.Contains(detail, "invalid auth token"):
		msg = fmt.Sprintf("%s requires a user: %s (set --etcd-user / CRONLOCK_ETCD_USER and CRONLOCK_ETCD_PASSWORD_FILE)", server, detail)
	case errors.Is(err, rpctypes.ErrPermissionDenied) || strings.Contains(detail, "permission denied"):
		msg = fmt.Sprintf("%s refused: %s (the etcd user's role needs readwrite on the key range with prefix %s; see docs/etcd.md)", server, detail, l.prefix)
	case errors.Is(err, rpctypes.ErrNoSpace) || strings.Contains(detail, "database space exceeded"):
		msg = fmt.Sprintf("%s is out of space (NOSPACE alarm): %s; no lock can be taken until an operator compacts and defragments the cluster and runs etcdctl alarm disarm (enable --auto-compaction-retention, see docs/etcd.md)", server, detail)
	case strings.Contains(detail, "unexpected HTTP status code") || notEtcdCause(cause):
		if cause != "" {
			detail = cause
		}
		msg = fmt.Sprintf("%s is not an etcd client endpoint: %s: %s (check --etcd / CRONLOCK_ETCD_ENDPOINTS: each must be an etcd member's client URL, port 2379 by default)", server, op, detail)
	case tlsCause(cause):
		msg = fmt.Sprintf("%s: no TLS connection could be made: %s: %s (check that --etcd / CRONLOCK_ETCD_ENDPOINTS says https:// for a server with TLS and http:// for one without, and the CA in --etcd-ca-file / CRONLOCK_ETCD_CA_FILE, and the client certificate files)", server, op, cause)
	case cause != "":
		msg = fmt.Sprintf("%s unreachable: %s: %s (check --etcd / CRONLOCK_ETCD_ENDPOINTS and that etcd runs)", server, op, cause)
	case timedOut:
		msg = fmt.Sprintf("%s unreachable or did not answer within %s: %s: %s (check --etcd / CRONLOCK_ETCD_ENDPOINTS and that etcd runs, or raise --redis-timeout)", server, l.timeout, op, detail)
	case serverBusy(err):
		msg = fmt.Sprintf("%s could not serve the request: %s: %s (the cluster is electing a leader or overloaded: try again; etcdctl endpoint status shows its leader)", server, op, detail)
	case status.Code(err) == codes.Unavailable:
		msg = fmt.Sprintf("%s unreachable: %s: %s (check --etcd / CRONLOCK_ETCD_ENDPOINTS, the TLS files, and that etcd runs)", server, op, detail)
	default:
		msg = fmt.Sprintf("%s: %s: %s", op, server, detail)
	}
	return &etcdError{msg: msg, err: err}
}

// retryableEtcdError reports an error that asking again later may cure: the cluster was
// unreachable or slow. Not a refusal (auth, permission, space).
func retryableEtcdError(err error) bool {
	var ee *etcdError
	if !errors.As(err, &ee) || errors.Is(err, context.Canceled) {
		return false
	}
	return lockrun.IsTimeout(ee.err) || status.Code(ee.err) == codes.Unavailable || status.Code(ee.err) == codes.DeadlineExceeded || serverBusy(ee.err)
}

// serverBusy reports the cluster's own "not now": no leader, a leader change, a request
// that timed out inside the cluster, too many requests. The etcd client turns these from
// gRPC's Unavailable into its own error type, which status.Code no longer reads. Not the
// NOSPACE alarm, which no waiting cures.
func serverBusy(err error) bool {
	var ee rpctypes.EtcdError
	return errors.As(err, &ee) && (ee.Code() == codes.Unavailable || ee == rpctypes.ErrTooManyRequests)
}
