package history

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/mattn/go-sqlite3"
)

// Statuses of a run (SPEC §3, §6).
const (
	StatusRunning     = "running"
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusTimeout     = "timeout"
	StatusLockLost    = "lock_lost"
	StatusInterrupted = "interrupted"
	StatusSkipped     = "skipped"
	StatusError       = "error"
	StatusAbandoned   = "abandoned"
)

// Statuses lists every status a row can have, in the order the SPEC gives them.
var Statuses = []string{StatusRunning, StatusSucceeded, StatusFailed, StatusTimeout,
	StatusLockLost, StatusInterrupted, StatusSkipped, StatusError, StatusAbandoned}

// ValidStatus reports whether s is one of Statuses.
func ValidStatus(s string) bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// ErrNotFound is returned by Get for an unknown run id.
var ErrNotFound = errors.New("history: run not found")

// busyTimeoutMS is how long one statement waits for another process's write lock.
// Writes take microseconds, so only a pathological pile-up waits this long; a lost row
// is worse than a late one.
const busyTimeoutMS = 10000

// walCheckpointAt bounds the WAL, in pages. cronlock's processes are short and never
// close the database (see Store.Close), so each one is the file's first connection and
// recovers the WAL when it opens it: a read of the whole WAL, and a wal-index rebuilt as
// if nothing had been copied back yet. SQLite's automatic checkpoint, which runs after a
// commit, copies the WAL back into the database, but the WAL is only reset by the next
// write of the same connection; a process that writes once (a short run) never gets
// there, and the WAL would grow without end. So Open checks the WAL's size and, past
// this many pages, checkpoints and truncates it (walCheckpoint). 200 pages (800 KiB)
// keeps the recovery short; it measured faster per run than SQLite's default 1000.
// A variable for tests.
var walCheckpointAt = 200

// Run is one row of the history.
type Run struct {
	ID           string    // UUIDv7; Start and Insert fill it in when empty
	Key, Node    string    // lock key; this machine's name
	PID          int       // pid of the cronlock process
	Command      []string  // argv of the child
	Status       string    // one of Statuses
	ExitCode     *int      // nil when there is none (not started, killed by a signal…)
	Signal       string    // "SIGTERM" when the child died from a signal, else ""
	StartedAt    time.Time // Start and Insert use time.Now() when zero
	FinishedAt   time.Time // zero while running, and for abandoned runs (unknown)
	Error        string    // why the run failed, for people
	Holder       string    // for skipped: who holds the lock
	FencingToken uint64    // 0 = none
	Backend      string    // "redis 127.0.0.1:6379/0" or "local /run/cronlock"; never a password
	Output       []byte    // captured tail (binary-safe); List leaves it nil, Get fills it
	Streams      []Segment // which stream each part of Output came from; nil = unmarked

	Attempt  int    // lock tries this run made: 1 = the first; more after --wait or retries
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
}

// Path returns the absolute path of the history file.
func (s *Store) Path() string { return s.path }

// Open opens the history file at path, creating it (0600) and its folder (0700) when
// missing, and brings its schema up to date. It refuses a folder on NFS or CIFS, and
// returns an error that names the file and says what to do when the file is corrupt,
// not a database, or cannot be written. The caller is expected to warn and still run
// the job in that case.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("history: empty path; set CRONLOCK_HISTORY or --history")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("history: create folder %s: %w; set CRONLOCK_HISTORY (or --history) to a writable place", dir, unwrapPath(err))
	}
	if err := checkLocalFS(dir); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		if err := create(abs); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("sqlite3", dsn(abs))
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", abs, err)
	}
	// One connection per process is all cronlock needs, and it keeps the cost of a run to
	// one SQLite open.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)

	s := &Store{db: db, path: abs, runsDir: abs + "-runs", locks: map[string]*os.File{}}
	if err := s.init(); err != nil {
		db.Close()
		return nil, describe(abs, err)
	}
	return s, nil
}

