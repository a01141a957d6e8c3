package history

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"cronlock/runstatus"
)

// ErrNotFound is returned by Get for an unknown run id.
var ErrNotFound = errors.New("history: run not found")

// Run is one row of the history.
type Run struct {
	ID           string    // UUIDv7; Start and Insert fill it in when empty
	Key, Node    string    // lock key; this machine's name
	PID          int       // pid of the cronlock process
	Command      []string  // argv of the child
	Status       string    // one of runstatus.All
	ExitCode     *int      // the child's own code; nil when there is none (not started, killed by a signal…)
	Exit         *int      // the code cronlock returned, what cron saw; nil while running, for abandoned runs and rows from before schema v3
	Signal       string    // "SIGTERM" when the child died from a signal, else ""
	StartedAt    time.Time // Start and Insert use time.Now() when zero
	FinishedAt   time.Time // zero while running, and for abandoned runs (unknown)
	ScheduledFor time.Time // the --schedule tick the run was for (UTC); zero without --schedule and in rows before schema v4
	Error        string    // why the run failed, for people
	Holder       string    // for skipped: who holds the lock
	FencingToken uint64    // 0 = none
	Backend      string    // "redis 127.0.0.1:6379/0" or "local /run/cronlock"; never a password
	Output       []byte    // captured tail (binary-safe); List leaves it nil, Get fills it
	Streams      []Segment // which stream each part of Output came from; nil = unmarked

	Attempt int // lock tries this run made: 1 = the first; more after --wait
	// TickAttempt is which attempt of its tick the run was (1, 2 for the first standby
	// takeover…; 0 without --schedule and in rows before schema v6), TakeoverOf the lost
	// run it took the tick from ("" = none).
	TickAttempt int
	TakeoverOf  string
	// RunID is the id of the run's first try: tries of one run (--retries) share it, and
	// the job sees it as CRONLOCK_RUN_ID. Rows read back always have it (ID for a run of
	// one try); "" when writing means ID.
	RunID    string
	Try      int    // which try of its run this row is: 1, 2, …
	BootID   []byte // this boot of the node (16 bytes), so a pid from another boot is not taken for it
	PIDStart uint64 // when PID started, in clock ticks after boot, so a reused pid is not taken for it
}

// Stream names where a part of the output tail came from.
type Stream uint8

// The streams of a child.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// Segment is a run of Len bytes of the output tail that came from one stream.
type Segment struct {
	Stream Stream
	Len    int
}

