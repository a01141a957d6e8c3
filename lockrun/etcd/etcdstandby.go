package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

// Standbys on etcd (run --standby), as on Redis: a standby reads the entry of the tick's
// run, waits (holding a slot: a key under standby/ whose value is when it expires) while
// that run may be running, and takes the tick over in the transaction that creates the
// lock key, which also compares the tick record and the lost run's entry with what the
// standby judged: the lock key gone (its lease ended on the cluster), the entry still
// running, and the lease's end passed on the standby's own clock (Request.Standby.LostRun).

func (l *Locker) standbyDir(key string) string { return l.prefix + "{" + key + "}:standby/" }

// takeover is a standby's claim of a lost run's tick.
type takeover struct {
	of, node string
	at       int
	entryKey string
	entryRev int64  // the lost run's entry as the standby judged it
	abandon  string // its entry marked abandoned ("" = leave it: it was completed)
}

var resumable = map[string]bool{"SIGTERM": true, "SIGHUP": true}

// standby judges req's tick, claimed by rec's run, for a standby: a takeover, or the
// error the attempt returns (wait, end, or a skip when every slot is taken).
func (l *Locker) standby(ctx context.Context, req lockrun.Request, rec *lockrun.TickValue, lockKV []byte, lockLease int64) (*takeover, error) {
	entryKey := l.runsDir(req.Key) + rec.RunID
	var resp *clientv3.GetResponse
	err := l.op(ctx, "read the tick's run of "+req.Key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Get(ctx, entryKey)
		return err
	})
	if err != nil {
		return nil, err
	}
	at := max(rec.At, 1)
	end := func(why, st string) error {
		l.dropSlot(ctx, req)
		return &lockrun.StandbyEndError{Key: req.Key, Why: why, Status: st, Node: rec.Node, RunID: rec.RunID, Attempt: at}
	}
	var e struct {
		S    string `json:"s"`
		Sig  string `json:"sig"`
		Hung bool   `json:"hb"`
	}
	var raw []byte
	var rev int64
	if len(resp.Kvs) > 0 {
		raw, rev = resp.Kvs[0].Value, resp.Kvs[0].ModRevision
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
		t := &takeover{of: rec.RunID, node: rec.Node, at: at + 1, entryKey: entryKey, entryRev: rev}
		if e.S == "running" {
			t.abandon = abandoned(raw, req, at+1, req.WallNow().UnixMicro())
		}
		return t, nil
	}
	if !l.takeSlot(ctx, req) {
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

// takeSlot puts this standby's slot (its expiry, µs) under standby/, dropping expired
// ones, and reports whether it is among the --standbys allowed. Not one transaction: two
// standbys that ask at the same instant may both get the last slot.
func (l *Locker) takeSlot(ctx context.Context, req lockrun.Request) bool {
	dir, now := l.standbyDir(req.Key), req.WallNow().UnixMicro()
	mine := dir + req.RunID
	var resp *clientv3.GetResponse
	if l.call(ctx, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Get(ctx, dir, clientv3.WithPrefix())
		return err
	}) != nil {
		return true // a slot that cannot be counted is not refused: the wait is bounded anyway
	}
	n, have := 0, false
	for _, kv := range resp.Kvs {
		exp, _ := strconv.ParseInt(string(kv.Value), 10, 64)
		switch {
		case string(kv.Key) == mine:
			have = true
		case exp < now:
			l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
				_, err := c.Delete(ctx, string(kv.Key))
				return err
			})
		default:
			n++
		}
	}
	if !have && n >= max(req.Standby.Slots, 1) {
		return false
	}
	exp := strconv.FormatInt(now+req.Standby.SlotTTL.Microseconds(), 10)
	l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.Put(ctx, mine, exp)
		return err
	})
	return true
}

// dropSlot frees this standby's slot (best effort: it expires anyway).
func (l *Locker) dropSlot(ctx context.Context, req lockrun.Request) {
	l.call(ctx, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.Delete(ctx, l.standbyDir(req.Key)+req.RunID)
		return err
	})
}

// TickAttempt is the tick's attempt this run is, and the lost run it took over.
func (el *etcdLease) TickAttempt() (int, string) { return max(el.attempt, 1), el.takeoverOf }