// dsn is the go-sqlite3 data source name of the file at abs. A file: URI so that any
// byte of the path (even '?' or '#') survives; SQLite decodes the %-escapes.
// _txlock=immediate makes every transaction take the write lock at BEGIN, under the busy
// timeout, instead of failing at its first write with SQLITE_BUSY when another process
// wrote in between (the classic "database is locked" of deferred transactions in WAL
// mode). Foreign keys let a prune of runs drop their output tails.
func dsn(abs string) string {
	return "file:" + (&url.URL{Path: abs}).EscapedPath() +
		fmt.Sprintf("?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=%d&_txlock=immediate&_foreign_keys=1", busyTimeoutMS)
}

// create makes a new, fully initialised history file at abs. It builds it under a
// temporary name and links it into place, so that processes racing to create the file
// never switch one empty file to WAL mode at the same time (SQLite then fails with
// "disk I/O error" as each deletes the other's rollback journal), and so that the file is
// 0600 from the start: SQLite would create it 0644 (minus umask), and the -wal and -shm
// files copy the database file's mode. The loser of the race drops its copy.
func create(abs string) error {
	tmp := fmt.Sprintf("%s.new-%d-%d", abs, os.Getpid(), time.Now().UnixNano())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("history: create %s: %w; fix the permissions or set CRONLOCK_HISTORY (or --history) to a writable place", abs, unwrapPath(err))
	}
	f.Close()
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite3", dsn(tmp))
	if err != nil {
		return fmt.Errorf("history: create %s: %w", abs, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: tmp}
	err = s.init()
	if cerr := db.Close(); err == nil {
		err = cerr // closing checkpoints the WAL into tmp: the linked file is complete
	}
	if err != nil {
		return describe(abs, fmt.Errorf("create: %w", err))
	}
	err = os.Link(tmp, abs)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EOPNOTSUPP) {
		// A filesystem without hard links: a rename, which would replace a file created
		// in between, but only after checking (a much smaller race).
		if _, serr := os.Lstat(abs); errors.Is(serr, fs.ErrNotExist) {
			err = os.Rename(tmp, abs)
		} else {
			err = nil
		}
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("history: create %s: %w", abs, unwrapPath(err))
	}
	return nil
}

// init checks the journal mode and migrates the schema when the file is older than
// this code.
func (s *Store) init() error {
	var mode string
	// journal_mode=WAL silently stays "delete" where WAL cannot work; refuse rather than
	// lose concurrency and crash safety without a word.
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("history: %s: journal mode is %q, not WAL (a network or unusual filesystem?); set CRONLOCK_HISTORY (or --history) to a file on a local disk", s.path, mode)
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if fi, err := os.Stat(s.path + "-wal"); err == nil && fi.Size() > int64(walCheckpointAt)*pageSize {
		s.walCheckpoint()
	}
	if v == len(migrations) {
		return nil // the hot path: no schema work on a current file
	}
	if v > len(migrations) {
		return fmt.Errorf("history: %s has schema version %d, newer than this cronlock knows (%d); upgrade cronlock or set CRONLOCK_HISTORY to another file", s.path, v, len(migrations))
	}
	return s.migrate()
}

// pageSize is SQLite's default page size, which history files keep.
const pageSize = 4096

// walCheckpoint copies the WAL back into the database and truncates it to nothing, so
// that the next opener has nothing to recover (see walCheckpointAt). It does not wait:
// while another process reads or writes, the checkpoint is left to a later Open, and
// SQLite's automatic checkpoint (at 1000 pages) still bounds the WAL meanwhile.
func (s *Store) walCheckpoint() {
	if _, err := s.db.Exec(`PRAGMA busy_timeout = 0`); err != nil {
		return
	}
	_, _ = s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	_, _ = s.db.Exec(fmt.Sprintf(`PRAGMA busy_timeout = %d`, busyTimeoutMS))
}

