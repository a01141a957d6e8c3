package history

import (
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cronlock/runstatus"
)

const day = 24 * time.Hour

// pruneRow is one run of a fixture: its id says its key and age.
type pruneRow struct {
	id, key, status string
	age             time.Duration // started this long before now
	output          bool
}

// pruneFixture holds, per key, runs of every kind at known ages:
//
//	a: running 200d (kept: running), succeeded 100d, failed 95d, succeeded 92d,
//	   timeout 91d (last failure), succeeded 10d, skipped 5d, succeeded 1d (last success)
//	b: succeeded 120d and error 110d: the last success and the last failure, however old
//	c: skipped 100d, skipped 50d
var pruneFixture = []pruneRow{
	{"a-run200", "a", runstatus.Running, 200 * day, false},
	{"a-ok100", "a", runstatus.Succeeded, 100 * day, true},
	{"a-fail95", "a", runstatus.Failed, 95 * day, true},
	{"a-ok92", "a", runstatus.Succeeded, 92 * day, false},
	{"a-tmo91", "a", runstatus.Timeout, 91 * day, true},
	{"a-ok10", "a", runstatus.Succeeded, 10 * day, true},
	{"a-skip5", "a", runstatus.Skipped, 5 * day, false},
	{"a-ok1", "a", runstatus.Succeeded, 1 * day, true},
	{"b-ok120", "b", runstatus.Succeeded, 120 * day, true},
	{"b-err110", "b", runstatus.Error, 110 * day, false},
	{"c-skip100", "c", runstatus.Skipped, 100 * day, false},
	{"c-skip50", "c", runstatus.Skipped, 50 * day, false},
}

