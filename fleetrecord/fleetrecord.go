// Package fleetrecord reads the fleet's record (the entries every host's runs leave in
// Redis or etcd) for the history commands: every key's entries newest first, the ticks
// nobody claimed counted on the key's schedule, and per-key stats made from the entries
// and, where the backend keeps them, its per-day counters. It neither opens a backend
// (it is handed one) nor shows anything (package runview does).
package fleetrecord

import (
	"context"
	"sort"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/schedule"
)

// Reader is what this package needs of a backend: the read side of lockrun.FleetStore.
type Reader interface {
	Fleet(ctx context.Context, key string, limit int) ([]lockrun.FleetEntry, error)
	FleetAll(ctx context.Context, keys []string, limit int) (map[string][]lockrun.FleetEntry, error)
	FleetKeys(ctx context.Context) ([]string, error)
	TickRecord(ctx context.Context, key string) (*lockrun.TickRecord, error)
}

// DayCounter is a backend that keeps per-day counters of each key's runs (Redis).
type DayCounter interface {
	FleetDays(ctx context.Context, keys []string) (map[string][]lockrun.DayCount, error)
}

// keysPerCall is how many keys' records one pipelined call reads when Read has no key:
// each call has its own deadline, as status's walk has.
const keysPerCall = 200

// Read returns the entries of key (every key with a record when ""), newest first; per
// key at most limit (0 = all kept). Each key's entries come marked DUPLICATE by the
// backend; the ticks nobody claimed are counted (countNeverFired). Its errors are the
// backend's.
func Read(l Reader, key string, limit int) ([]lockrun.FleetEntry, error) {
	ctx := context.Background()
	if key != "" {
		es, err := l.Fleet(ctx, key, limit)
		if err != nil {
			return nil, err
		}
		countNeverFired(l, es)
		return es, nil
	}
	keys, err := l.FleetKeys(ctx)
	if err != nil {
		return nil, err
	}
	var all []lockrun.FleetEntry
	for i := 0; i < len(keys); i += keysPerCall {
		m, err := l.FleetAll(ctx, keys[i:min(i+keysPerCall, len(keys))], limit)
		if err != nil {
			return nil, err
		}
		for _, es := range m {
			all = append(all, es...)
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].StartUS > all[b].StartUS })
	countNeverFired(l, all)
	return all, nil
}

// countNeverFired turns the range of each never_fired entry (from just after the last
// claimed tick to the last tick nobody claimed: the acquire script cannot read a
// schedule) into its first tick and count, with the key's schedule from its tick record
// (the claim that found them had the same schedule). One read per key that has such an
// entry; an entry whose schedule cannot be read keeps its range and a count of 0.
func countNeverFired(l Reader, es []lockrun.FleetEntry) {
	scheds := map[string]*schedule.Schedule{}
	for i := range es {
		e := &es[i]
		if e.Status != lockrun.NeverFiredStatus || e.NeverFired > 0 || e.NeverFiredTo == 0 {
			continue
		}
		s, seen := scheds[e.Key]
		if !seen {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if tr, err := l.TickRecord(ctx, e.Key); err == nil && tr != nil {
				s, _ = schedule.Parse(tr.Expr, tr.TZ)
			}
			cancel()
			scheds[e.Key] = s
		}
		if s == nil {
			continue
		}
		if n, first := s.Count(time.UnixMicro(e.NeverFiredFrom), time.UnixMicro(e.NeverFiredTo), 1000000); n > 0 {
			e.NeverFiredFrom, e.NeverFired = first.UnixMicro(), n
		}
	}
}

// Stats summarises the entries es (as Read returns them) per key, sorted by key, over
// the window f selects (f.Key is Read's business; f.Last > 0 keeps the newest f.Last runs
// of each key, 0 all). When l is a DayCounter and f names no node, the counts come from
// its per-day counters where those saw more runs (countBeyondEntries). Its errors are the
// backend's.
func Stats(l Reader, es []lockrun.FleetEntry, f history.StatsFilter) ([]history.KeyStats, error) {
	byKey := map[string][]history.RunTimes{}
	var keys []string
	truncated := map[string]bool{}
	for _, e := range es {
		st := e.Started()
		switch {
		case f.Node != "" && e.Node != f.Node,
			!f.Since.IsZero() && st.Before(f.Since),
			!f.Until.IsZero() && !st.Before(f.Until):
			continue
		}
		if e.Status == lockrun.NeverFiredStatus {
			continue // not a run
		}
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		if f.Last > 0 && len(byKey[e.Key]) >= f.Last {
			truncated[e.Key] = true
			continue
		}
		rt := history.RunTimes{Status: e.Status, Started: st}
		if e.EndUS != 0 {
			rt.Finished = st.Add(time.Duration(e.DurationMS) * time.Millisecond)
		}
		byKey[e.Key] = append(byKey[e.Key], rt)
	}
	sort.Strings(keys)
	var days map[string][]lockrun.DayCount
	if dc, ok := l.(DayCounter); ok && f.Node == "" && len(keys) > 0 {
		var err error
		if days, err = dc.FleetDays(context.Background(), keys); err != nil {
			return nil, err
		}
	}
	var stats []history.KeyStats
	for _, k := range keys {
		ks := history.Summarise(k, byKey[k], truncated[k])
		countBeyondEntries(&ks, days[k], f.Since, f.Until)
		stats = append(stats, ks)
	}
	return stats, nil
}

// countBeyondEntries replaces the counts of ks, made from the entries the ledger keeps,
// with the key's per-day counters over the days from since to until (whole days of the
// backend's clock, UTC), when those count more runs: the success rate then covers up to
// 400 days, not only the newest CRONLOCK_FLEET_KEEP entries. Durations, the last success
// and failure and the streak stay the entries'. A run the counters saw claimed and never
// complete (killed, lost) counts as a failure, as abandoned does.
func countBeyondEntries(ks *history.KeyStats, days []lockrun.DayCount, since, until time.Time) {
	var c lockrun.DayCount
	for _, d := range days {
		if !since.IsZero() && d.Day.Before(since.UTC().Truncate(24*time.Hour)) || !until.IsZero() && !d.Day.Before(until) {
			continue
		}
		c.Runs += d.Runs
		c.Succeeded += d.Succeeded
		c.Interrupted += d.Interrupted
	}
	if c.Runs <= ks.Runs {
		return
	}
	ks.Runs, ks.Succeeded, ks.Interrupted = c.Runs, c.Succeeded, c.Interrupted
	ks.Failed = max(c.Runs-c.Succeeded-c.Interrupted-ks.Running, 0)
	ks.Truncated = false // the counts cover every run of those days
}
