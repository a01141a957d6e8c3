package history

import (
	"bytes"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"cronlock/runstatus"
)

// v1File writes a history file as cronlock with schema v1 left it: migrations[0] only,
// user_version 1, WAL mode, one finished run with an output tail and one running run.
func v1File(t *testing.T) (path string, started time.Time) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "history.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(migrations[0]); err != nil {
		t.Fatalf("schema v1: %v", err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	started = time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	// The columns of v1, exactly: a v1 cronlock wrote no others.
	_, err = db.Exec(`INSERT INTO runs (id, key, node, pid, command, status, exit_code, signal,
		started_at, finished_at, error, holder, fencing_token, backend)
		VALUES ('0195520a-1b00-7000-8000-000000000001', 'old-key', 'old-node', 4321, x'2f6f70742f6a6f622e73680061726700',
			'failed', 3, '', ?, ?, '', '', 17, 'local /run/cronlock'),
		       ('0195520a-1b00-7000-8000-000000000002', 'old-key', 'old-node', 4322, x'7400',
			'running', NULL, '', ?, NULL, '', '', 18, 'local /run/cronlock')`,
		started.UnixNano(), started.Add(2*time.Second).UnixNano(), started.Add(time.Minute).UnixNano())
	if err != nil {
		t.Fatalf("v1 rows: %v", err)
	}
	if _, err := db.Exec(`INSERT INTO run_output (run_id, tail) VALUES ('0195520a-1b00-7000-8000-000000000001', 'old output')`); err != nil {
		t.Fatalf("v1 output: %v", err)
	}
	return path, started
}

// TestMigrateFromV1 opens a file written by schema v1 with the current code: it is
// brought up to date, its rows read back with the defaults of the new columns, and new
// rows go in beside them.
func TestMigrateFromV1(t *testing.T) {
	path, started := v1File(t)
	s, err := Open(path)
	if err != nil {
		t.Fatalf("open a v1 file: %v", err)
	}
	defer s.Close()
	if v := userVersion(t, s); v != len(migrations) {
		t.Fatalf("user_version after open = %d, want %d", v, len(migrations))
	}

	old, err := s.Get("0195520a-1b00-7000-8000-000000000001")
	if err != nil {
		t.Fatalf("the v1 row is gone: %v", err)
	}
	if old.Key != "old-key" || old.Node != "old-node" || old.PID != 4321 || old.Status != runstatus.Failed ||
		old.ExitCode == nil || *old.ExitCode != 3 || old.FencingToken != 17 || old.Backend != "local /run/cronlock" {
		t.Errorf("v1 row read back as %+v", old)
	}
	if fmt.Sprint(old.Command) != "[/opt/job.sh arg]" {
		t.Errorf("v1 command %q", old.Command)
	}
	if !old.StartedAt.Equal(started) || old.Duration() != 2*time.Second {
		t.Errorf("v1 times %v, %v", old.StartedAt, old.Duration())
	}
	if old.Exit != nil {
		t.Errorf("v1 row: exit %d; want none (it was never recorded)", *old.Exit)
	}
	if old.Attempt != 1 || old.BootID != nil || old.PIDStart != 0 {
		t.Errorf("v1 row: attempt %d, boot id %x, pid start %d; want 1, none, 0", old.Attempt, old.BootID, old.PIDStart)
	}
	if string(old.Output) != "old output" || old.Streams != nil {
		t.Errorf("v1 output %q with streams %v; want the tail, unmarked", old.Output, old.Streams)
	}

	// A v1 run left running by a dead cronlock has no lock file: Reap sees it dead.
	if n, err := s.Reap("old-node"); err != nil || n != 1 {
		t.Fatalf("Reap of the v1 running row: %d, %v; want 1", n, err)
	}
	if r, err := s.Get("0195520a-1b00-7000-8000-000000000002"); err != nil || r.Status != runstatus.Abandoned || r.BootID != nil {
		t.Fatalf("v1 running row after Reap: %+v, %v", r, err)
	}

	// New rows, with the v2 fields, go in beside the old ones.
	boot := []byte("0123456789abcdef")
	r := &Run{Key: "old-key", Node: "new-node", PID: 99, Command: []string{"true"}, Attempt: 3, BootID: boot, PIDStart: 777}
	if err := s.Start(r); err != nil {
		t.Fatalf("Start on a migrated file: %v", err)
	}
	r.Status, r.ExitCode, r.Exit = runstatus.Succeeded, new(int), new(int)
	r.Output, r.Streams = []byte("out"), []Segment{{Stdout, 2}, {Stderr, 1}}
	if err := s.Finish(r); err != nil {
		t.Fatalf("Finish on a migrated file: %v", err)
	}
	if err := s.Insert(&Run{Key: "other", Status: runstatus.Skipped, Holder: "h"}); err != nil {
		t.Fatalf("Insert on a migrated file: %v", err)
	}
	got, err := s.Get(r.ID)
	if err != nil || got.Attempt != 3 || !bytes.Equal(got.BootID, boot) || got.PIDStart != 777 || got.Exit == nil || *got.Exit != 0 ||
		fmt.Sprint(got.Streams) != "[{1 2} {2 1}]" {
		t.Fatalf("new row on a migrated file: %+v, %v", got, err)
	}
	runs, err := s.List(Filter{Key: "old-key"})
	if err != nil || len(runs) != 3 || runs[0].ID != r.ID {
		t.Fatalf("List of old-key: %d runs, %v; want the new run first, then the two v1 runs", len(runs), err)
	}
	s.Close()

	// Reopening does no schema work and keeps everything.
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if runs, err := s2.List(Filter{}); err != nil || len(runs) != 4 {
		t.Fatalf("after reopen: %d runs, %v; want 4", len(runs), err)
	}
}

