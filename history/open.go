package history

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"
	"golang.org/x/sys/unix"
)

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
// keeps the recovery at each open short (BENCHMARKS.md). A variable for tests.
var walCheckpointAt = 200

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
	} else if err := unix.Access(abs, unix.W_OK); err != nil {
		// SQLite would open it read-only without a word and fail at the first write,
		// after a prune had counted what to delete, or a run had started its job.
		return nil, fmt.Errorf("history: cannot write %s (%w); check the permissions of the file and of its folder (readers need only read access), or set CRONLOCK_HISTORY (or --history) to a writable place", abs, sqlite3.Error{Code: sqlite3.ErrReadonly, SystemErrno: err.(syscall.Errno)})
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

// OpenRead opens the history file at path for a reader (cronlock history, stats, show).
// A file this process may write is opened as Open does, so that the reader can mark dead
// runs abandoned and write the rows of young ones. A file it can only read (another
// user's 0644 file, a read-only mount, a folder it cannot write) is opened read-only
// instead: ReadOnly then reports true, nothing is ever written to it, and Reap only
// notes which runs are dead, so that List and Get show them abandoned. It never creates
// the file; the caller checks that there is one. Its errors name the file and the fix.
func OpenRead(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	// A missing file is Open's to create: the first run of a machine may have claimed
	// its per-run file (which a reader shows) before its recorder made the database.
	if err := unix.Access(abs, unix.W_OK); err == nil || errors.Is(err, syscall.ENOENT) {
		s, err := Open(abs)
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || !cannotWrite(se.Code) {
			return s, err
		}
		// A file we may write in a folder we may not (SQLite cannot create the -wal),
		// or whose -wal or -shm belongs to someone else: read it as it is.
	}
	return openReadOnly(abs)
}

// openReadOnly opens abs without writing to it or beside it. mode=ro reads the rows a
// live writer keeps in the -wal too, but needs the -wal and -shm to exist (or to be
// creatable); without a -wal the database file alone is complete, and immutable=1 reads
// it where nothing can be created (a read-only mount, someone else's folder).
func openReadOnly(abs string) (*Store, error) {
	if err := checkLocalFS(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	var err error
	for _, mode := range []string{"mode=ro", "immutable=1"} {
		if mode == "immutable=1" {
			if fi, serr := os.Stat(abs + "-wal"); serr == nil && fi.Size() > 0 {
				break // immutable would hide the rows in the -wal: say why we cannot read
			}
		}
		var s *Store
		if s, err = openMode(abs, mode); err == nil {
			return s, nil
		}
	}
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrCorrupt) {
		return nil, describe(abs, err)
	}
	return nil, fmt.Errorf("history: cannot read %s (%v); check that you may read it, its -wal and -shm files and its folder, or set CRONLOCK_HISTORY (or --history) to another file", abs, err)
}

// openMode opens abs read-only with the SQLite URI parameter mode and reads its schema
// version, which is where an unreadable file shows.
func openMode(abs, mode string) (*Store, error) {
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: abs}).EscapedPath()+
		fmt.Sprintf("?%s&_busy_timeout=%d", mode, busyTimeoutMS))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s := &Store{db: db, path: abs, runsDir: abs + "-runs", locks: map[string]*os.File{},
		readOnly: true, abandoned: map[string]bool{}}
	if err := db.QueryRow("PRAGMA user_version").Scan(&s.version); err != nil {
		db.Close()
		return nil, err
	}
	if s.version > len(migrations) {
		db.Close()
		return nil, fmt.Errorf("history: %s has schema version %d, newer than this cronlock knows (%d); upgrade cronlock", abs, s.version, len(migrations))
	}
	if s.version == 0 {
		db.Close()
		return nil, sqlite3.Error{Code: sqlite3.ErrNotADB}
	}
	return s, nil
}

// cannotWrite reports whether an SQLite error code means the file, its folder, its -wal
// or its -shm may not be written (or created) by this process.
func cannotWrite(code sqlite3.ErrNo) bool {
	switch code {
	case sqlite3.ErrCantOpen, sqlite3.ErrReadonly, sqlite3.ErrPerm, sqlite3.ErrAuth, sqlite3.ErrIoErr:
		return true
	}
	return false
}

// ReadOnly reports whether s was opened read-only (OpenRead): it then writes nothing.
func (s *Store) ReadOnly() bool { return s.readOnly }

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
	s.version = len(migrations) // what it is once init succeeds
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

// describe turns an SQLite error into one that names the file and the fix. It wraps the
// SQLite error (%w), never just its text: callers tell causes apart by it (a warning is
// limited to once an hour per cause, which a run id in the text would defeat).
func describe(path string, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err
	}
	full := se.Code == sqlite3.ErrFull || se.SystemErrno == syscall.ENOSPC || se.SystemErrno == syscall.EDQUOT
	switch {
	case full:
		// SQLite says "database or disk is full", or, for a write that the file system
		// refused, "disk I/O error" with the errno: either way, no permission is wrong.
		return &diskFullError{path: path, err: err}
	case se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrCorrupt:
		return fmt.Errorf("history: %s is corrupt or not a cronlock history (%w); move it aside (cronlock then starts a new one) or set CRONLOCK_HISTORY (or --history) to another file", path, err)
	case cannotWrite(se.Code):
		// %w: OpenRead tells from the code that a reader may still read the file.
		return fmt.Errorf("history: cannot write %s (%w); check the permissions of the file, of its -wal and -shm files and of its folder, or set CRONLOCK_HISTORY (or --history) to a writable place", path, err)
	case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
		return fmt.Errorf("history: %s stayed locked by another process for %ds (%w)", path, busyTimeoutMS/1000, err)
	}
	return fmt.Errorf("history: %s: %w", path, err)
}

// diskFullError is a history on a full file system, whichever SQLite error said so.
type diskFullError struct {
	path string
	err  error
}

func (e *diskFullError) Error() string {
	return fmt.Sprintf("history: %s: the disk is full (%v); free space there, or set CRONLOCK_HISTORY (or --history) to another file system", e.path, e.err)
}

func (e *diskFullError) Unwrap() error { return e.err }

// Cause is the same for every run and every SQLite code that says the disk is full: a
// warning limited to once an hour per cause must not come again because the next run
// met the full disk at another step.
func (e *diskFullError) Cause() string { return "history: " + e.path + ": disk full" }

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