// migrate applies the missing steps in one immediate transaction; re-reading the version
// inside it makes concurrent first opens of a new file apply each step exactly once.
func (s *Store) migrate() error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("history: %s has schema version %d, newer than this cronlock knows (%d); upgrade cronlock or set CRONLOCK_HISTORY to another file", s.path, v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		if _, err := tx.Exec(migrations[v]); err != nil {
			return fmt.Errorf("migrate history schema to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return tx.Commit()
}

// describe turns an SQLite error into one that names the file and the fix.
func describe(path string, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case sqlite3.ErrNotADB, sqlite3.ErrCorrupt:
		return fmt.Errorf("history: %s is corrupt or not a cronlock history (%v); move it aside (cronlock then starts a new one) or set CRONLOCK_HISTORY (or --history) to another file", path, err)
	case sqlite3.ErrCantOpen, sqlite3.ErrReadonly, sqlite3.ErrPerm, sqlite3.ErrAuth, sqlite3.ErrIoErr:
		return fmt.Errorf("history: cannot write %s (%v); check the permissions of the file, of its -wal and -shm files and of its folder, or set CRONLOCK_HISTORY (or --history) to a writable place", path, err)
	case sqlite3.ErrFull:
		return fmt.Errorf("history: %s: the disk is full (%v)", path, err)
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return fmt.Errorf("history: %s stayed locked by another process for %ds (%v)", path, busyTimeoutMS/1000, err)
	}
	return fmt.Errorf("history: %s: %w", path, err)
}

// unwrapPath drops the *PathError wrapper whose path the message already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Close releases the per-run locks this Store still holds (their runs then count as
// abandoned) and closes the database. When this is the last connection to the file,
// SQLite checkpoints the WAL into the database first (two fsyncs); a short-lived process
// that is about to exit may skip Close instead: that is safe, and the next opener
// recovers the WAL.
func (s *Store) Close() error {
	s.mu.Lock()
	for id, f := range s.locks {
		f.Close()
		delete(s.locks, id)
	}
	s.mu.Unlock()
	return s.db.Close()
}

const runColumns = `id, key, node, pid, command, status, exit_code, signal, started_at,
	finished_at, error, holder, fencing_token, backend, attempt, boot_id, pid_start`

// runValues is the placeholder list for runColumns.
const runValues = `(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// Start records r as running and takes its per-run lock, which it holds until Finish
// (or until the process dies, which Reap then sees). It fills in r.ID (a UUIDv7) and
// r.StartedAt when they are empty, and sets r.Status to running.
func (s *Store) Start(r *Run) error {
	if err := prepare(r); err != nil {
		return err
	}
	r.Status = StatusRunning
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
	row.ExitCode, row.Signal = nil, ""
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
	if r.Status == StatusRunning {
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
			attempt = excluded.attempt, boot_id = excluded.boot_id, pid_start = excluded.pid_start`, rowArgs(r)...)
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

// prepare fills in defaults and checks what would otherwise corrupt a row or a path.
func prepare(r *Run) error {
	if r.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("history: new run id: %w", err)
		}
		r.ID = id.String()
	}
	// The id names a file in the runs folder: keep it to UUID characters.
	for _, c := range r.ID {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-') || len(r.ID) > 64 {
			return fmt.Errorf("history: invalid run id %q", r.ID)
		}
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now()
	}
	if r.Attempt < 1 {
		r.Attempt = 1
	}
	// A row of this very process names this boot and this process's start, so that Reap
	// never mistakes a later process with the same pid for it.
	if r.PID == os.Getpid() {
		if r.BootID == nil {
			r.BootID = BootID()
		}
		if r.PIDStart == 0 {
			r.PIDStart = selfStart()
		}
	}
	if r.Status != "" && !ValidStatus(r.Status) {
		return fmt.Errorf("history: run %s: unknown status %q", r.ID, r.Status)
	}
	if r.Status == "" && r.FinishedAt.IsZero() {
		r.Status = StatusRunning
	}
	if r.Status == "" {
		return fmt.Errorf("history: run %s: no status", r.ID)
	}
	return nil
}

