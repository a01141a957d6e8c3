package history

import (
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"cronlock/runstatus"
)

// DefaultStatsLast is the window of Stats when StatsFilter.Last is 0: the newest 1000
// matching runs of each key. A fixed number of runs, not a period, keeps the work of
// Stats the same whether the file holds a thousand runs or a million.
const DefaultStatsLast = 1000

// RecentRuns is how many of the newest runs of a window KeyStats.Recent keeps (for a
// sparkline).
const RecentRuns = 20

// StatsFilter selects the runs that Stats summarises. The zero StatsFilter summarises
// the newest DefaultStatsLast runs of every key.
type StatsFilter struct {
	Key   string    // only this key; "" = every key
	Node  string    // only runs of this node; "" = any
	Since time.Time // only runs started at or after Since; zero = no lower bound
	Until time.Time // only runs started before Until; zero = no upper bound
	Last  int       // the window: newest Last matching runs per key; 0 = DefaultStatsLast; < 0 = all
}

// Outcome is one run of KeyStats.Recent.
type Outcome struct {
	Status   string
	Duration time.Duration // 0 while the end is unknown (running, abandoned)
	Finished bool          // the end is known, so Duration means something
}

// KeyStats summarises the window of one key: its newest matching runs (StatsFilter.Last).
//
// runstatus.All count as the README says ("How statuses count"): succeeded is a success;
// runstatus.Failures are failures; skipped runs are left out of the success rate. A running
// run has no outcome yet and is left out too. An interrupted run (stopped by a signal
// someone sent cronlock) is neither: it stays in the rate's denominator (SuccessRate),
// but is not counted in Failed and neither ends nor extends a failure streak.
type KeyStats struct {
	Key string

	Runs        int // every run in the window, whatever its status
	Succeeded   int
	Failed      int // runs with one of runstatus.Failures
	Skipped     int
	Suspended   int // runs of a suspended key (cronlock suspend): left out of the rate, as skips are
	Interrupted int
	Running     int

	// Durations of the finished, non-skipped runs of the window (nearest-rank
	// percentiles); all zero when Timed is 0.
	Timed         int
	P50, P95, Max time.Duration

	// Start times of the newest success and failure among all matching runs, not only the
	// window; zero when there is none.
	LastSuccess, LastFailure time.Time

	// FailureStreak counts the failures among the newest runs of the window back to its
	// newest success, passing over skipped, running and interrupted runs. StreakCapped
	// says the window ended before a success was found while older runs exist: the streak
	// is then at least FailureStreak long (LastSuccess says since when).
	FailureStreak int
	StreakCapped  bool

	Oldest, Newest time.Time // start times of the oldest and newest run of the window
	Truncated      bool      // older matching runs exist that the window left out

	Recent []Outcome // the newest RecentRuns runs of the window, oldest first
}

// SuccessRate is Succeeded / (Runs − Skipped − Suspended − Running); ok is false when no
// run in the window has an outcome.
func (k *KeyStats) SuccessRate() (rate float64, ok bool) {
	n := k.Runs - k.Skipped - k.Suspended - k.Running
	if n <= 0 {
		return 0, false
	}
	return float64(k.Succeeded) / float64(n), true
}

// Stats summarises the runs that f selects, one KeyStats per key that has at least one
// matching run, in key order. Every query walks an index: the keys by a skip-scan (one
// index step per key, not a scan of every row), the window of a key as a merge of its
// per-status index ranges newest first. So the cost depends on the window and the number
// of keys, not on the size of the file (with --node, rows of other nodes are read and
// passed over).
//
// Each query is prepared once per call and run for every key: preparing the window's
// merge costs more than running it on a key of a few runs, so a history of 300 keys
// spent most of its time in the SQL compiler. The last success and failure come from the
// window, which is the newest runs of every status: only a key whose window holds none
// while older runs exist asks the index (one step per status).
func (s *Store) Stats(f StatsFilter) ([]KeyStats, error) {
	keys := []string{f.Key}
	if f.Key == "" {
		var err error
		if keys, err = s.statsKeys(); err != nil {
			return nil, describe(s.path, fmt.Errorf("list keys: %w", err))
		}
	}
	q := &statsQueries{s: s, f: f}
	defer q.close()
	var out []KeyStats
	for _, k := range keys {
		ks, err := q.keyStats(k)
		if err != nil {
			return nil, describe(s.path, fmt.Errorf("stats of key %q: %w", k, err))
		}
		if ks.Runs > 0 {
			out = append(out, ks)
		}
	}
	return out, nil
}

