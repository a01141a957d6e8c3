package history

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

func TestOpenCreatesPrivateFiles(t *testing.T) {
	old := syscallUmask(0) // the modes must not depend on a permissive umask
	defer syscallUmask(old)
	s, path := openTemp(t)
	r := &Run{Key: "k", Command: []string{"true"}}
	if err := s.Start(r); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Dir(path), 0o700 | os.ModeDir},
		{filepath.Dir(filepath.Dir(path)), 0o700 | os.ModeDir},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
		{path + "-runs", 0o700 | os.ModeDir},
		{filepath.Join(path+"-runs", r.ID+".lock"), 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	var mode string
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var sync, busy int
	s.db.QueryRow("PRAGMA synchronous").Scan(&sync)
	s.db.QueryRow("PRAGMA busy_timeout").Scan(&busy)
	if sync != 1 || busy != busyTimeoutMS {
		t.Errorf("synchronous=%d busy_timeout=%d; want 1 (NORMAL), %d", sync, busy, busyTimeoutMS)
	}
}

func TestPathWithURIBytes(t *testing.T) {
	// '?' '#' '%' and spaces in a path must not be read as URI syntax.
	path := filepath.Join(t.TempDir(), "a b?c#d%41", "h.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Insert(&Run{Key: "k", Status: runstatus.Skipped}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at the path given: %v", err)
	}
}

func TestSchemaMigration(t *testing.T) {
	s, path := openTemp(t)
	if v := userVersion(t, s); v != len(migrations) {
		t.Fatalf("user_version = %d, want %d", v, len(migrations))
	}
	if err := s.Insert(&Run{ID: "r1", Key: "k", Status: runstatus.Succeeded}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopening a current file changes nothing and keeps the rows.
	for i := 0; i < 3; i++ {
		s2, err := Open(path)
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		if v := userVersion(t, s2); v != len(migrations) {
			t.Fatalf("user_version after reopen = %d", v)
		}
		s2.Close()
	}

	// A later version adds a step: it migrates this older file once, keeping its rows.
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = append(append([]string(nil), saved...), `ALTER TABLE runs ADD COLUMN extra TEXT NOT NULL DEFAULT 'x'`)
	for i := 0; i < 2; i++ { // the second open must not re-run the ALTER (it would fail)
		s3, err := Open(path)
		if err != nil {
			t.Fatalf("migrate (open %d): %v", i, err)
		}
		if v := userVersion(t, s3); v != len(migrations) {
			t.Fatalf("user_version after migration = %d, want %d", v, len(migrations))
		}
		if _, err := s3.Get("r1"); err != nil {
			t.Fatalf("row lost by migration: %v", err)
		}
		s3.Close()
	}

	// The older code refuses the newer file with a clear message.
	migrations = saved
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer file: %v, want an error saying it is newer", err)
	}
}

