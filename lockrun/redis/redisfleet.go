package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
	"cronlock/runstatus"
)

// runsKey is the record of cronlock before the ledger (a list): read, never written, so
// that entries written before an upgrade still show until the list expires.
func (l *Locker) runsKey(key string) string { return l.prefix + "{" + key + "}:runs" }

func (l *Locker) fleetKeep() int {
	if l.keep > 0 {
		return l.keep
	}
	return lockrun.DefaultFleetKeep
}

// RecordRun adds rec to key's fleet record for a run that never held the lock (missed,
// error): one round trip. Start and end are the server's TIME. It returns nil without
// asking when the server is known to be unreachable (the run's own error says so
// already), and the script's error when the server refused the write (a full server).
func (l *Locker) RecordRun(ctx context.Context, key string, rec *lockrun.RunRecord) error {
	if lockrun.ValidKey(key) != nil || l.unreachable() != nil {
		return nil
	}
	return l.appendEntry(ctx, key, lockrun.EncodeFleetEntry(rec, 0), "", "", rec.RunID)
}

// appendEntry runs fleet.lua, which completes the run's entry or adds it: start and end
// "" mean the server's TIME now.
func (l *Locker) appendEntry(ctx context.Context, key, entry, startUS, endUS, runID string) error {
	res, acks, _, err := l.evalAcked(ctx, false, fleetScript(), []string{l.tickKey(key), l.ledgerKey(key), l.orderKey(key), l.daysKey(key), l.lockKey(key)},
		entry, l.fleetKeep(), startUS, endUS, runID)
	if err != nil {
		return l.userError("record the run of "+key+" in the fleet's record", err)
	}
	if acks.n >= 0 && acks.n < int64(l.minReplicas) {
		return l.unackedRecord(key, acks)
	}
	if s, _ := res.(string); s != "" {
		return &recordRefusedError{key: key, server: l.target.Server(), reply: s}
	}
	return nil
}

// recordRefusedError is the server's refusal of a ledger write (a full server, an ACL
// without hash rights): sending it again would be refused again.
type recordRefusedError struct{ key, server, reply string }

func (e *recordRefusedError) Error() string {
	return fmt.Sprintf("record the run of %s in the fleet's record on %s: %s", e.key, e.server, e.reply)
}

// Refusal marks it as the server's answer (lockrun.IsRefusal).
func (e *recordRefusedError) Refusal() {}

// Fleet returns key's newest runs across the fleet, newest first, at most limit (0 = all
// kept), in one round trip: the ledger's entries, with "abandoned" derived for an entry
// still running whose lock is gone (lockrun.DeriveAbandoned), and the lock's holder as
// running should its entry be missing. Entries are marked with MarkDuplicates. It returns
// an error that says what to check when Redis cannot be asked.
func (l *Locker) Fleet(ctx context.Context, key string, limit int) ([]lockrun.FleetEntry, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	out, err := l.fleetOf(ctx, []string{key}, limit)
	if err != nil {
		return nil, l.userError("read the fleet's record of "+key, err)
	}
	return out[key], nil
}

// FleetKeys returns the keys that have a lock, a tick record or a ledger (or a record of
// cronlock before the ledger), so that a key whose only run is running or abandoned is
// found too. It walks the keyspace once with SCAN (no cross-slot index exists), each call
// within one operation time-out.
func (l *Locker) FleetKeys(ctx context.Context) ([]string, error) {
	var keys []string
	err := l.scanNames(ctx, []string{"lock", "tick", "ledger", "runs"}, "list the fleet's records", func(names []string) error {
		keys = append(keys, names...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

// FleetAll is Fleet for several keys in one round trip, by key.
func (l *Locker) FleetAll(ctx context.Context, keys []string, limit int) (map[string][]lockrun.FleetEntry, error) {
	out, err := l.fleetOf(ctx, keys, limit)
	if err != nil {
		return nil, l.userError("read the fleet's records", err)
	}
	return out, nil
}

func (l *Locker) fleetOf(ctx context.Context, keys []string, limit int) (map[string][]lockrun.FleetEntry, error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	ledgers := make([]*redis.MapStringStringCmd, len(keys))
	olds := make([]*redis.StringSliceCmd, len(keys))
	ticks := make([]*redis.StringCmd, len(keys))
	locks := make([]*redis.StringCmd, len(keys))
	// Each command's own error is looked at: the old record's LRANGE may be refused (an
	// ACL written for the ledger alone) without hiding the ledger.
	l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			ledgers[i] = p.HGetAll(octx, l.ledgerKey(k))
			olds[i] = p.LRange(octx, l.runsKey(k), 0, -1)
			ticks[i] = p.Get(octx, l.tickKey(k))
			locks[i] = p.Get(octx, l.lockKey(k))
		}
		return nil
	})
	for i := range keys {
		for _, err := range []error{ledgers[i].Err(), ticks[i].Err(), locks[i].Err()} {
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
		}
	}
	out := make(map[string][]lockrun.FleetEntry, len(keys))
	for i, k := range keys {
		m, err := ledgers[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		raw := make([]string, 0, len(m))
		for id, s := range m {
			if !strings.HasPrefix(id, "~") {
				raw = append(raw, s)
			}
		}
		old, _ := olds[i].Result() // a server without the old list answers an empty one
		es := make([]lockrun.FleetEntry, 0, len(raw)+len(old)+1)
		ids := map[string]bool{}
		for _, s := range append(raw, old...) {
			var e lockrun.FleetEntry
			if json.Unmarshal([]byte(s), &e) != nil || ids[e.RunID] {
				continue // not cronlock's: a record is for reading, skip what cannot be read
			}
			e.Key = k
			ids[e.RunID] = true
			es = append(es, e)
		}
		lockV, _ := locks[i].Result()
		tickV, _ := ticks[i].Result()
		if e, ok := lockrun.PendingEntry(k, lockV, tickV, ids); ok {
			es = append(es, e)
		}
		var lv lockrun.HolderValue
		holder := ""
		if lockV != "" && json.Unmarshal([]byte(lockV), &lv) == nil && lv.ReleasedUS == "" {
			holder = lv.RunID
		}
		lockrun.DeriveAbandoned(es, holder)
		sort.SliceStable(es, func(a, b int) bool {
			if es[a].StartUS != es[b].StartUS {
				return es[a].StartUS > es[b].StartUS
			}
			return es[a].RunID > es[b].RunID
		})
		if limit > 0 && len(es) > limit {
			es = es[:limit]
		}
		lockrun.MarkDuplicates(es, l.tickOf(tickV))
		out[k] = es
	}
	return out, nil
}

// TickRecord reads the tick record of key from Redis, or nil, nil when no tick was ever
// claimed (or the record cannot be read as one).
func (l *Locker) TickRecord(ctx context.Context, key string) (*lockrun.TickRecord, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var get *redis.StringCmd
	_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		get = p.Get(octx, l.tickKey(key))
		return nil
	})
	if err == nil || errors.Is(err, redis.Nil) {
		err = get.Err()
	}
	v := get.Val()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, l.userError("read the tick record of "+key, err)
	}
	var tr lockrun.TickValue
	if json.Unmarshal([]byte(v), &tr) != nil {
		return nil, nil
	}
	return tr.Record(), nil
}