// Duration is FinishedAt − StartedAt, or 0 while the end is unknown.
func (r *Run) Duration() time.Duration {
	if r.FinishedAt.IsZero() || r.StartedAt.IsZero() {
		return 0
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// Filter selects rows for List. The zero Filter lists every run.
type Filter struct {
	Key    string // only this key, when not empty
	Status string // only this status, when not empty
	Node   string // only this node, when not empty
	Limit  int    // at most this many rows; 0 or less = no limit

	Since time.Time // only runs started at or after Since; zero = no lower bound
	Until time.Time // only runs started before Until; zero = no upper bound
}

// Store is an open history file. Its methods are safe for concurrent use.
type Store struct {
	db      *sql.DB
	path    string
	runsDir string

	mu    sync.Mutex
	locks map[string]*os.File // per-run lock files held by runs this Store started

	version int // the file's schema version: older than current only when readOnly
	// readOnly: opened by OpenRead on a file this process cannot write. abandoned then
	// holds the running rows Reap found dead, which List and Get show as abandoned.
	readOnly  bool
	abandoned map[string]bool
}

// selectColumns is runColumns as a SELECT of this file can name them: a read-only file
// of an older schema, which cannot be migrated, lacks the newer columns.
func (s *Store) selectColumns() string {
	cols := runColumns
	if s.version < 6 {
		cols = strings.Replace(cols, "tick_attempt, takeover_of", "NULL, ''", 1)
	}
	if s.version < 5 {
		cols = strings.Replace(cols, "first_try, try", "NULL, 1", 1)
	}
	if s.version < 4 {
		cols = strings.Replace(cols, "scheduled_for", "NULL", 1)
	}
	if s.version < 3 {
		cols = strings.Replace(cols, ", exit,", ", NULL,", 1)
	}
	if s.version < 2 {
		cols = strings.Replace(cols, "attempt, boot_id, pid_start", "1, x'', 0", 1)
	}
	return cols
}

// seenAbandoned shows r as abandoned when a read-only Reap found its run dead.
func (s *Store) seenAbandoned(r *Run) {
	if r.Status == runstatus.Running && s.abandoned[r.ID] {
		r.Status, r.Error = runstatus.Abandoned, abandonedError
	}
}

// Path returns the absolute path of the history file.
func (s *Store) Path() string { return s.path }

// Start records r as running and takes its per-run lock, which it holds until Finish
// (or until the process dies, which Reap then sees). It fills in r.ID (a UUIDv7) and
// r.StartedAt when they are empty, and sets r.Status to running.
func (s *Store) Start(r *Run) error {
	if err := prepare(r); err != nil {
		return err
	}
	r.Status = runstatus.Running
	r.FinishedAt = time.Time{}
	// The lock comes before the row: a running row whose lock file is free can then only
	// mean a dead run.
	f := takeClaim(r.ID) // locked already, by Claim
	if f == nil {
		var err error
		if f, err = s.lockRun(r.ID); err != nil {
			return err
		}
	}
	row := *r // a running row has no result yet, whatever r already holds
	row.ExitCode, row.Signal, row.Exit = nil, "", nil
	tx, err := s.db.Begin()
	if err == nil {
		// A row already there is this run's own, written from its claim by a reader
		// (AddLive) while the run was young: the same facts.
		_, err = tx.Exec(`INSERT INTO runs (`+runColumns+`) VALUES `+runValues+`
			ON CONFLICT (id) DO NOTHING`, rowArgs(&row)...)
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
	}
	if err != nil {
		unlockRun(f)
		return describe(s.path, fmt.Errorf("record start of run %s: %w", r.ID, err))
	}
	s.mu.Lock()
	s.locks[r.ID] = f
	s.mu.Unlock()
	return nil
}

// Finish completes the row of a run begun with Start, or only claimed (Claim): status,
// exit code, signal, end time (time.Now() when zero), error, holder, fencing token,
// backend and output tail. A missing row (Start skipped or failed) is inserted, and a row
// Reap marked abandoned by mistake is corrected. The per-run lock, or the claimed file, is
// released even when writing fails.
func (s *Store) Finish(r *Run) error {
	if r.FinishedAt.IsZero() {
		r.FinishedAt = time.Now()
	}
	err := s.upsert(r)
	s.mu.Lock()
	f := s.locks[r.ID]
	delete(s.locks, r.ID)
	s.mu.Unlock()
	if f == nil {
		f = takeClaim(r.ID) // a run that ended before it wrote its running row
	}
	if f != nil {
		unlockRun(f)
	}
	return err
}

// Insert records a run that is already over (skipped, or an error before the child
// started) in one write. It fills in r.ID, r.StartedAt and r.FinishedAt (both time.Now())
// when they are empty. An existing row with the same ID is replaced.
func (s *Store) Insert(r *Run) error {
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now()
	}
	if r.FinishedAt.IsZero() {
		r.FinishedAt = r.StartedAt
	}
	return s.upsert(r)
}

func (s *Store) upsert(r *Run) error {
	if err := prepare(r); err != nil {
		return err
	}
	if r.Status == runstatus.Running {
		return fmt.Errorf("history: run %s: a finished run needs a final status, not running", r.ID)
	}
	tx, err := s.db.Begin()
	if err != nil {
		return describe(s.path, fmt.Errorf("record run %s: %w", r.ID, err))
	}
	defer tx.Rollback()
	_, err = tx.Exec(`INSERT INTO runs (`+runColumns+`) VALUES `+runValues+`
		ON CONFLICT (id) DO UPDATE SET key = excluded.key, node = excluded.node,
			pid = excluded.pid, command = excluded.command, status = excluded.status,
			exit_code = excluded.exit_code, signal = excluded.signal,
			started_at = excluded.started_at, finished_at = excluded.finished_at,
			error = excluded.error, holder = excluded.holder,
			fencing_token = excluded.fencing_token, backend = excluded.backend,
			attempt = excluded.attempt, boot_id = excluded.boot_id, pid_start = excluded.pid_start,
			exit = excluded.exit, scheduled_for = excluded.scheduled_for,
			tick_attempt = excluded.tick_attempt, takeover_of = excluded.takeover_of`, rowArgs(r)...)
	if err != nil {
		return describe(s.path, fmt.Errorf("record run %s: %w", r.ID, err))
	}
	if len(r.Output) > 0 {
		_, err = tx.Exec(`INSERT INTO run_output (run_id, tail, streams, run_key, run_started_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (run_id) DO UPDATE SET tail = excluded.tail, streams = excluded.streams,
				run_key = excluded.run_key, run_started_at = excluded.run_started_at`,
			r.ID, r.Output, encodeSegments(r.Streams), r.Key, r.StartedAt.UnixNano())
		if err == nil {
			err = trimTails(tx, r.Key)
		}
		if err != nil {
			return describe(s.path, fmt.Errorf("record output of run %s: %w", r.ID, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return describe(s.path, fmt.Errorf("record run %s: %w", r.ID, err))
	}
	return nil
}

// List returns the runs that match f, newest first (by start time, then by insertion
// order). Output is not loaded; use Get for that.
func (s *Store) List(f Filter) ([]Run, error) {
	where, args := f.where()
	q := `SELECT ` + s.selectColumns() + ` FROM runs` + where
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	q += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, describe(s.path, fmt.Errorf("list runs: %w", err))
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, describe(s.path, fmt.Errorf("read run: %w", err))
		}
		s.seenAbandoned(&r)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, describe(s.path, fmt.Errorf("list runs: %w", err))
	}
	return out, nil
}

// where is the WHERE clause of f ("" for none) and its arguments; Limit is not in it.
func (f Filter) where() (string, []any) {
	var where []string
	var args []any
	if f.Key != "" {
		where, args = append(where, "key = ?"), append(args, f.Key)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if f.Node != "" {
		where, args = append(where, "node = ?"), append(args, f.Node)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "started_at >= ?"), append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "started_at < ?"), append(args, f.Until.UnixNano())
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// Get returns one run with its output tail, or ErrNotFound.
func (s *Store) Get(id string) (Run, error) {
	var tail, streams []byte
	streamsCol := "o.streams"
	if s.version < 2 {
		streamsCol = "x''"
	}
	row := s.db.QueryRow(`SELECT `+s.selectColumns()+`, o.tail, `+streamsCol+`
		FROM runs LEFT JOIN run_output o ON o.run_id = runs.id WHERE id = ?`, id)
	r, err := scanRun(row, &tail, &streams)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Run{}, describe(s.path, fmt.Errorf("read run %s: %w", id, err))
	}
	s.seenAbandoned(&r)
	r.Output = tail
	r.Streams = decodeSegments(streams, len(tail))
	return r, nil
}