func TestRoundTrip(t *testing.T) {
	s, _ := openTemp(t)
	start := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600))
	cases := []struct {
		name   string
		insert bool // Insert instead of Start+Finish
		run    Run
	}{
		{"every field", false, Run{
			Key: "billing:eu/1@x", Node: "web-1\x1b[31m", PID: 4242,
			Command: []string{"sh", "-c", "echo 'a b'\n", "", "\xff\x01\x1b"},
			Status:  runstatus.Failed, ExitCode: intp(3), Signal: "", Error: "exit status 3",
			StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond),
			FencingToken: math.MaxUint64, Backend: "redis 127.0.0.1:6379/0",
			Output: []byte("line\x00\xff\xfe\r\nend"),
		}},
		{"signal, no exit code", false, Run{
			Key: "k", Node: "n", PID: 1, Command: []string{"x"}, Status: runstatus.Interrupted,
			Signal: "SIGTERM", StartedAt: start, FinishedAt: start.Add(time.Second), FencingToken: 1,
			Backend: "local /run/cronlock",
		}},
		{"exit code zero", false, Run{
			Key: "k", Node: "n", PID: 2, Command: []string{"true"}, Status: runstatus.Succeeded,
			ExitCode: intp(0), StartedAt: start, FinishedAt: start,
		}},
		{"skipped with holder", true, Run{
			Key: "k", Node: "n", PID: 3, Command: []string{"true"}, Status: runstatus.Skipped,
			Holder: "web-2 (pid 9, run abc)", StartedAt: start, FinishedAt: start,
		}},
		{"error before start, no command", true, Run{
			Key: "k", Node: "n", PID: 4, Status: runstatus.Error, Error: "redis unreachable",
			StartedAt: start, FinishedAt: start.Add(time.Millisecond),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.run
			if c.insert {
				if err := s.Insert(&r); err != nil {
					t.Fatal(err)
				}
			} else {
				fin := r
				if err := s.Start(&r); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != runstatus.Running || !got.FinishedAt.IsZero() || got.ExitCode != nil {
					t.Fatalf("after Start: status %q finished %v exit %v", got.Status, got.FinishedAt, got.ExitCode)
				}
				fin.ID = r.ID
				r = fin
				if err := s.Finish(&r); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(s.runsDir, r.ID+".lock")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("per-run lock file still there after Finish: %v", err)
				}
			}
			if len(r.ID) != 36 || r.ID[14] != '7' {
				t.Errorf("id %q is not a UUIDv7", r.ID)
			}
			got, err := s.Get(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := r
			if want.Command == nil {
				want.Command = []string{}
			}
			if !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) {
				t.Errorf("times %v–%v, want %v–%v", got.StartedAt, got.FinishedAt, want.StartedAt, want.FinishedAt)
			}
			got.StartedAt, got.FinishedAt, want.StartedAt, want.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			if want.Output == nil {
				want.Output = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %#v\nwant %#v", got, want)
			}
			// List does not load the output but returns everything else.
			runs, err := s.List(Filter{Key: r.Key, Limit: 1})
			if err != nil || len(runs) != 1 || runs[0].ID != r.ID || runs[0].Output != nil || runs[0].Node != r.Node {
				t.Errorf("List: %+v, %v", runs, err)
			}
		})
	}
	if _, err := s.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
	}
}

