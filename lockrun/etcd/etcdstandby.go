package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

// Standbys on etcd (run --standby), as on Redis: a standby reads the entry of the tick's
// run, waits (holding a slot) while that run may be running, and takes the tick over in
// the transaction that creates the lock key, which also compares the tick record and the
// lost run's entry with what the standby judged: the lock key gone (its lease ended on
// the cluster), the entry still running, and the lease's end passed on the standby's own
// clock (Request.Standby.LostRun).
//
// A slot is the key standby/<i>, i below --standbys, created only if absent (so two
// standbys that ask at once never both get the last one), valued with the standby's run
// id and attached to a lease of the standby's own of the slot's TTL, which each ask of
// the standby keeps alive: a standby killed with SIGKILL frees its slot when that lease
// ends. An older cronlock's slot is standby/<run id> with no lease, valued with when it
// expires (µs); it is counted until then, and swept after.

func (l *Locker) standbyDir(key string) string { return l.prefix + "{" + key + "}:standby/" }

// liveSlots counts the slots among kvs (a read of standby/) that are taken at nowUS: on
// a lease (a lease that ended took its key with it), or an older cronlock's not expired.
func liveSlots(kvs []*mvccKV, nowUS int64) int {
	n := 0
	for _, kv := range kvs {
		if kv.Lease != 0 || oldSlotExpiry(kv) > nowUS {
			n++
		}
	}
	return n
}

// oldSlotExpiry is when an older cronlock's slot (no lease) expires, µs; 0 for a slot on
// a lease.
func oldSlotExpiry(kv *mvccKV) int64 {
	if kv.Lease != 0 {
		return 0
	}
	exp, _ := strconv.ParseInt(string(kv.Value), 10, 64)
	return exp
}

// mySlot is runID's slot among kvs, nil when it holds none.
func mySlot(kvs []*mvccKV, runID string) *mvccKV {
	for _, kv := range kvs {
		if kv.Lease != 0 && string(kv.Value) == runID {
			return kv
		}
	}
	return nil
}

// takeover is a standby's claim of a lost run's tick.
type takeover struct {
	of, node string
	at       int
	entryKey string
	entryRev int64   // the lost run's entry as the standby judged it
	abandon  string  // its entry marked abandoned ("" = leave it: it was completed)
	slot     *mvccKV // the standby's slot, freed by the takeover; nil when it held none
}

var resumable = map[string]bool{"SIGTERM": true, "SIGHUP": true}

// standby judges req's tick, claimed by rec's run, for a standby: a takeover, or the
// error the attempt returns (wait, end, or a skip when every slot is taken).
func (l *Locker) standby(ctx context.Context, req lockrun.Request, rec *lockrun.TickValue, lockKV []byte, lockLease int64) (*takeover, error) {
	entryKey := l.runsDir(req.Key) + rec.RunID
	var resp *clientv3.TxnResponse
	err := l.op(ctx, "read the tick's run of "+req.Key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Txn(ctx).Then(clientv3.OpGet(entryKey), clientv3.OpGet(l.standbyDir(req.Key), clientv3.WithPrefix())).Commit()
		return err
	})
	if err != nil {
		return nil, err
	}
	slots := resp.Responses[1].GetResponseRange().Kvs
	mine := mySlot(slots, req.RunID)
	at := max(rec.At, 1)
	end := func(why, st string) error {
		if mine != nil {
			l.revoke(ctx, clientv3.LeaseID(mine.Lease)) // best effort: it ends anyway
		}
		return &lockrun.StandbyEndError{Key: req.Key, Why: why, Status: st, Node: rec.Node, RunID: rec.RunID, Attempt: at}
	}
	var e struct {
		S    string `json:"s"`
		Sig  string `json:"sig"`
		Hung bool   `json:"hb"`
	}
	var raw []byte
	var rev int64
	if kv := firstKV(resp, 0); kv != nil {
		raw, rev = kv.Value, kv.ModRevision
		json.Unmarshal(raw, &e)
	}
	// lock_lost: the run stopped its job fail-closed (cut off, or frozen past its lease
	// and woken) and completed its entry before a standby asked: the tick is not done.
	ok := e.S == "running" || e.S == "lock_lost" || e.S == "interrupted" && resumable[e.Sig] || e.S == "timeout" && e.Hung || req.Standby.Mode == "failed" && (e.S == "failed" || e.S == "timeout")
	switch {
	case raw != nil && !ok:
		return nil, end("done", e.S)
	case rec.NT:
		return nil, end("nontakeable", e.S)
	case at >= max(req.Standby.MaxAttempts, 1):
		return nil, end("attempts", e.S)
	}
	if lockKV == nil && raw != nil && (e.S != "running" || req.Standby.LostRun == rec.RunID) {
		t := &takeover{of: rec.RunID, node: rec.Node, at: at + 1, entryKey: entryKey, entryRev: rev, slot: mine}
		if e.S == "running" {
			t.abandon = abandoned(raw, req, at+1, req.WallNow().UnixMicro())
		}
		return t, nil
	}
	if !l.takeSlot(ctx, req, slots, mine) {
		b, _ := json.Marshal(rec)
		return nil, lockrun.TickErrorOf(req, string(b))
	}
	w := &lockrun.StandbyWaitError{Key: req.Key, RunID: rec.RunID, Node: rec.Node, Attempt: at, PTTL: -1}
	if lockKV != nil {
		w.Holder = holderOf(lockKV, 0)
		if w.Holder.RunID == rec.RunID && lockLease != 0 {
			l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
				if r, err := c.TimeToLive(ctx, clientv3.LeaseID(lockLease)); err == nil && r.TTL >= 0 {
					w.PTTL = time.Duration(r.TTL) * time.Second
				}
				return nil
			})
		}
	}
	return nil, w
}