// statsKeysQuery lists the distinct keys by hopping from one key to the next in an index
// that starts with key (a skip-scan): one index step per key, where SELECT DISTINCT
// would read every row.
const statsKeysQuery = `WITH RECURSIVE k(key) AS (
	SELECT min(key) FROM runs
	UNION ALL
	SELECT (SELECT min(key) FROM runs WHERE key > k.key) FROM k WHERE k.key IS NOT NULL
)
SELECT key FROM k WHERE key IS NOT NULL`

func (s *Store) statsKeys() ([]string, error) {
	rows, err := s.db.Query(statsKeysQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// statsRow is one run as Stats reads it.
type statsRow struct {
	status   string
	started  int64
	finished sql.NullInt64
}

// newestQuery returns the newest runs of one key (the named argument key) among the given
// statuses (each row's first column is the index of its status in statuses), newest first, at most lim (named too; -1 = all). Each status is its own range
// of runs_key_status_started, already in time order, and SQLite merges the ranges as it
// reads them (MERGE (UNION ALL)), so a LIMIT n reads about n index entries and no table
// row: `status IN (…) ORDER BY started_at` would instead sort every run of the key. Ties
// are broken by end time, then by insertion order. args are f's; the caller adds key and
// lim.
func newestQuery(statuses []string, f StatsFilter) (q string, args []any) {
	cond := "key = :key"
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
		// each arm seek its own index range. Each row says its status by its arm's
		// number, i, which costs the reader no string per row.
		arms[i] = fmt.Sprintf("SELECT %d AS s, started_at, finished_at, rowid AS r FROM runs WHERE %s AND status = '%s'", i, cond, st)
	}
	return strings.Join(arms, "\nUNION ALL\n") +
		"\nORDER BY started_at DESC, finished_at DESC, r DESC LIMIT :lim", args
}

// statsQueries are the prepared queries of one Stats call, each prepared when first
// needed and then run for every key.
type statsQueries struct {
	s                 *Store
	f                 StatsFilter
	args              []any // f's arguments, the same for every query
	window, ok, fails *sql.Stmt
}

func (q *statsQueries) close() {
	for _, st := range []*sql.Stmt{q.window, q.ok, q.fails} {
		if st != nil {
			st.Close()
		}
	}
}

// newest runs the query of statuses (prepared into *st on first use) for key.
func (q *statsQueries) newest(st **sql.Stmt, statuses []string, key string, limit int) ([]statsRow, error) {
	if *st == nil {
		text, args := newestQuery(statuses, q.f)
		prepared, err := q.s.db.Prepare(text)
		if err != nil {
			return nil, err
		}
		*st, q.args = prepared, args
	}
	rows, err := (*st).Query(append(q.args[:len(q.args):len(q.args)], sql.Named("key", key), sql.Named("lim", limit))...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []statsRow
	for rows.Next() {
		var r statsRow
		var arm, rowid int64
		if err := rows.Scan(&arm, &r.started, &r.finished, &rowid); err != nil {
			return nil, err
		}
		if arm < 0 || arm >= int64(len(statuses)) {
			return nil, fmt.Errorf("row of arm %d of %d", arm, len(statuses))
		}
		r.status = statuses[arm]
		out = append(out, r)
	}
	return out, rows.Err()
}

// runStatuses are the statuses a run can end with: every status but retried, so that a
// run of several tries counts once, by its last try. The most common come last: SQLite
// merges the arms of newestQuery one into the next, so a row of the first arm passes
// every later merge step and a row of the last arm only one; with succeeded first, the
// window of a healthy key took twice as long.
var runStatuses = append(slices.DeleteFunc(slices.Clone(runstatus.All), func(s string) bool {
	return s == runstatus.Retried || s == runstatus.Skipped || s == runstatus.Succeeded
}), runstatus.Skipped, runstatus.Succeeded)

// keyStats computes the KeyStats of one key; Runs is 0 when nothing matches.
func (q *statsQueries) keyStats(key string) (KeyStats, error) {
	ks := KeyStats{Key: key}
	last := q.f.Last
	if last == 0 {
		last = DefaultStatsLast
	}
	limit := -1 // SQLite: no limit
	if last > 0 {
		limit = last + 1 // one more tells whether older runs exist
	}
	win, err := q.newest(&q.window, runStatuses, key, limit)
	if err != nil {
		return ks, err
	}
	if last > 0 && len(win) > last {
		win, ks.Truncated = win[:last], true
	}
	if len(win) == 0 {
		return ks, nil
	}
	// The window is the newest matching runs of every status but retried, in the order
	// of the lookups below: its first success is the newest success of all matching
	// runs, and a window that is not truncated holds every matching run.
	var okFound, badFound bool
	for _, r := range win {
		if !okFound && r.status == runstatus.Succeeded {
			ks.LastSuccess, okFound = time.Unix(0, r.started), true
		}
		if !badFound && runstatus.CountsAsFailure(r.status) {
			ks.LastFailure, badFound = time.Unix(0, r.started), true
		}
		if okFound && badFound {
			break
		}
	}
	if !okFound && ks.Truncated {
		ok, err := q.newest(&q.ok, []string{runstatus.Succeeded}, key, 1)
		if err != nil {
			return ks, err
		}
		if len(ok) > 0 {
			ks.LastSuccess = time.Unix(0, ok[0].started)
		}
	}
	if !badFound && ks.Truncated {
		bad, err := q.newest(&q.fails, runstatus.Failures, key, 1)
		if err != nil {
			return ks, err
		}
		if len(bad) > 0 {
			ks.LastFailure = time.Unix(0, bad[0].started)
		}
	}
	summarise(&ks, win)
	return ks, nil
}

// summarise fills in the counts, durations, streak and recent outcomes of ks from the
// window win, newest first.
func summarise(ks *KeyStats, win []statsRow) {
	ks.Runs = len(win)
	ks.Newest = time.Unix(0, win[0].started)
	ks.Oldest = time.Unix(0, win[len(win)-1].started)
	var durs []time.Duration
	streakOpen := true // still counting failures back from the newest run
	for i, r := range win {
		switch {
		case r.status == runstatus.Succeeded:
			ks.Succeeded++
			streakOpen = false
		case r.status == runstatus.Skipped:
			ks.Skipped++
		case r.status == runstatus.Suspended:
			ks.Suspended++
		case r.status == runstatus.Running:
			ks.Running++
		case r.status == runstatus.Interrupted:
			ks.Interrupted++
		case runstatus.CountsAsFailure(r.status):
			ks.Failed++
			if streakOpen {
				ks.FailureStreak++
			}
		}
		var d time.Duration
		if r.finished.Valid {
			d = max(time.Duration(r.finished.Int64-r.started), 0) // a clock step back is not a negative run
			if r.status != runstatus.Skipped && r.status != runstatus.Suspended {
				durs = append(durs, d)
			}
		}
		if i < RecentRuns {
			ks.Recent = append(ks.Recent, Outcome{Status: r.status, Duration: d, Finished: r.finished.Valid})
		}
	}
	ks.StreakCapped = streakOpen && ks.Truncated && ks.FailureStreak > 0
	slices.Reverse(ks.Recent)
	if len(durs) > 0 {
		slices.Sort(durs)
		ks.Timed = len(durs)
		ks.P50 = percentile(durs, 0.50)
		ks.P95 = percentile(durs, 0.95)
		ks.Max = durs[len(durs)-1]
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest value with at least
// q of the values at or below it. It is always one of the values, never an average.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// RunTimes is one run given to Summarise: its status and when it started and ended
// (Finished zero while unknown).
type RunTimes struct {
	Status            string
	Started, Finished time.Time
}

// Summarise is the KeyStats of runs of key, newest first, read from elsewhere than a
// history file (the fleet's record in Redis): the same counts, percentiles and streak as
// Stats. LastSuccess and LastFailure are looked up in runs only; truncated says older
// runs exist that runs leaves out. Runs is 0 when runs is empty.
func Summarise(key string, runs []RunTimes, truncated bool) KeyStats {
	ks := KeyStats{Key: key, Truncated: truncated}
	if len(runs) == 0 {
		return ks
	}
	win := make([]statsRow, len(runs))
	for i, r := range runs {
		win[i] = statsRow{status: r.Status, started: r.Started.UnixNano()}
		if !r.Finished.IsZero() {
			win[i].finished = sql.NullInt64{Int64: r.Finished.UnixNano(), Valid: true}
		}
		if ks.LastSuccess.IsZero() && r.Status == runstatus.Succeeded {
			ks.LastSuccess = r.Started
		}
		if ks.LastFailure.IsZero() && runstatus.CountsAsFailure(r.Status) {
			ks.LastFailure = r.Started
		}
	}
	summarise(&ks, win)
	return ks
}