func TestBadRuns(t *testing.T) {
	s, _ := openTemp(t)
	for _, c := range []struct {
		name string
		run  Run
		op   func(*Run) error
	}{
		{"unknown status", Run{Key: "k", Status: "done"}, s.Insert},
		{"finish as running", Run{Key: "k", Status: runstatus.Running}, s.Finish},
		{"id with a slash", Run{ID: "../../x", Key: "k", Status: runstatus.Skipped}, s.Insert},
		{"start with a path id", Run{ID: "../x", Key: "k"}, s.Start},
	} {
		r := c.run
		if err := c.op(&r); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func TestFinishWithoutStartRow(t *testing.T) {
	// Start's write failed (say the disk was full) but the run happened: Finish records it.
	s, _ := openTemp(t)
	r := &Run{ID: "0190a7b2-0000-7000-8000-000000000001", Key: "k", Status: runstatus.Succeeded, ExitCode: intp(0)}
	if err := s.Finish(r); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(r.ID); err != nil || got.Status != runstatus.Succeeded {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestListOrderAndFilters(t *testing.T) {
	s, _ := openTemp(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Inserted out of order; two share a start time (tie: later insertion first).
	rows := []struct {
		id, key, node, status string
		at                    int
	}{
		{"a", "k1", "n1", runstatus.Succeeded, 3},
		{"b", "k2", "n1", runstatus.Failed, 1},
		{"c", "k1", "n2", runstatus.Skipped, 5},
		{"d", "k1", "n1", runstatus.Failed, 5},
		{"e", "k2", "n2", runstatus.Succeeded, 2},
	}
	for _, r := range rows {
		at := base.Add(time.Duration(r.at) * time.Minute)
		if err := s.Insert(&Run{ID: r.id, Key: r.key, Node: r.node, Status: r.status, StartedAt: at, FinishedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "dcaeb"},
		{Filter{Limit: 2}, "dc"},
		{Filter{Key: "k1"}, "dca"},
		{Filter{Key: "k1", Limit: 1}, "d"},
		{Filter{Key: "k2"}, "eb"},
		{Filter{Status: runstatus.Failed}, "db"},
		{Filter{Node: "n2"}, "ce"},
		{Filter{Key: "k1", Node: "n1", Status: runstatus.Succeeded}, "a"},
		{Filter{Key: "none"}, ""},
	} {
		runs, err := s.List(c.f)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, r := range runs {
			got += r.ID
		}
		if got != c.want {
			t.Errorf("List(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}

// TestQueryPlans pins that the history listings walk an index newest first instead of
// sorting the table, so they stay fast with a million rows.
func TestQueryPlans(t *testing.T) {
	s, _ := openTemp(t)
	for _, c := range []struct {
		q, index string
	}{
		{`SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 20`, "runs_started"},
		{`SELECT id FROM runs WHERE key = 'k' ORDER BY started_at DESC, rowid DESC LIMIT 20`, "runs_key_started"},
		{`SELECT id FROM runs WHERE status = 'running' AND node = 'n'`, "runs_running"},
		// Reap: every running row, whatever its node.
		{`SELECT id, node, boot_id FROM runs WHERE status = 'running'`, "runs_running"},
	} {
		p := strings.Join(queryPlan(t, s, c.q), "; ")
		if !strings.Contains(p, c.index) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\nplan: %s\nwant index %s and no sort", c.q, p, c.index)
		}
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	// 64 Stores (64 connections, as 64 cronlock processes would have) on one new file:
	// creation, migration and writes all race.
	path := filepath.Join(t.TempDir(), "history.db")
	const g, n = 64, 10
	if err := writeRuns(path, "g", g, n); err != nil {
		t.Fatalf("concurrent writers: %v", err)
	}
	if got := countRuns(t, path, "WHERE status = 'succeeded'"); got != g*n {
		t.Fatalf("%d finished rows, want %d", got, g*n)
	}
	// Every tail written, then the newest tailsPerKey of the key kept (prune.go).
	if got, want := countRuns(t, path, "JOIN run_output ON run_id = id"), min(g*n, tailsPerKey); got != want {
		t.Fatalf("%d output tails, want %d", got, want)
	}
}

func TestConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	const procs, g, n = 8, 8, 10
	var cmds []*os.Process
	var waits []func() error
	for i := 0; i < procs; i++ {
		cmd := helperCmd(t, "write", "HELPER_PATH="+path, "HELPER_KEY=p", fmt.Sprint("HELPER_G=", g), fmt.Sprint("HELPER_N=", n))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd.Process)
		waits = append(waits, cmd.Wait)
	}
	for i, w := range waits {
		if err := w(); err != nil {
			t.Errorf("writer process %d: %v", i, err)
		}
	}
	if got := countRuns(t, path, "WHERE status = 'succeeded'"); got != procs*g*n {
		t.Fatalf("%d finished rows, want %d", got, procs*g*n)
	}
	if got := countRuns(t, path, "WHERE status = 'running'"); got != 0 {
		t.Fatalf("%d rows left running", got)
	}
	_ = cmds
}

func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	random := make([]byte, 64<<10)
	rand.Read(random)
	// A valid header followed by garbage: SQLite gets past the magic string.
	header := append([]byte("SQLite format 3\x00"), random[16:]...)
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"random bytes", random},
		{"sqlite header then garbage", header},
		{"text file", []byte("not a database at all\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".db")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path)
			if err == nil {
				// Some corruption shows only on first use.
				err = s.Insert(&Run{Key: "k", Status: runstatus.Skipped})
				s.Close()
			}
			if err == nil {
				t.Fatal("no error for a corrupt file")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, "CRONLOCK_HISTORY") || !strings.Contains(msg, "corrupt") {
				t.Errorf("message does not name the file, say corrupt and give the fix: %s", msg)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, c.data) {
				t.Error("the corrupt file was modified")
			}
		})
	}
}

func TestUnwritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plainfile")
	os.WriteFile(file, nil, 0o600)
	_, err := Open(filepath.Join(file, "history.db")) // a folder that is a file
	if err == nil || !strings.Contains(err.Error(), "CRONLOCK_HISTORY") || !strings.Contains(err.Error(), file) {
		t.Errorf("folder is a file: %v", err)
	}

	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o755)
	os.Chmod(ro, 0o555)
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	if os.Geteuid() == 0 {
		otherUserOpen(t, filepath.Join(ro, "history.db"))
		return
	}
	_, err = Open(filepath.Join(ro, "history.db"))
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "CRONLOCK_HISTORY") {
		t.Errorf("read-only folder: %v", err)
	}
	// An existing database in a read-only folder: WAL needs to create -wal and -shm.
	os.Chmod(ro, 0o755)
	s, err := Open(filepath.Join(ro, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.Chmod(ro, 0o555)
	s, err = Open(filepath.Join(ro, "history.db"))
	if err == nil {
		err = s.Insert(&Run{Key: "k", Status: runstatus.Skipped})
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "CRONLOCK_HISTORY") {
		t.Errorf("database in a read-only folder: %v", err)
	}
}

func TestNetworkFilesystemRefused(t *testing.T) {
	saved := statfsType
	t.Cleanup(func() { statfsType = saved })
	for _, c := range []struct {
		magic int64
		name  string
	}{{nfsMagic, "NFS"}, {cifsMagic, "CIFS"}, {smb2Magic, "SMB"}, {smbMagic, "SMB"}} {
		statfsType = func(string) (int64, error) { return c.magic, nil }
		_, err := Open(filepath.Join(t.TempDir(), "h.db"))
		if err == nil || !strings.Contains(err.Error(), "CRONLOCK_HISTORY") || !strings.Contains(err.Error(), c.name) {
			t.Errorf("magic %#x: %v", c.magic, err)
		}
	}
	statfsType = func(string) (int64, error) { return 0xEF53, nil } // ext4
	if s, err := Open(filepath.Join(t.TempDir(), "h.db")); err != nil {
		t.Errorf("ext4 refused: %v", err)
	} else {
		s.Close()
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("HOME", "/somewhere/else")
	t.Setenv("XDG_STATE_HOME", "/somewhere/else/state")
	p, err := DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if p != "/var/lib/cronlock/history.db" {
			t.Errorf("root: %s", p)
		}
		return // otherUserOpen checks a non-root user
	}
	if strings.HasPrefix(p, "/somewhere") || !strings.HasSuffix(p, "/.local/state/cronlock/history.db") {
		t.Errorf("DefaultPath = %s: must come from the password database, not $HOME", p)
	}
}

func TestJSONShape(t *testing.T) {
	start := time.Date(2025, 6, 1, 9, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	cases := []struct {
		name string
		run  Run
		want map[string]any
	}{
		{"finished", Run{ID: "id1", Key: "k", Node: "n", PID: 7, Command: []string{"a", "b c"},
			Status: runstatus.Failed, ExitCode: intp(2), Exit: intp(125), StartedAt: start, FinishedAt: start.Add(1234 * time.Millisecond),
			ScheduledFor: start.Add(-30 * time.Second),
			FencingToken: 1 << 60, Backend: "local /run/cronlock", Error: "e", Output: []byte("x")},
			map[string]any{"id": "id1", "key": "k", "node": "n", "pid": 7.0, "command": []any{"a", "b c"},
				"status": "failed", "exit_code": 2.0, "signal": nil, "started_at": "2025-06-01T07:00:00Z",
				"finished_at": "2025-06-01T07:00:01.234Z", "duration_ms": 1234.0, "error": "e", "holder": "",
				"fencing_token": float64(1 << 60), "backend": "local /run/cronlock", "attempt": 1.0, "exit": 125.0,
				"scheduled_for": "2025-06-01T06:59:30Z", "run_id": "id1", "try": 1.0, "tick_attempt": 1.0, "takeover_of": nil}},
		{"running", Run{ID: "id2", Key: "k", Node: "n", PID: 8, Status: runstatus.Running, StartedAt: start},
			map[string]any{"id": "id2", "key": "k", "node": "n", "pid": 8.0, "command": []any{},
				"status": "running", "exit_code": nil, "signal": nil, "started_at": "2025-06-01T07:00:00Z",
				"finished_at": nil, "duration_ms": nil, "error": "", "holder": "", "fencing_token": 0.0, "backend": "", "attempt": 1.0, "exit": nil, "scheduled_for": nil,
				"run_id": "id2", "try": 1.0, "tick_attempt": nil, "takeover_of": nil}},
		{"signalled", Run{ID: "id3", Status: runstatus.Interrupted, Signal: "SIGTERM", StartedAt: start, FinishedAt: start},
			map[string]any{"id": "id3", "key": "", "node": "", "pid": 0.0, "command": []any{},
				"status": "interrupted", "exit_code": nil, "signal": "SIGTERM", "started_at": "2025-06-01T07:00:00Z",
				"finished_at": "2025-06-01T07:00:00Z", "duration_ms": 0.0, "error": "", "holder": "", "fencing_token": 0.0, "backend": "", "attempt": 1.0, "exit": nil, "scheduled_for": nil,
				"run_id": "id3", "try": 1.0, "tick_attempt": nil, "takeover_of": nil}},
		{"a later try", Run{ID: "id5", RunID: "id4", Try: 2, Status: runstatus.Succeeded, StartedAt: start, FinishedAt: start},
			map[string]any{"id": "id5", "key": "", "node": "", "pid": 0.0, "command": []any{},
				"status": "succeeded", "exit_code": nil, "signal": nil, "started_at": "2025-06-01T07:00:00Z",
				"finished_at": "2025-06-01T07:00:00Z", "duration_ms": 0.0, "error": "", "holder": "", "fencing_token": 0.0, "backend": "", "attempt": 1.0, "exit": nil, "scheduled_for": nil,
				"run_id": "id4", "try": 2.0, "tick_attempt": nil, "takeover_of": nil}},
	}
	for _, c := range cases {
		b, err := c.run.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := jsonUnmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}

// TestWALStaysBounded: processes that each write one run and exit without closing, as
// short cronlock runs do, keep the WAL near walCheckpointAt pages instead of growing it
// run after run (the automatic checkpoint alone never resets a WAL that only such
// processes write), and lose no run.
func TestWALStaysBounded(t *testing.T) {
	_, path := openTemp(t)
	const ckpt, runs = 20, 60
	largest := int64(0)
	for i := 0; i < runs; i++ {
		cmd := helperCmd(t, "runrow", "HELPER_PATH="+path, "HELPER_CLOSE=0", "HELPER_SHORT=1",
			"HELPER_CKPT="+strconv.Itoa(ckpt))
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	// Past the threshold by at most one run's pages (a run writes about 6).
	if limit := int64(ckpt+20) * (pageSize + 24); largest > limit {
		t.Errorf("the WAL grew to %d bytes over %d short runs; want at most %d (%d pages + one run)",
			largest, runs, limit, ckpt)
	}
	if n := countRuns(t, path, "WHERE status = 'succeeded'"); n != runs {
		t.Errorf("%d runs recorded, want %d", n, runs)
	}
}