// tickOf reads the key's schedule from its tick record for MarkDuplicates; nil without
// Options.PrevTick or a readable schedule.
func (l *Locker) tickOf(tickV string) lockrun.TickOf {
	var tv lockrun.TickValue
	if l.prevTick == nil || tickV == "" || json.Unmarshal([]byte(tickV), &tv) != nil || tv.Expr == "" {
		return nil
	}
	prev := l.prevTick(tv.Expr, tv.TZ)
	if prev == nil {
		return nil
	}
	return func(_ string, at time.Time) (time.Time, bool) { return prev(at), true }
}

func (l *Locker) ledgerKey(key string) string { return l.prefix + "{" + key + "}:ledger" }
func (l *Locker) orderKey(key string) string  { return l.prefix + "{" + key + "}:order" }
func (l *Locker) daysKey(key string) string   { return l.prefix + "{" + key + "}:days" }

// ClaimsEntry says that the acquire script writes the run's ledger entry with the claim.
func (l *Locker) ClaimsEntry() bool { return true }

// claimEntry is the entry acquire.lua writes at the claim (ARGV[13]): req.Entry, or one of
// the request's run id, node and tick; running unless mode is "missed".
func claimEntry(req lockrun.Request, mode string) string {
	rec := lockrun.RunRecord{Tries: 1}
	if req.Entry != nil {
		rec = *req.Entry
	}
	rec.RunID, rec.Node, rec.Tick = req.RunID, req.Node, req.Tick
	if mode != "missed" {
		rec.Status = runstatus.Running
	} else if rec.Status == "" {
		rec.Status = runstatus.Missed
	}
	return lockrun.EncodeClaimEntry(&rec)
}

// FleetDays returns the per-day counters of keys (lockrun.DayCount), oldest day first, in
// one round trip: `history stats --fleet` counts with them beyond the kept entries.
func (l *Locker) FleetDays(ctx context.Context, keys []string) (map[string][]lockrun.DayCount, error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGetAll(octx, l.daysKey(k))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, l.userError("read the fleet's per-day counters", err)
	}
	out := make(map[string][]lockrun.DayCount, len(keys))
	for i, k := range keys {
		m, _ := cmds[i].Result()
		if len(m) > 0 {
			out[k] = lockrun.ParseDayCounts(m)
		}
	}
	return out, nil
}

// unackedRecord is the error of a ledger write that fewer than --min-replicas replicas
// acknowledged: a failover may lose it, so the caller sends it again (it is idempotent)
// or keeps it for a later run.
func (l *Locker) unackedRecord(key string, a acked) error {
	return fmt.Errorf("record the run of %s in the fleet's record: only %d of %d replicas acknowledged it within %s on %s (check the replicas: INFO replication on the master): %w",
		key, max(a.n, 0), l.minReplicas, a.within.Round(time.Millisecond), l.target.Server(), lockrun.ErrUnacknowledged)
}

// SendPending completes earlier runs' entries whose completion never reached the server
// (lockrun.PendingCompletion), in one round trip: the release script with no lock of its
// own to let go. With --min-replicas it is acknowledged like a release.
func (l *Locker) SendPending(ctx context.Context, key string, ps []lockrun.PendingCompletion) error {
	if err := lockrun.ValidKey(key); err != nil || len(ps) == 0 {
		return err
	}
	_, acks, err := l.releaseAcked(ctx, key, "", releaseArgs{pending: ps})
	if err != nil {
		return l.userError("complete earlier runs of "+key+" in the fleet's record", err)
	}
	if acks.n >= 0 && acks.n < int64(l.minReplicas) {
		return l.unackedRecord(key, acks)
	}
	return nil
}

// ClaimRecordErr is why the last ClaimMissed could not write the run's ledger entry (the
// claim stands); nil when it was written.
func (l *Locker) ClaimRecordErr() error {
	if e := l.missedErr.Load(); e != nil {
		return e
	}
	return nil
}