func rowArgs(r *Run) []any {
	var exit, fin any
	if r.ExitCode != nil {
		exit = int64(*r.ExitCode)
	}
	if !r.FinishedAt.IsZero() {
		fin = r.FinishedAt.UnixNano()
	}
	return []any{r.ID, r.Key, r.Node, int64(r.PID), encodeArgv(r.Command), r.Status, exit, r.Signal,
		r.StartedAt.UnixNano(), fin, r.Error, r.Holder,
		int64(r.FencingToken), // bit for bit: database/sql refuses uint64 ≥ 2^63
		r.Backend, int64(r.Attempt), nonNil(r.BootID), int64(r.PIDStart)}
}

// nonNil keeps NOT NULL blob columns from receiving NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// encodeSegments stores segments as pairs of uvarints (stream, length).
func encodeSegments(segs []Segment) []byte {
	b := []byte{}
	for _, sg := range segs {
		b = binary.AppendUvarint(b, uint64(sg.Stream))
		b = binary.AppendUvarint(b, uint64(sg.Len))
	}
	return b
}

// decodeSegments reads what encodeSegments wrote. Segments that run past total bytes, or
// bytes of a damaged list, are dropped: the tail then shows as unmarked from there on.
func decodeSegments(b []byte, total int) []Segment {
	var segs []Segment
	sum := 0
	for len(b) > 0 {
		st, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		ln, m := binary.Uvarint(b[n:])
		if m <= 0 || ln > uint64(total-sum) {
			break
		}
		b = b[n+m:]
		segs = append(segs, Segment{Stream: Stream(st), Len: int(ln)})
		sum += int(ln)
	}
	return segs
}

// encodeArgv stores argv binary-safe: every argument followed by a NUL byte, which no
// argument of exec can contain. JSON would turn invalid UTF-8 into U+FFFD.
func encodeArgv(argv []string) []byte {
	var b []byte
	for _, a := range argv {
		b = append(append(b, a...), 0)
	}
	if b == nil {
		b = []byte{} // NOT NULL
	}
	return b
}

func decodeArgv(b []byte) []string {
	argv := []string{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b) // a row written by hand without the final NUL
			argv = append(argv, string(b))
			break
		}
		argv = append(argv, string(b[:i]))
		b = b[i+1:]
	}
	return argv
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner, extra ...any) (Run, error) {
	var (
		r         Run
		pid       int64
		cmd       []byte
		exit, fin sql.NullInt64
		started   int64
		token     int64
		attempt   int64
		pidStart  int64
	)
	dest := append([]any{&r.ID, &r.Key, &r.Node, &pid, &cmd, &r.Status, &exit, &r.Signal,
		&started, &fin, &r.Error, &r.Holder, &token, &r.Backend, &attempt, &r.BootID, &pidStart}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	r.PID = int(pid)
	r.Command = decodeArgv(cmd)
	if exit.Valid {
		c := int(exit.Int64)
		r.ExitCode = &c
	}
	r.StartedAt = time.Unix(0, started)
	if fin.Valid {
		r.FinishedAt = time.Unix(0, fin.Int64)
	}
	r.FencingToken = uint64(token)
	r.Attempt = int(attempt)
	r.PIDStart = uint64(pidStart)
	if len(r.BootID) == 0 {
		r.BootID = nil
	}
	return r, nil
}

// List returns the runs that match f, newest first (by start time, then by insertion
// order). Output is not loaded; use Get for that.
func (s *Store) List(f Filter) ([]Run, error) {
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
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
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
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, describe(s.path, fmt.Errorf("list runs: %w", err))
	}
	return out, nil
}

// Get returns one run with its output tail, or ErrNotFound.
func (s *Store) Get(id string) (Run, error) {
	var tail, streams []byte
	row := s.db.QueryRow(`SELECT `+runColumns+`, o.tail, o.streams
		FROM runs LEFT JOIN run_output o ON o.run_id = runs.id WHERE id = ?`, id)
	r, err := scanRun(row, &tail, &streams)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Run{}, describe(s.path, fmt.Errorf("read run %s: %w", id, err))
	}
	r.Output = tail
	r.Streams = decodeSegments(streams, len(tail))
	return r, nil
}