func fillPrune(t *testing.T, s *Store, rows []pruneRow) {
	t.Helper()
	for _, r := range rows {
		run := &Run{ID: r.id, Key: r.key, Node: "n", Status: r.status, StartedAt: now.Add(-r.age)}
		if r.output {
			run.Output = []byte("output of " + r.id)
		}
		var err error
		if r.status == runstatus.Running {
			err = s.Start(run)
		} else {
			run.FinishedAt = run.StartedAt.Add(time.Second)
			err = s.Insert(run)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// ids returns the ids of the rows of q (a query on runs or run_output), sorted.
func ids(t *testing.T, s *Store, q string) []string {
	t.Helper()
	got, err := queryStrings(s.db, q)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

func without(all []pruneRow, gone ...string) []string {
	var out []string
	for _, r := range all {
		if !slices.Contains(gone, r.id) {
			out = append(out, r.id)
		}
	}
	slices.Sort(out)
	return out
}

func TestPrune(t *testing.T) {
	for _, c := range []struct {
		name string
		o    PruneOptions
		gone []string // runs deleted
		tail int      // output tails deleted with them
	}{
		{"older than 90 days", PruneOptions{OlderThan: 90 * day},
			[]string{"a-ok100", "a-fail95", "a-ok92", "c-skip100"}, 2},
		{"older than 1 hour", PruneOptions{OlderThan: time.Hour},
			[]string{"a-ok100", "a-fail95", "a-ok92", "a-ok10", "a-skip5", "c-skip100", "c-skip50"}, 3},
		{"keep 2", PruneOptions{Keep: 2},
			[]string{"a-ok100", "a-fail95", "a-ok92", "a-ok10"}, 3},
		{"keep 1", PruneOptions{Keep: 1},
			[]string{"a-ok100", "a-fail95", "a-ok92", "a-ok10", "a-skip5", "c-skip100"}, 3},
		// Either limit deletes: c-skip100 is among the newest 2 of c but old; a-ok10 is
		// young but not among the newest 2 of a.
		{"both, age decides", PruneOptions{OlderThan: 60 * day, Keep: 4},
			[]string{"a-ok100", "a-fail95", "a-ok92", "c-skip100"}, 2},
		{"both, count decides", PruneOptions{OlderThan: 60 * day, Keep: 2},
			[]string{"a-ok100", "a-fail95", "a-ok92", "a-ok10", "c-skip100"}, 3},
		{"nothing old enough", PruneOptions{OlderThan: 365 * day}, nil, 0},
		{"no limit", PruneOptions{}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, dry := range []bool{true, false} {
				s, _ := openTemp(t)
				fillPrune(t, s, pruneFixture)
				o := c.o
				o.Now, o.DryRun = now, dry
				res, err := s.Prune(o)
				if err != nil {
					t.Fatal(err)
				}
				if want := (PruneResult{Runs: len(c.gone), Outputs: c.tail}); res != want {
					t.Errorf("dry run %v: result %+v, want %+v", dry, res, want)
				}
				want := without(pruneFixture, c.gone...)
				if dry {
					want = without(pruneFixture)
				}
				if got := ids(t, s, `SELECT id FROM runs`); !reflect.DeepEqual(got, want) {
					t.Errorf("dry run %v: runs left %v, want %v", dry, got, want)
				}
				// The tails went with their runs, and only theirs.
				var tails []string
				for _, r := range pruneFixture {
					if r.output && slices.Contains(want, r.id) {
						tails = append(tails, r.id)
					}
				}
				slices.Sort(tails)
				if got := ids(t, s, `SELECT run_id FROM run_output`); !reflect.DeepEqual(got, tails) {
					t.Errorf("dry run %v: tails left %v, want %v", dry, got, tails)
				}
			}
		})
	}
}

func TestPruneNeverRemovesLastSuccessAndFailure(t *testing.T) {
	s, _ := openTemp(t)
	// Every failing status counts as a failure; interrupted and skipped do not.
	var rows []pruneRow
	for i, st := range []string{runstatus.Failed, runstatus.Timeout, runstatus.LockLost, runstatus.Error, runstatus.Abandoned} {
		key := "k-" + strings.ReplaceAll(st, "_", "")
		rows = append(rows,
			pruneRow{key + "-ok", key, runstatus.Succeeded, 300 * day, false},
			pruneRow{key + "-bad", key, st, time.Duration(200+i) * day, true},
			pruneRow{key + "-int", key, runstatus.Interrupted, 100 * day, false},
			pruneRow{key + "-skip", key, runstatus.Skipped, 50 * day, false})
	}
	fillPrune(t, s, rows)
	res, err := s.Prune(PruneOptions{OlderThan: time.Hour, Keep: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, r := range rows {
		if r.status == runstatus.Interrupted || r.status == runstatus.Skipped {
			gone = append(gone, r.id)
		}
	}
	if got, want := ids(t, s, `SELECT id FROM runs`), without(rows, gone...); !reflect.DeepEqual(got, want) {
		t.Fatalf("runs left %v, want %v (%+v)", got, want, res)
	}
}

func TestPruneBatches(t *testing.T) {
	saved := pruneBatch
	pruneBatch = 3
	t.Cleanup(func() { pruneBatch = saved })
	s, _ := openTemp(t)
	var rows []pruneRow
	for i := range 11 {
		rows = append(rows, pruneRow{fmt.Sprintf("r%02d", i), "k", runstatus.Succeeded, time.Duration(100+i) * day, i%2 == 0})
	}
	fillPrune(t, s, rows)
	res, err := s.Prune(PruneOptions{OlderThan: day, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// r00 is the newest: the last success.
	if want := (PruneResult{Runs: 10, Outputs: 5}); res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	if got := ids(t, s, `SELECT id FROM runs`); !reflect.DeepEqual(got, []string{"r00"}) {
		t.Fatalf("runs left %v, want [r00]", got)
	}
}

func TestPruneRefusesNegativeLimits(t *testing.T) {
	s, _ := openTemp(t)
	for _, o := range []PruneOptions{{OlderThan: -day}, {Keep: -1}} {
		if _, err := s.Prune(o); err == nil {
			t.Errorf("Prune(%+v) = nil error, want one", o)
		}
	}
}

// tails returns the ids of key's runs that still have an output tail, and the number
// of its runs.
func tails(t *testing.T, s *Store, key string) (map[string]bool, int) {
	t.Helper()
	got := map[string]bool{}
	rows, err := s.db.Query(`SELECT run_id FROM run_output o JOIN runs r ON r.id = o.run_id WHERE r.key = ?`, key)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		got[id] = true
	}
	rows.Close()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM runs WHERE key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return got, n
}

func TestPruneTailCapPerKey(t *testing.T) {
	s, _ := openTemp(t)
	const extra = 5
	id := func(i int) string { return fmt.Sprintf("chatty-%03d", i) }
	for i := range tailsPerKey + extra {
		// Runs without output in between neither count nor trim.
		if err := s.Insert(&Run{ID: fmt.Sprintf("silent-%03d", i), Key: "chatty", Status: runstatus.Skipped,
			StartedAt: now.Add(time.Duration(i)*time.Minute + time.Second)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Insert(&Run{ID: id(i), Key: "chatty", Status: runstatus.Succeeded,
			StartedAt: now.Add(time.Duration(i) * time.Minute), Output: []byte("chat")}); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if err := s.Insert(&Run{ID: fmt.Sprintf("quiet-%d", i), Key: "quiet", Status: runstatus.Succeeded,
				StartedAt: now.Add(-time.Hour), Output: []byte("hush")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, n := tails(t, s, "chatty")
	if len(got) != tailsPerKey || n != 2*(tailsPerKey+extra) {
		t.Fatalf("chatty: %d tails on %d runs, want %d tails on %d runs (rows stay)", len(got), n, tailsPerKey, 2*(tailsPerKey+extra))
	}
	for i := range tailsPerKey + extra {
		if want := i >= extra; got[id(i)] != want {
			t.Errorf("run %s has a tail: %v, want %v (the newest %d keep theirs)", id(i), got[id(i)], want, tailsPerKey)
		}
	}
	if got, _ := tails(t, s, "quiet"); len(got) != 3 {
		t.Errorf("quiet: %d tails, want 3: another key's tails do not count", len(got))
	}
	// A late run older than the newest tails loses its own at once.
	if err := s.Insert(&Run{ID: "late", Key: "chatty", Status: runstatus.Failed, StartedAt: now.Add(-day), Output: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tails(t, s, "chatty"); got["late"] || len(got) != tailsPerKey {
		t.Errorf("after a late run: %d tails, the late one kept: %v", len(got), got["late"])
	}
	// Finish (not only Insert) trims too.
	r := &Run{ID: "last", Key: "chatty", StartedAt: now.Add(24 * time.Hour)}
	if err := s.Start(r); err != nil {
		t.Fatal(err)
	}
	r.Status, r.Output = runstatus.Succeeded, []byte("y")
	if err := s.Finish(r); err != nil {
		t.Fatal(err)
	}
	if got, _ := tails(t, s, "chatty"); !got["last"] || got[id(extra)] || len(got) != tailsPerKey {
		t.Errorf("after Finish: %d tails; newest kept %v, oldest dropped %v", len(got), got["last"], !got[id(extra)])
	}
}

func TestPruneQueryPlans(t *testing.T) {
	s, _ := openTemp(t)
	for _, c := range []struct {
		q, want string
	}{
		// Per run with output: only that key's tails, in index order.
		{`SELECT rowid FROM run_output WHERE run_key = 'k' ORDER BY run_started_at DESC, rowid DESC LIMIT -1 OFFSET 100`, "run_output_key_started"},
		{`SELECT rowid FROM runs WHERE key = 'k' AND status IN (` + failedStatusList + `) ORDER BY started_at DESC, rowid DESC LIMIT 1`, "runs_key_started"},
		{`SELECT rowid, status, started_at FROM runs WHERE key = 'k' AND started_at < 5 ORDER BY started_at DESC, rowid DESC`, "runs_key_started"},
		{`SELECT DISTINCT key FROM runs INDEXED BY runs_started WHERE started_at < 5`, "runs_started"},
		{`DELETE FROM runs WHERE rowid IN (SELECT value FROM json_each('[1,2]')) AND status != 'running'`, "INTEGER PRIMARY KEY"},
	} {
		p := strings.Join(queryPlan(t, s, c.q), "; ")
		if !strings.Contains(p, c.want) || strings.Contains(p, "ORDER BY") && strings.Contains(p, "TEMP B-TREE") || strings.Contains(p, "SCAN runs") {
			t.Errorf("%s\nplan: %s\nwant %s, no full scan of runs and no sort", c.q, p, c.want)
		}
	}
}

func TestRetentionOnceADay(t *testing.T) {
	s, _ := openTemp(t)
	add := func(id string, started time.Time) {
		t.Helper()
		if err := s.Insert(&Run{ID: id, Key: "k", Status: runstatus.Succeeded, StartedAt: started}); err != nil {
			t.Fatal(err)
		}
	}
	add("old", now.Add(-100*day))
	add("new", now.Add(-day))
	for _, step := range []struct {
		name string
		at   time.Time
		add  string // a run that is past the retention at this step
		ran  bool
		runs int
	}{
		{"first pass", now, "", true, 1},
		{"an hour later", now.Add(time.Hour), "old2", false, 0},
		{"23h59m later", now.Add(day - time.Minute), "", false, 0},
		{"a day later", now.Add(day), "", true, 1},
		{"a moment before the stamp (a concurrent run)", now.Add(day - time.Millisecond), "old3", false, 0},
		{"clock set back two days", now.Add(-day), "", true, 1},
	} {
		if step.add != "" {
			add(step.add, step.at.Add(-95*day))
		}
		ran, res, err := s.Retain(DefaultRetention, step.at)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if ran != step.ran || res.Runs != step.runs {
			t.Fatalf("%s: ran %v removing %d runs, want ran %v removing %d", step.name, ran, res.Runs, step.ran, step.runs)
		}
	}
	if got := ids(t, s, `SELECT id FROM runs`); !reflect.DeepEqual(got, []string{"new"}) {
		t.Fatalf("runs left %v, want [new]", got)
	}
}

// TestRetentionBacklog: a pass deletes at most retainLimit runs and then lets the next
// run go on, until the backlog is gone; only then is the day claimed.
func TestRetentionBacklog(t *testing.T) {
	savedBatch, savedLimit := pruneBatch, retainLimit
	pruneBatch, retainLimit = 2, 5
	t.Cleanup(func() { pruneBatch, retainLimit = savedBatch, savedLimit })
	s, _ := openTemp(t)
	for i := range 13 {
		if err := s.Insert(&Run{ID: fmt.Sprintf("old%02d", i), Key: fmt.Sprintf("k%d", i%3),
			Status: runstatus.Skipped, StartedAt: now.Add(-100*day - time.Duration(i)*time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []struct {
		ran  bool
		runs int
		more bool
	}{{true, 5, true}, {true, 5, true}, {true, 3, false}, {false, 0, false}} {
		at := now.Add(time.Duration(i) * time.Minute)
		ran, res, err := s.Retain(DefaultRetention, at)
		if err != nil {
			t.Fatal(err)
		}
		if ran != want.ran || res.Runs != want.runs || res.More != want.more {
			t.Fatalf("run %d: ran %v, %+v; want ran %v, %d runs, more %v", i, ran, res, want.ran, want.runs, want.more)
		}
	}
}

func TestRetentionOff(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Insert(&Run{ID: "old", Key: "k", Status: runstatus.Skipped, StartedAt: now.Add(-1000 * day)}); err != nil {
		t.Fatal(err)
	}
	for _, age := range []time.Duration{0, -1} {
		if ran, _, err := s.Retain(age, now); ran || err != nil {
			t.Fatalf("Retain(%v) ran %v, %v; want nothing done", age, ran, err)
		}
	}
	var n int
	s.db.QueryRow(`SELECT count(*) FROM meta`).Scan(&n)
	if n != 0 {
		t.Fatalf("Retain off claimed a pass: %d meta rows", n)
	}
	if got := ids(t, s, `SELECT id FROM runs`); len(got) != 1 {
		t.Fatalf("runs left %v", got)
	}
}

// TestRetentionClaimedOnce: of many processes (here Stores, each its own connection)
// that finish at the same moment, exactly one prunes.
func TestRetentionClaimedOnce(t *testing.T) {
	s, path := openTemp(t)
	for i := range 20 {
		if err := s.Insert(&Run{ID: fmt.Sprintf("old%d", i), Key: "k", Status: runstatus.Skipped, StartedAt: now.Add(-100 * day)}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 12
	var stores []*Store
	for range n {
		st, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores = append(stores, st)
	}
	var wg sync.WaitGroup
	ran := make(chan PruneResult, n)
	start := make(chan struct{})
	for _, st := range stores {
		wg.Go(func() {
			<-start
			did, res, err := st.Retain(DefaultRetention, now)
			if err != nil {
				t.Error(err)
			}
			if did {
				ran <- res
			}
		})
	}
	close(start)
	wg.Wait()
	close(ran)
	var passes []PruneResult
	for r := range ran {
		passes = append(passes, r)
	}
	if len(passes) != 1 || passes[0].Runs != 20 {
		t.Fatalf("passes %+v, want exactly one that removed 20 runs", passes)
	}
}

// TestMigrationKeysOldTails: a file written by schema v1 gets the key and start of its
// existing tails, so that the tail cap counts them.
func TestMigrationKeysOldTails(t *testing.T) {
	path := t.TempDir() + "/v1.db"
	db, err := sql.Open("sqlite3", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], `PRAGMA user_version = 1`,
		`INSERT INTO runs (id, key, node, pid, command, status, started_at) VALUES ('r1', 'k1', 'n', 1, x'', 'failed', 42)`,
		`INSERT INTO run_output (run_id, tail) VALUES ('r1', x'6869')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var key string
	var started int64
	if err := s.db.QueryRow(`SELECT run_key, run_started_at FROM run_output WHERE run_id = 'r1'`).Scan(&key, &started); err != nil {
		t.Fatal(err)
	}
	if key != "k1" || started != 42 {
		t.Fatalf("migrated tail: key %q started %d, want k1 42", key, started)
	}
	if r, err := s.Get("r1"); err != nil || string(r.Output) != "hi" {
		t.Fatalf("Get after migration: %q, %v", r.Output, err)
	}
}

func TestFormatAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90 * 24 * time.Hour: "90d",
		24 * time.Hour:      "1d",
		36 * time.Hour:      "36h0m0s",
		90 * time.Minute:    "1h30m0s",
		0:                   "0s",
	} {
		if got := FormatAge(d); got != want {
			t.Errorf("FormatAge(%v) = %q, want %q", d, got, want)
		}
	}
}