// TestMigrateConcurrentOpens: the first cronlocks after an upgrade open the v1 file at
// the same moment; each migration step runs once, and all of them can write.
func TestMigrateConcurrentOpens(t *testing.T) {
	path, _ := v1File(t)
	const g = 16
	var wg sync.WaitGroup
	errs := make(chan error, g)
	start := make(chan struct{})
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := Open(path)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if err := s.Insert(&Run{Key: "after", Status: runstatus.Skipped}); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent open of a v1 file: %v", err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := userVersion(t, s); v != len(migrations) {
		t.Fatalf("user_version = %d, want %d", v, len(migrations))
	}
	if runs, err := s.List(Filter{}); err != nil || len(runs) != g+2 {
		t.Fatalf("%d runs, %v; want %d", len(runs), err, g+2)
	}
}

// TestReadOnlyOldSchema: a v1 file that cannot be written (so not migrated) is still read,
// with the newer fields at their defaults, and a read-only Reap writes nothing but shows
// the dead run abandoned.
func TestReadOnlyOldSchema(t *testing.T) {
	path, _ := v1File(t)
	for _, mode := range []string{"mode=ro", "immutable=1"} {
		s, err := openMode(path, mode)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if n, err := s.Reap("old-node"); err != nil || n != 1 {
			t.Errorf("%s: read-only Reap: %d, %v; want 1 noted", mode, n, err)
		}
		runs, err := s.List(Filter{})
		if err != nil || len(runs) != 2 {
			t.Fatalf("%s: List: %d runs, %v", mode, len(runs), err)
		}
		if runs[0].Status != runstatus.Abandoned || runs[0].Exit != nil || runs[0].Attempt != 1 {
			t.Errorf("%s: dead v1 run read as %+v; want abandoned, no exit, attempt 1", mode, runs[0])
		}
		r, err := s.Get("0195520a-1b00-7000-8000-000000000001")
		if err != nil || string(r.Output) != "old output" || r.ExitCode == nil || *r.ExitCode != 3 {
			t.Errorf("%s: Get: %+v, %v", mode, r, err)
		}
		s.Close()
	}
	if v := fileVersion(t, path); v != 1 {
		t.Errorf("user_version %d after read-only opens, want 1 (nothing written)", v)
	}
}

func fileVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrateFromV3: a file of schema v3 (before scheduled_for) gains the column on open;
// its old rows have no tick, and a new row keeps its tick to the nanosecond in UTC. The
// same file read-only (not migrated) reads with no tick.
func TestMigrateFromV3(t *testing.T) {
	path, _ := v1File(t)
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, m := range migrations[1:3] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("schema v2/v3: %v", err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 3`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := openMode(path, "mode=ro")
	if err != nil {
		t.Fatalf("read-only open of a v3 file: %v", err)
	}
	runs, err := ro.List(Filter{})
	if err != nil || len(runs) != 2 || !runs[0].ScheduledFor.IsZero() || runs[0].Try != 1 || runs[0].RunID != runs[0].ID {
		t.Fatalf("read-only v3 file: %d runs, %v, %+v; want 2 runs of one try without tick", len(runs), err, runs)
	}
	ro.Close()
	if v := fileVersion(t, path); v != 3 {
		t.Fatalf("user_version %d after a read-only open, want 3", v)
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("open a v3 file: %v", err)
	}
	defer s.Close()
	if v := userVersion(t, s); v != 6 || len(migrations) != 6 {
		t.Fatalf("user_version %d after open (%d migrations), want 6", v, len(migrations))
	}
	old, err := s.Get("0195520a-1b00-7000-8000-000000000001")
	if err != nil || !old.ScheduledFor.IsZero() {
		t.Fatalf("v3 row after migration: tick %v, %v; want none", old.ScheduledFor, err)
	}
	tick := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	r := &Run{Key: "k", Node: "n", Command: []string{"true"}, Status: runstatus.Skipped, ScheduledFor: tick}
	if err := s.Insert(r); err != nil {
		t.Fatalf("Insert with a tick: %v", err)
	}
	got, err := s.Get(r.ID)
	if err != nil || !got.ScheduledFor.Equal(tick) || got.ScheduledFor.Location() != time.UTC {
		t.Fatalf("tick read back as %v (%v); want %v in UTC", got.ScheduledFor, err, tick)
	}
	b, _ := got.MarshalJSON()
	if !bytes.Contains(b, []byte(`"scheduled_for":"2026-12-01T08:00:00Z"`)) {
		t.Errorf("--json line %s lacks scheduled_for in RFC 3339 UTC", b)
	}
	b, _ = old.MarshalJSON()
	if !bytes.Contains(b, []byte(`"scheduled_for":null`)) {
		t.Errorf("--json line of a run without tick %s: want scheduled_for null", b)
	}
	if !bytes.Contains(b, []byte(`"run_id":"0195520a-1b00-7000-8000-000000000001","try":1`)) {
		t.Errorf("--json line of a row from before tries %s: want its own id as run_id, try 1", b)
	}
	// A later try keeps its link to the run's first try.
	try2 := &Run{Key: "k", Node: "n", Command: []string{"false"}, Status: runstatus.Failed, RunID: r.ID, Try: 2}
	if err := s.Insert(try2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(try2.ID); err != nil || got.RunID != r.ID || got.Try != 2 {
		t.Fatalf("try 2 read back as run %q try %d (%v); want run %q try 2", got.RunID, got.Try, err, r.ID)
	}
}
