package history

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cronlock/runstatus"
)

// tailsPerKey is how many output tails each key keeps: writing a run with output drops
// the tails of that key's older runs beyond its newest tailsPerKey with output (the rows
// stay). It bounds what a chatty job costs the file to tailsPerKey × --capture (6.4 MiB
// at the default 64 KiB) whatever its schedule, while still covering the last 100 runs:
// an hour and a half of a per-minute job, and longer than the default retention for a
// daily one.
const tailsPerKey = 100

// DefaultRetention is how old a finished run gets before automatic retention (Retain)
// deletes it, unless it is the last success or the last failure of its key.
const DefaultRetention = 90 * 24 * time.Hour

// FormatAge writes an age as people write retention settings: whole days as 90d,
// anything else as a Go duration (36h0m0s).
func FormatAge(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// retentionInterval is how often, at most, Retain prunes one history file: a pass
// looks at every key, so it is done once a day, not once per run.
const retentionInterval = 24 * time.Hour

// pruneBatch is how many runs one transaction deletes: other runs wait for the write
// lock while a transaction is open, so a large prune is cut into short ones. A variable
// for tests.
var pruneBatch = 1000

// retainLimit is how many runs one automatic pass deletes at most. A pass runs in a
// `cronlock run` after its job, where it delays the exit and a stop signal waits for it:
// a large backlog (the first pass over a history that grew for years) is spread over
// the following runs instead, each taking a few seconds at most. A variable for tests.
var retainLimit = 20000

// metaRetentionLast names the meta row that holds when Retain last claimed a pass
// (Unix nanoseconds).
const metaRetentionLast = "retention_last_run"

// failedStatusList is runstatus.Failures as an SQL list: the newest such run of a key is
// never pruned.
var failedStatusList = "'" + strings.Join(runstatus.Failures, "', '") + "'"

// PruneOptions says which runs Prune deletes: a run goes when either limit says so.
// Running rows, and the last success and the last failure of each key, always stay.
// The zero PruneOptions deletes nothing.
type PruneOptions struct {
	OlderThan time.Duration // finished runs that started before Now − OlderThan; 0 = no age limit
	Keep      int           // all but the newest Keep runs of each key; 0 = no count limit
	Now       time.Time     // the present for OlderThan; zero = time.Now()
	DryRun    bool          // only count what would be deleted
	Limit     int           // delete at most this many runs; 0 = all
}

// PruneResult counts what Prune deleted, or would delete with DryRun.
type PruneResult struct {
	Runs    int  // runs removed
	Outputs int  // output tails removed with them
	More    bool // Limit stopped it: more runs are due
}

// Prune deletes runs as o says, with their output tails, in transactions of at most
// pruneBatch runs so that concurrent runs are not kept waiting for the write lock. It
// returns what it deleted, also when it fails part way (the batches before stay done).
// "Newest" means by start time, as List orders runs.
func (s *Store) Prune(o PruneOptions) (PruneResult, error) {
	if o.OlderThan < 0 || o.Keep < 0 {
		return PruneResult{}, fmt.Errorf("history: prune: negative limit (older than %v, keep %d)", o.OlderThan, o.Keep)
	}
	if o.OlderThan == 0 && o.Keep == 0 {
		return PruneResult{}, nil
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	ids, err := s.pruneCandidates(o)
	if err != nil {
		return PruneResult{}, describe(s.path, fmt.Errorf("prune: %w", err))
	}
	var res PruneResult
	if o.Limit > 0 && len(ids) > o.Limit {
		ids, res.More = ids[:o.Limit], true
	}
	for len(ids) > 0 {
		n := min(len(ids), pruneBatch)
		began := time.Now()
		b, err := s.deleteRuns(ids[:n], o.DryRun)
		res.Runs += b.Runs
		res.Outputs += b.Outputs
		if err != nil {
			return res, describe(s.path, fmt.Errorf("prune: %w", err))
		}
		ids = ids[n:]
		if len(ids) > 0 && !o.DryRun {
			// Leave the write lock free as long as it was held: a process waiting for it
			// polls at intervals (SQLite's busy handler sleeps up to 100 ms), and would
			// otherwise rarely find it free between two batches.
			time.Sleep(time.Since(began))
		}
	}
	return res, nil
}

// pruneCandidates returns the rowids of the runs o deletes, key by key. The store has
// one connection, so each query's rows are read to the end before the next is made.
//
// The candidates are not re-checked when they are deleted: a finished row never turns
// running again, and the last success (or failure) of a key is protected here and can
// only be outdone by newer runs, never replaced by an older one, so a run that is not
// the last one now will not be the last one later either.
func (s *Store) pruneCandidates(o PruneOptions) ([]int64, error) {
	cutoff := int64(-1 << 63) // nothing started before it
	if o.OlderThan > 0 {
		cutoff = o.Now.Add(-o.OlderThan).UnixNano()
	}
	// Only keys with old runs matter for an age limit; a count limit looks at every key.
	// The planner would rather read all of runs_key_started than look up the key of each
	// old row, but after the first pass the old rows are about one day's worth.
	keysQ, keysArgs := `SELECT DISTINCT key FROM runs INDEXED BY runs_started WHERE started_at < ?`, []any{cutoff}
	if o.Keep > 0 {
		keysQ, keysArgs = `SELECT DISTINCT key FROM runs`, nil
	}
	keys, err := queryStrings(s.db, keysQ, keysArgs...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	var ids []int64
	for _, key := range keys {
		if o.Limit > 0 && len(ids) > o.Limit {
			break // enough to know that more are due
		}
		keep := map[int64]bool{}
		for _, class := range []string{`= 'succeeded'`, `IN (` + failedStatusList + `)`} {
			var id int64
			err := s.db.QueryRow(`SELECT rowid FROM runs WHERE key = ? AND status `+class+`
				ORDER BY started_at DESC, rowid DESC LIMIT 1`, key).Scan(&id)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("find the last runs of %q: %w", key, err)
			}
			if err == nil {
				keep[id] = true
			}
		}
		// Newest first, so that the position of a row is its rank within the key. An
		// age limit alone reads only the old rows.
		q, args := `SELECT rowid, status, started_at FROM runs WHERE key = ?`, []any{key}
		if o.Keep == 0 {
			q, args = q+` AND started_at < ?`, append(args, cutoff)
		}
		rows, err := s.db.Query(q+` ORDER BY started_at DESC, rowid DESC`, args...)
		if err != nil {
			return nil, fmt.Errorf("list runs of %q: %w", key, err)
		}
		for pos := 0; rows.Next(); pos++ {
			var id, started int64
			var status string
			if err := rows.Scan(&id, &status, &started); err != nil {
				rows.Close()
				return nil, err
			}
			old := started < cutoff
			beyond := o.Keep > 0 && pos >= o.Keep
			if (old || beyond) && status != runstatus.Running && !keep[id] {
				ids = append(ids, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("list runs of %q: %w", key, err)
		}
	}
	return ids, nil
}

// deleteRuns deletes (or with dry only counts) the finished runs among ids, and their
// output tails, in one transaction.
func (s *Store) deleteRuns(ids []int64, dry bool) (PruneResult, error) {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(']')
	list := b.String()
	const chosen = `SELECT id FROM runs WHERE rowid IN (SELECT value FROM json_each(?)) AND status != 'running'`

	var res PruneResult
	if dry {
		err := s.db.QueryRow(`SELECT (SELECT count(*) FROM (`+chosen+`)),
			(SELECT count(*) FROM run_output WHERE run_id IN (`+chosen+`))`, list, list).
			Scan(&res.Runs, &res.Outputs)
		return res, err
	}
	tx, err := s.db.Begin() // immediate (see dsn): the count and the delete agree
	if err != nil {
		return res, err
	}
	defer tx.Rollback()
	var outputs int
	if err := tx.QueryRow(`SELECT count(*) FROM run_output WHERE run_id IN (`+chosen+`)`, list).Scan(&outputs); err != nil {
		return res, err
	}
	// The output tails go by ON DELETE CASCADE (foreign keys are on in the DSN).
	r, err := tx.Exec(`DELETE FROM runs WHERE rowid IN (SELECT value FROM json_each(?)) AND status != 'running'`, list)
	if err != nil {
		return res, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, err
	}
	return PruneResult{Runs: int(n), Outputs: outputs}, nil
}

// queryStrings returns the first column of every row of q.
func queryStrings(db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// trimTails drops the output tails of key beyond its newest tailsPerKey, inside the
// transaction that has just written one. It walks only that key's tails, newest first,
// in the run_output_key_started index: a few hundred index entries whatever the size of
// the history.
func trimTails(tx *sql.Tx, key string) error {
	_, err := tx.Exec(`DELETE FROM run_output WHERE rowid IN (
		SELECT rowid FROM run_output WHERE run_key = ?
		ORDER BY run_started_at DESC, rowid DESC LIMIT -1 OFFSET ?)`, key, tailsPerKey)
	if err != nil {
		return fmt.Errorf("drop old output tails of %q: %w", key, err)
	}
	return nil
}

// Retain is automatic retention: it deletes finished runs that started before
// now − maxAge (keeping the last success and the last failure of each key), at most once
// per retentionInterval per history file. The time of the last pass lives in the meta
// table; it is checked and claimed in one immediate transaction, so that of many runs
// that finish at once, one prunes and the others go on at once. ran reports whether
// this call made the pass. maxAge 0 or less keeps every run. A pass that fails part way
// is not retried before the next interval. A pass deletes at most retainLimit runs; when
// more are due it gives its claim back, so that the next run (and the next…) goes on
// until the backlog is gone.
func (s *Store) Retain(maxAge time.Duration, now time.Time) (ran bool, res PruneResult, err error) {
	if maxAge <= 0 {
		return false, res, nil
	}
	// A plain read first: the common case (not due) then takes no write lock at all.
	due, err := retentionDue(s.db, now)
	if err != nil || !due {
		return false, res, describe(s.path, err)
	}
	tx, err := s.db.Begin() // immediate: only one process sees "due" and claims it
	if err != nil {
		return false, res, describe(s.path, fmt.Errorf("claim retention: %w", err))
	}
	defer tx.Rollback()
	if due, err = retentionDue(tx, now); err != nil || !due {
		return false, res, describe(s.path, err)
	}
	if _, err := tx.Exec(`INSERT INTO meta (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, metaRetentionLast, now.UnixNano()); err != nil {
		return false, res, describe(s.path, fmt.Errorf("claim retention: %w", err))
	}
	if err := tx.Commit(); err != nil {
		return false, res, describe(s.path, fmt.Errorf("claim retention: %w", err))
	}
	res, err = s.Prune(PruneOptions{OlderThan: maxAge, Now: now, Limit: retainLimit})
	if err == nil && res.More {
		// Give the claim back (only if it is still ours), so that the next run goes on.
		_, err = s.db.Exec(`DELETE FROM meta WHERE name = ? AND value = ?`, metaRetentionLast, now.UnixNano())
		err = describe(s.path, err)
	}
	return true, res, err
}

// RetentionDue reports whether a retention pass is due (Retain would prune now): a
// plain read, for a caller that wants to learn it early, off its critical path.
func (s *Store) RetentionDue(now time.Time) (bool, error) {
	due, err := retentionDue(s.db, now)
	return due, describe(s.path, err)
}

// retentionDue reports whether the last retention pass is retentionInterval or more
// before now. A pass stamped more than an interval in the future (the clock was set
// back) counts as due too, so that a clock once wrong cannot stop retention for good;
// a stamp only a little ahead is a concurrent run that read the clock a moment later.
// A stamp that is not a number counts as due.
func retentionDue(q interface {
	QueryRow(string, ...any) *sql.Row
}, now time.Time) (bool, error) {
	var v any
	err := q.QueryRow(`SELECT value FROM meta WHERE name = ?`, metaRetentionLast).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read when retention last ran: %w", err)
	}
	last, ok := v.(int64)
	if !ok {
		return true, nil
	}
	since := now.Sub(time.Unix(0, last))
	return since >= retentionInterval || since < -retentionInterval, nil
}