// abandoned is the lost run's entry raw marked abandoned, with who took it over.
func abandoned(raw []byte, req lockrun.Request, at int, nowUS int64) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return ""
	}
	m["s"] = "abandoned"
	m["e"] = "taken over by run " + req.RunID + " on " + req.Node + " as attempt " + strconv.Itoa(at)
	m["f"] = nowUS
	b, _ := json.Marshal(m)
	return string(b)
}

// takeSlot keeps this standby's slot (mine, from the read kvs of standby/) or takes one,
// and reports whether it holds one. A slot is taken in a transaction of its own that
// creates standby/<i> only if it is absent, on a new lease of the slot's TTL; a standby
// that lost the race for i reads again and tries the next free one. A slot that cannot be
// counted (the cluster did not answer) is not refused: the wait is bounded anyway, and
// the next ask tries again.
func (l *Locker) takeSlot(ctx context.Context, req lockrun.Request, kvs []*mvccKV, mine *mvccKV) bool {
	if mine != nil {
		err := l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
			_, err := c.KeepAliveOnce(ctx, clientv3.LeaseID(mine.Lease))
			return err
		})
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return true
		}
		kvs = slices.DeleteFunc(slices.Clone(kvs), func(kv *mvccKV) bool { return kv == mine }) // ended meanwhile
	}
	dir, slots, now := l.standbyDir(req.Key), max(req.Standby.Slots, 1), req.WallNow().UnixMicro()
	l.sweepOldSlots(ctx, kvs, now)
	if liveSlots(kvs, now) >= slots {
		return false
	}
	var id clientv3.LeaseID
	if l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
		r, err := c.Grant(ctx, leaseSeconds(req.Standby.SlotTTL))
		if err == nil {
			id = r.ID
		}
		return err
	}) != nil {
		return true
	}
	// Each lost race is a slot another standby took: at most slots of them.
	for range slots + 1 {
		i := freeSlot(dir, kvs, slots)
		if i < 0 || liveSlots(kvs, now) >= slots {
			break
		}
		name := dir + strconv.Itoa(i)
		var resp *clientv3.TxnResponse
		if l.call(ctx, func(ctx context.Context, c *clientv3.Client) (err error) {
			resp, err = c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(name), "=", 0)).
				Then(clientv3.OpPut(name, req.RunID, clientv3.WithLease(id))).
				Else(clientv3.OpGet(dir, clientv3.WithPrefix())).Commit()
			return err
		}) != nil {
			return true // the lease ends by itself, and with it a slot it may hold
		}
		if resp.Succeeded {
			return true
		}
		kvs = resp.Responses[0].GetResponseRange().Kvs
	}
	l.revoke(ctx, id)
	return false
}

// freeSlot is the lowest i below slots with no key standby/<i> in kvs, -1 when none.
func freeSlot(dir string, kvs []*mvccKV, slots int) int {
	taken := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		taken[string(kv.Key)] = true
	}
	for i := range slots {
		if !taken[dir+strconv.Itoa(i)] {
			return i
		}
	}
	return -1
}

// sweepOldSlots deletes older cronlocks' expired slots among kvs, each unless it changed
// since (best effort: they are not counted anyway).
func (l *Locker) sweepOldSlots(ctx context.Context, kvs []*mvccKV, nowUS int64) {
	for _, kv := range kvs {
		if exp := oldSlotExpiry(kv); kv.Lease == 0 && exp <= nowUS {
			l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
				_, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
					Then(clientv3.OpDelete(string(kv.Key))).Commit()
				return err
			})
		}
	}
}

// TickAttempt is the tick's attempt this run is, and the lost run it took over.
func (el *etcdLease) TickAttempt() (int, string) { return max(el.attempt, 1), el.takeoverOf }
