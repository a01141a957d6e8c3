package fleetview

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/lockrun/local"
	"cronlock/runstatus"
)

// FromBackend is the Source of a backend that is a lockrun.JobReader: Redis (its index
// and pipelined batches; with scan, a walk of the whole keyspace instead) or etcd (a range
// read over cronlock's prefix, and transactions of many keys). It returns an error for a
// backend without (local: use FromLocal).
func FromBackend(l lockrun.Locker, scan bool) (Source, error) {
	if jr, ok := l.(lockrun.JobReader); ok {
		return &readerSource{jr: jr, name: l.Describe(), scan: scan}, nil
	}
	return nil, fmt.Errorf("%s keeps no fleet's record to list jobs from", l.Describe())
}

// Scanned reports whether src walked the whole keyspace to find the keys (a server
// without an index, or --scan).
func Scanned(src Source) bool {
	r, ok := src.(*readerSource)
	return ok && r.scanned
}

type readerSource struct {
	jr      lockrun.JobReader
	name    string
	scan    bool
	scanned bool
}

func (r *readerSource) describe() string { return r.name }

func (r *readerSource) keys(ctx context.Context) ([]string, error) {
	keys, scanned, err := r.jr.JobKeys(ctx, r.scan)
	r.scanned = scanned
	return keys, err
}

func (r *readerSource) states(ctx context.Context, keys []string, now time.Time) ([]state, error) {
	sts, err := r.jr.JobStates(ctx, keys, now)
	if err != nil {
		return nil, err
	}
	out := make([]state, len(sts))
	for i, st := range sts {
		out[i] = state{KeyState: st}
	}
	return out, nil
}

// FromLocal is the Source of the local backend: the keys of the lock folder's files and
// of the history, each key's tick record from its lock file, whether it is held now, and
// its runs from the history h (nil when the history is off: then no last run and no rate).
func FromLocal(l *local.Locker, h *history.Store) Source {
	return &localSource{l: l, h: h}
}

type localSource struct {
	l *local.Locker
	h *history.Store
}

func (s *localSource) describe() string { return s.l.Describe() }

func (s *localSource) keys(ctx context.Context) ([]string, error) {
	keys, err := s.l.Keys()
	if err != nil {
		return nil, err
	}
	if s.h != nil {
		st, err := s.h.Stats(history.StatsFilter{Last: 1})
		if err != nil {
			return nil, err
		}
		for _, k := range st {
			keys = append(keys, k.Key)
		}
	}
	sort.Strings(keys)
	out := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, k)
		}
	}
	return out, nil
}

// localRecent is how many history rows of a key are read to find its newest finished run.
const localRecent = 20

func (s *localSource) states(ctx context.Context, keys []string, now time.Time) ([]state, error) {
	out := make([]state, 0, len(keys))
	for _, k := range keys {
		st := state{KeyState: lockrun.KeyState{Key: k}, counted: true, rateFrom: "history"}
		tr, err := s.l.TickRecord(k)
		if err != nil {
			return nil, err
		}
		st.Tick = tr
		h, err := s.l.Inspect(ctx, k)
		if err != nil {
			return nil, err
		}
		if h != nil {
			st.Recent = append(st.Recent, lockrun.FleetEntry{Key: k, RunID: h.RunID, Node: h.Node, Status: runstatus.Running,
				StartUS: h.Since.UnixMicro()})
		}
		if s.h != nil {
			rows, err := s.h.List(history.Filter{Key: k, Limit: localRecent})
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				// The holder is running (above); a run's earlier tries are not its end.
				if r.Status == runstatus.Skipped || r.Status == runstatus.Running || seenRun(st.Recent, r.RunID) {
					continue
				}
				st.Recent = append(st.Recent, entryOf(k, r))
			}
			ks, err := s.h.Stats(history.StatsFilter{Key: k, Since: now.Add(-Window), Last: -1})
			if err != nil {
				return nil, err
			}
			if len(ks) == 1 {
				st.runs, st.succeeded = max(ks[0].Runs-ks[0].Skipped-ks[0].Suspended-ks[0].Running, 0), ks[0].Succeeded
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// seenRun reports whether a row of run id is among es already (its newest try).
func seenRun(es []lockrun.FleetEntry, id string) bool {
	for _, e := range es {
		if e.RunID == id {
			return true
		}
	}
	return false
}

// entryOf is a history row as a ledger entry, for build.
func entryOf(key string, r history.Run) lockrun.FleetEntry {
	e := lockrun.FleetEntry{Key: key, RunID: r.RunID, Node: r.Node, Status: r.Status, Exit: r.Exit, StartUS: r.StartedAt.UnixMicro()}
	if e.RunID == "" {
		e.RunID = r.ID
	}
	if !r.FinishedAt.IsZero() {
		e.EndUS = r.FinishedAt.UnixMicro()
	}
	if !r.ScheduledFor.IsZero() {
		e.TickUS = r.ScheduledFor.UnixMicro()
	}
	return e
}
