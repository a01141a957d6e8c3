package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
)

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

// appendEntry runs fleet.lua: start and end ” mean the server's TIME now.
func (l *Locker) appendEntry(ctx context.Context, key, entry, startUS, endUS, runID string) error {
	res, _, err := l.eval(ctx, fleetScript(), []string{l.tickKey(key), l.runsKey(key)},
		entry, l.fleetKeep(), startUS, endUS, runID)
	if err != nil {
		return l.userError("record the run of "+key+" in the fleet's record", err)
	}
	if s, _ := res.(string); s != "" {
		return fmt.Errorf("record the run of %s in the fleet's record on %s: %s", key, l.target.server(), s)
	}
	return nil
}

// Fleet returns key's newest runs across the fleet, newest first, at most limit (0 = all
// kept), in one round trip: the record, plus what the tick record and the lock say of a
// run that has no entry yet: "running" while it holds the lock, "abandoned" when it
// claimed a tick and its lock is gone with no entry written (killed, host lost). Entries
// are marked with MarkDuplicates. It returns an error that says what to check when Redis
// cannot be asked.
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

// FleetKeys returns the keys that have a fleet record, walking the keyspace with SCAN
// MATCH (no cross-slot index exists), each call within one operation time-out.
func (l *Locker) FleetKeys(ctx context.Context) ([]string, error) {
	var keys []string
	err := l.scanNames(ctx, "runs", "list the fleet's records", func(names []string) error {
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
	stop := int64(limit) - 1
	if limit <= 0 {
		stop = -1
	}
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	ranges := make([]*redis.StringSliceCmd, len(keys))
	ticks := make([]*redis.StringCmd, len(keys))
	locks := make([]*redis.StringCmd, len(keys))
	_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			ranges[i] = p.LRange(octx, l.runsKey(k), 0, stop)
			ticks[i] = p.Get(octx, l.tickKey(k))
			locks[i] = p.Get(octx, l.lockKey(k))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make(map[string][]lockrun.FleetEntry, len(keys))
	for i, k := range keys {
		raw, err := ranges[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		es := make([]lockrun.FleetEntry, 0, len(raw)+1)
		ids := map[string]bool{}
		for _, s := range raw {
			var e lockrun.FleetEntry
			if json.Unmarshal([]byte(s), &e) != nil {
				continue // not cronlock's: a record is for reading, skip what cannot be read
			}
			e.Key = k
			ids[e.RunID] = true
			es = append(es, e)
		}
		lockV, _ := locks[i].Result()
		tickV, _ := ticks[i].Result()
		if e, ok := lockrun.PendingEntry(k, lockV, tickV, ids); ok {
			es = append([]lockrun.FleetEntry{e}, es...)
		}
		sort.SliceStable(es, func(a, b int) bool { return es[a].StartUS > es[b].StartUS })
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
