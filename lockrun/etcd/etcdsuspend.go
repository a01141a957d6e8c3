package etcd

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
	"cronlock/runstatus"
)

// The key's suspension (cronlock suspend) is <prefix>{KEY}:suspend, read by Acquire in
// the transaction that reads the lock and the tick record: no round trip of its own. etcd
// has no clock of its own, so --for and --until are judged on the reading host's clock.

var (
	_ lockrun.Suspender        = (*Locker)(nil)
	_ lockrun.SuspensionLister = (*Locker)(nil)
)

func (l *Locker) suspendKey(key string) string { return l.prefix + "{" + key + "}:suspend" }

// Suspend pauses key on every host until s.Until (zero: until Resume).
func (l *Locker) Suspend(ctx context.Context, key string, s *lockrun.Suspension) error {
	if err := lockrun.ValidKey(key); err != nil {
		return err
	}
	return l.op(ctx, "suspend "+key, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.Put(ctx, l.suspendKey(key), string(lockrun.EncodeSuspension(s)))
		return err
	})
}

// Resume deletes key's suspension and returns it, or *lockrun.NotSuspendedError.
func (l *Locker) Resume(ctx context.Context, key string) (*lockrun.Suspension, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	var resp *clientv3.DeleteResponse
	err := l.op(ctx, "resume "+key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Delete(ctx, l.suspendKey(key), clientv3.WithPrevKV())
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.PrevKvs) == 0 {
		return nil, &lockrun.NotSuspendedError{Key: key, Backend: l.Describe()}
	}
	s := lockrun.DecodeSuspension(resp.PrevKvs[0].Value)
	if s.Lifted(time.Now()) {
		return nil, &lockrun.NotSuspendedError{Key: key, Backend: l.Describe()}
	}
	l.heldUntilNow(ctx, key)
	return s, nil
}

// heldUntilNow notes in key's tick record that no tick was due until now (best effort):
// the claim after a resume then does not call the ticks of the suspension never fired,
// even if no host's cron fired meanwhile.
func (l *Locker) heldUntilNow(ctx context.Context, key string) {
	tickKey := l.tickKey(key)
	l.op(ctx, "note the resume of "+key, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.Get(ctx, tickKey)
		if err != nil || len(resp.Kvs) == 0 {
			return err
		}
		var r lockrun.TickValue
		if json.Unmarshal(resp.Kvs[0].Value, &r) != nil {
			return nil
		}
		now := strconv.FormatInt(time.Now().UnixMicro(), 10)
		if digits(r.HeldUS) && !greaterDec(now, r.HeldUS) {
			return nil
		}
		r.HeldUS = now
		b, _ := json.Marshal(r)
		_, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(tickKey), "=", resp.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(tickKey, string(b))).Commit()
		return err
	})
}

// ReadSuspension returns key's suspension in force, nil when there is none.
func (l *Locker) ReadSuspension(ctx context.Context, key string) (*lockrun.Suspension, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	var resp *clientv3.GetResponse
	err := l.op(ctx, "read the suspension of "+key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Get(ctx, l.suspendKey(key))
		return err
	})
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return inForce(resp.Kvs[0].Value, time.Now()), nil
}

// AllSuspensions finds every suspension under the prefix by a walk of its key names
// (keys only, in pages), then reads each one.
func (l *Locker) AllSuspensions(ctx context.Context) (map[string]*lockrun.Suspension, error) {
	names, err := l.walk(ctx, "list the suspensions", "suspend")
	if err != nil {
		return nil, err
	}
	out := map[string]*lockrun.Suspension{}
	for _, n := range names {
		s, err := l.ReadSuspension(ctx, n)
		if err != nil {
			return nil, err
		}
		if s != nil {
			out[n] = s
		}
	}
	return out, nil
}

// inForce is the stored suspension v, nil when its until has passed at now.
func inForce(v []byte, now time.Time) *lockrun.Suspension {
	s := lockrun.DecodeSuspension(v)
	if s.Lifted(now) {
		return nil
	}
	return s
}

// suspended records a run of a suspended key in the fleet's record, once per tick (the
// first host writes the entry, the others count themselves in it, best effort), notes
// the tick as fired so that the claim after a resume does not call it never fired, and
// returns the run's error. Only a suspended run pays these round trips.
func (l *Locker) suspended(ctx context.Context, req lockrun.Request, s *lockrun.Suspension, tickRev int64, rec *lockrun.TickValue) error {
	e := &lockrun.SuspendedError{Key: req.Key, Suspension: s}
	now := req.WallNow().UnixMicro()
	note := "suspended by " + s.By
	if s.Reason != "" {
		note += ": " + s.Reason
	}
	ent := lockrun.FleetEntry{RunID: lockrun.SuspendedEntryID(req.Tick, s, req.Node),
		Node: strings.ToValidUTF8(req.Node[:min(len(req.Node), maxEntryNode)], ""), Status: runstatus.Suspended,
		Error: note, StartUS: now, EndUS: now, Count: 1, LastUS: now}
	if !req.Tick.IsZero() {
		ent.TickUS = req.Tick.UnixMicro()
	}
	b, _ := json.Marshal(ent)
	key := l.runsDir(req.Key) + ent.RunID
	var resp *clientv3.TxnResponse
	err := l.op(ctx, "record the suspended run of "+req.Key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(b))).Else(clientv3.OpGet(key)).Commit()
		return err
	})
	switch {
	case err != nil:
		e.RecordErr = err.Error()
	case !resp.Succeeded:
		if kv := firstKV(resp, 0); kv != nil {
			var old lockrun.FleetEntry
			if json.Unmarshal(kv.Value, &old) == nil {
				old.Count, old.LastUS = max(old.Count, 1)+1, now
				nb, _ := json.Marshal(old)
				l.op(ctx, "count the suspended run of "+req.Key, func(ctx context.Context, c *clientv3.Client) error {
					_, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
						Then(clientv3.OpPut(key, string(nb))).Commit()
					return err
				})
			}
		}
	}
	if !req.Tick.IsZero() {
		l.noteHeld(ctx, req, tickRev, rec)
	}
	return e
}
