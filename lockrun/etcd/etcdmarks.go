package etcd

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

// The marks of a tick's claim on etcd (README, "Once per tick"): the claim reads the tick
// record before its transaction, so the rules run in Go (lockrun.ClaimMarks, the same as
// Redis's acquire script) and what they find goes into that one transaction: the claim's
// entry carries sc, fl and dl, and ticks no host claimed get a never_fired entry of their
// own.

// claimMarks is what one claim found.
type claimMarks struct {
	lockrun.TickMarks
	// dataLoss: this host claimed the key before (Request.Known), and the cluster has
	// neither its tick record nor any entry of it.
	dataLoss bool
}

func (m claimMarks) entry(req lockrun.Request, status string, startUS, endUS int64) string {
	return claimEntry(req, m, status, startUS, endUS)
}

// neverFiredOps writes the never_fired entry of the ticks the claim found unclaimed (id:
// the run id + "-nf", as on Redis), nil when there are none.
func (l *Locker) neverFiredOps(req lockrun.Request, m claimMarks, nowUS int64) []clientv3.Op {
	if m.NeverFiredTo == 0 {
		return nil
	}
	e := lockrun.FleetEntry{RunID: req.RunID + "-nf", Node: strings.ToValidUTF8(req.Node[:min(len(req.Node), maxEntryNode)], ""), Status: lockrun.NeverFiredStatus,
		TickUS: m.NeverFiredTo, NeverFiredFrom: m.NeverFiredFrom, NeverFiredTo: m.NeverFiredTo, StartUS: nowUS, EndUS: nowUS}
	b, _ := json.Marshal(e)
	return []clientv3.Op{clientv3.OpPut(l.runsDir(req.Key)+e.RunID, string(b))}
}

// warnMarks says through req.Warn what the run must tell: a data loss, a schedule that
// flipped back.
func (l *Locker) warnMarks(req lockrun.Request, m claimMarks) {
	if req.Warn == nil {
		return
	}
	if m.dataLoss {
		req.Warn(&lockrun.DataLossError{Key: req.Key, Backend: l.Describe(),
			What:  "its tick record " + l.tickKey(req.Key) + " and its entries " + l.runsDir(req.Key),
			Cause: "a restore from an older snapshot, or keys deleted by hand", Marked: true})
	}
	if m.Flip {
		req.Warn(&lockrun.ScheduleFlipError{Key: req.Key, Was: m.ScheduleWas, Now: req.Canonical})
	}
}

// noteHeld records in the tick record that req's tick fired while a run of an earlier
// tick held the lock, so that the next claim does not call it never fired. One round
// trip, on the held path only; best effort (a record changed meanwhile is left as it is).
func (l *Locker) noteHeld(ctx context.Context, req lockrun.Request, rev int64, rec *lockrun.TickValue) {
	if rec == nil {
		return
	}
	tickUS := strconv.FormatInt(req.Tick.UnixMicro(), 10)
	if !greaterDec(tickUS, rec.TickUS) || (digits(rec.HeldUS) && !greaterDec(tickUS, rec.HeldUS)) {
		return
	}
	r := *rec
	r.HeldUS = tickUS
	b, _ := json.Marshal(r)
	tickKey := l.tickKey(req.Key)
	l.op(ctx, "note a held tick", func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(tickKey), "=", rev)).Then(clientv3.OpPut(tickKey, string(b))).Commit()
		return err
	})
}

// wrap is lease with the claim's marks kept for its completed entry, which the release
// writes whole: without them it would drop what the claim found.
func (m claimMarks) wrap(lease *etcdLease) lockrun.Lease {
	if m.ScheduleWas == "" && !m.dataLoss {
		return lease
	}
	return &markedLease{etcdLease: lease, m: m}
}

// markedLease is an etcdLease whose entries carry the claim's marks.
type markedLease struct {
	*etcdLease
	m claimMarks
}

func (s *markedLease) with(rec *lockrun.RunRecord) *lockrun.RunRecord {
	if rec == nil {
		return nil
	}
	r := *rec
	r.DataLoss = r.DataLoss || s.m.dataLoss
	r.ScheduleWas, r.Flip = s.m.ScheduleWas, s.m.Flip
	return &r
}

func (s *markedLease) SetRecord(rec *lockrun.RunRecord) { s.etcdLease.SetRecord(s.with(rec)) }

func (s *markedLease) WriteRecord(ctx context.Context, rec *lockrun.RunRecord) error {
	return s.etcdLease.WriteRecord(ctx, s.with(rec))
}

// countOf is the count of the i-th response of a transaction (a count-only range), -1
// when there is none.
func countOf(resp *clientv3.TxnResponse, i int) int64 {
	if resp == nil || i >= len(resp.Responses) {
		return -1
	}
	r := resp.Responses[i].GetResponseRange()
	if r == nil {
		return -1
	}
	return r.Count
}
