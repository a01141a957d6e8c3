package history

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

// The implementation of Stats before it read the windows of all keys through prepared
// statements and took the last success and failure from the window where it can: three
// queries per key, each prepared anew. TestStatsSameAsBefore compares the two on
// generated histories, so that the faster Stats keeps every figure.

func (s *Store) refStats(f StatsFilter) ([]KeyStats, error) {
	keys := []string{f.Key}
	if f.Key == "" {
		var err error
		if keys, err = s.statsKeys(); err != nil {
			return nil, describe(s.path, fmt.Errorf("list keys: %w", err))
		}
	}
	var out []KeyStats
	for _, k := range keys {
		ks, err := s.refKeyStats(k, f)
		if err != nil {
			return nil, describe(s.path, fmt.Errorf("stats of key %q: %w", k, err))
		}
		if ks.Runs > 0 {
			out = append(out, ks)
		}
	}
	return out, nil
}

func refNewestQuery(statuses []string, f StatsFilter, key string, limit int) (string, []any) {
	cond := "key = :key"
	args := []any{sql.Named("key", key), sql.Named("lim", limit)}
	if f.Node != "" {
		cond += " AND node = :node"
		args = append(args, sql.Named("node", f.Node))
	}
	if !f.Since.IsZero() {
		cond += " AND started_at >= :since"
		args = append(args, sql.Named("since", f.Since.UnixNano()))
	}
	if !f.Until.IsZero() {
		cond += " AND started_at < :until"
		args = append(args, sql.Named("until", f.Until.UnixNano()))
	}
	arms := make([]string, len(statuses))
	for i, st := range statuses {
		// The status is a constant of this package, never user input: a literal lets
		// each arm seek its own index range.
		arms[i] = fmt.Sprintf("SELECT status, started_at, finished_at, rowid AS r FROM runs WHERE %s AND status = '%s'", cond, st)
	}
	return strings.Join(arms, "\nUNION ALL\n") +
		"\nORDER BY started_at DESC, finished_at DESC, r DESC LIMIT :lim", args
}

func (s *Store) refNewest(statuses []string, f StatsFilter, key string, limit int) ([]statsRow, error) {
	q, args := refNewestQuery(statuses, f, key, limit)
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []statsRow
	for rows.Next() {
		var r statsRow
		var rowid int64
		if err := rows.Scan(&r.status, &r.started, &r.finished, &rowid); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) refKeyStats(key string, f StatsFilter) (KeyStats, error) {
	ks := KeyStats{Key: key}
	last := f.Last
	if last == 0 {
		last = DefaultStatsLast
	}
	limit := -1 // SQLite: no limit
	if last > 0 {
		limit = last + 1 // one more tells whether older runs exist
	}
	win, err := s.refNewest(runStatuses, f, key, limit)
	if err != nil {
		return ks, err
	}
	if last > 0 && len(win) > last {
		win, ks.Truncated = win[:last], true
	}
	if len(win) == 0 {
		return ks, nil
	}
	ok, err := s.refNewest([]string{runstatus.Succeeded}, f, key, 1)
	if err != nil {
		return ks, err
	}
	if len(ok) > 0 {
		ks.LastSuccess = time.Unix(0, ok[0].started)
	}
	bad, err := s.refNewest(runstatus.Failures, f, key, 1)
	if err != nil {
		return ks, err
	}
	if len(bad) > 0 {
		ks.LastFailure = time.Unix(0, bad[0].started)
	}
	summarise(&ks, win)
	return ks, nil
}

// TestStatsSameAsBefore compares Stats with the implementation it replaced on a generated
// history of several keys: many statuses (retried, running and abandoned among them),
// ties on the start time, ends before starts, several nodes, keys whose windows hold no
// success or no failure while older ones exist; under windows of every size and with each
// filter. Every field of every KeyStats must be the same.
func TestStatsSameAsBefore(t *testing.T) {
	s, _ := openTemp(t)
	rng := rand.New(rand.NewPCG(7, 25))
	// weights of the statuses of each key: key -> statuses to draw from
	keys := map[string][]string{
		"mixed":      runstatus.All,
		"healthy":    {runstatus.Succeeded, runstatus.Succeeded, runstatus.Succeeded, runstatus.Skipped, runstatus.Failed},
		"old-ok":     nil, // successes, then only failures: the window's success is older than it
		"old-fail":   nil, // failures, then only successes
		"retries":    {runstatus.Retried, runstatus.Retried, runstatus.Failed, runstatus.Succeeded},
		"rare":       {runstatus.Interrupted, runstatus.Missed, runstatus.Suspended},
		"one":        {runstatus.Running},
		"all-failed": runstatus.Failures,
	}
	n := 0
	for key, sts := range keys {
		runs := 1 + rng.IntN(120)
		if key == "one" {
			runs = 1
		}
		for i := range runs {
			st := runstatus.Succeeded
			switch {
			case key == "old-ok":
				if i >= 10 {
					st = runstatus.Failures[rng.IntN(len(runstatus.Failures))]
				}
			case key == "old-fail":
				st = runstatus.Failed
				if i >= 10 {
					st = runstatus.Succeeded
				}
			default:
				st = sts[rng.IntN(len(sts))]
			}
			minute := i
			if rng.IntN(5) == 0 && i > 0 {
				minute = i - 1 // a tie with the run before
			}
			r := &Run{ID: fmt.Sprintf("run-%05d", n), Key: key, Node: fmt.Sprintf("n%d", rng.IntN(3)), Status: st,
				StartedAt: at(minute)}
			n++
			if st != runstatus.Running && st != runstatus.Abandoned {
				r.FinishedAt = r.StartedAt.Add(time.Duration(rng.IntN(600)-30) * time.Second) // some end before they start
			}
			if _, err := s.db.Exec(`INSERT INTO runs (`+runColumns+`) VALUES `+runValues, rowArgs(r)...); err != nil {
				t.Fatal(err)
			}
		}
	}
	var filters []StatsFilter
	for _, last := range []int{0, -1, 1, 3, 7, 20, 64} {
		filters = append(filters, StatsFilter{Last: last}, StatsFilter{Last: last, Node: "n1"},
			StatsFilter{Last: last, Since: at(15), Until: at(70)}, StatsFilter{Last: last, Key: "mixed"},
			StatsFilter{Last: last, Key: "old-ok", Node: "n2", Since: at(5)})
	}
	filters = append(filters, StatsFilter{Key: "nothing"}, StatsFilter{Until: at(-1)})
	for _, f := range filters {
		want, err := s.refStats(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Stats(f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Stats(%+v) differs from before:\n got %+v\nwant %+v", f, got, want)
		}
	}
}
