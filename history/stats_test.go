package history

import (
	"database/sql"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

// statsBase is the start time of the first run of every stats test.
var statsBase = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

// spec is one run to insert: its status, the minute it starts and how long it took.
type spec struct {
	status string
	minute int
	dur    time.Duration
	node   string // "" = "n1"
}

// insertSpecs records runs of key as specs say. Running and abandoned runs get no end.
func insertSpecs(t *testing.T, s *Store, key string, specs ...spec) {
	t.Helper()
	for i, sp := range specs {
		r := &Run{ID: fmt.Sprintf("%x-%d-%d", key, sp.minute, i), Key: key, Node: sp.node, Status: sp.status,
			StartedAt: at(sp.minute)}
		if r.Node == "" {
			r.Node = "n1"
		}
		if sp.status != runstatus.Running && sp.status != runstatus.Abandoned {
			r.FinishedAt = r.StartedAt.Add(sp.dur)
		}
		_, err := s.db.Exec(`INSERT INTO runs (`+runColumns+`) VALUES `+runValues, rowArgs(r)...)
		if err != nil {
			t.Fatal(err)
		}
	}
}

func oneStats(t *testing.T, s *Store, f StatsFilter) KeyStats {
	t.Helper()
	got, err := s.Stats(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Stats(%+v) = %d keys, want 1: %+v", f, len(got), got)
	}
	return got[0]
}

func TestStatsNumbers(t *testing.T) {
	sec := time.Second
	var twenty []spec
	for i := 1; i <= 20; i++ {
		twenty = append(twenty, spec{status: runstatus.Succeeded, minute: i, dur: time.Duration(i) * sec})
	}
	for _, c := range []struct {
		name  string
		runs  []spec
		f     StatsFilter
		check func(t *testing.T, k KeyStats)
	}{
		{"rate leaves skipped out", []spec{
			{runstatus.Succeeded, 1, sec, ""}, {runstatus.Succeeded, 2, sec, ""}, {runstatus.Failed, 3, sec, ""},
			{runstatus.Skipped, 4, 0, ""}, {runstatus.Skipped, 5, 0, ""},
		}, StatsFilter{}, func(t *testing.T, k KeyStats) {
			want := KeyStats{Runs: 5, Succeeded: 2, Failed: 1, Skipped: 2}
			if k.Runs != want.Runs || k.Succeeded != want.Succeeded || k.Failed != want.Failed || k.Skipped != want.Skipped {
				t.Errorf("counts %+v, want %+v", k, want)
			}
			if r, ok := k.SuccessRate(); !ok || math.Abs(r-2.0/3) > 1e-9 {
				t.Errorf("rate %v %v, want 2/3", r, ok)
			}
		}},
		{"running is left out, interrupted stays in", []spec{
			{runstatus.Succeeded, 1, sec, ""}, {runstatus.Interrupted, 2, sec, ""}, {runstatus.Running, 3, 0, ""},
		}, StatsFilter{}, func(t *testing.T, k KeyStats) {
			if k.Running != 1 || k.Interrupted != 1 || k.Failed != 0 {
				t.Errorf("running %d interrupted %d failed %d", k.Running, k.Interrupted, k.Failed)
			}
			if r, ok := k.SuccessRate(); !ok || r != 0.5 {
				t.Errorf("rate %v %v, want 1/2", r, ok)
			}
		}},
		{"every failure status", []spec{
			{runstatus.Failed, 1, sec, ""}, {runstatus.Timeout, 2, sec, ""}, {runstatus.LockLost, 3, sec, ""},
			{runstatus.Error, 4, 0, ""}, {runstatus.Abandoned, 5, 0, ""},
		}, StatsFilter{}, func(t *testing.T, k KeyStats) {
			if k.Failed != 5 || k.FailureStreak != 5 || k.StreakCapped || !k.LastSuccess.IsZero() || !k.LastFailure.Equal(at(5)) {
				t.Errorf("failed %d streak %d capped %v last ok %v last failure %v", k.Failed, k.FailureStreak, k.StreakCapped, k.LastSuccess, k.LastFailure)
			}
			if r, ok := k.SuccessRate(); !ok || r != 0 {
				t.Errorf("rate %v %v, want 0", r, ok)
			}
		}},
		{"only skips: no rate, no durations", []spec{{runstatus.Skipped, 1, 5 * sec, ""}}, StatsFilter{},
			func(t *testing.T, k KeyStats) {
				if _, ok := k.SuccessRate(); ok || k.Timed != 0 || k.Max != 0 {
					t.Errorf("rate ok %v timed %d max %v, want no rate and no durations", ok, k.Timed, k.Max)
				}
			}},
		{"nearest-rank percentiles of finished non-skipped runs",
			append(append([]spec{}, twenty...),
				spec{runstatus.Skipped, 30, 100 * sec, ""}, spec{runstatus.Running, 31, 0, ""}, spec{runstatus.Abandoned, 32, 0, ""}),
			StatsFilter{}, func(t *testing.T, k KeyStats) {
				if k.Timed != 20 || k.P50 != 10*sec || k.P95 != 19*sec || k.Max != 20*sec {
					t.Errorf("timed %d p50 %v p95 %v max %v, want 20 10s 19s 20s", k.Timed, k.P50, k.P95, k.Max)
				}
			}},
		{"one run: every percentile is that run", []spec{{runstatus.Failed, 1, 1500 * time.Millisecond, ""}},
			StatsFilter{}, func(t *testing.T, k KeyStats) {
				if k.P50 != 1500*time.Millisecond || k.P95 != k.P50 || k.Max != k.P50 {
					t.Errorf("p50 %v p95 %v max %v", k.P50, k.P95, k.Max)
				}
			}},
		{"streak passes over skipped, running and interrupted", []spec{
			{runstatus.Failed, 1, sec, ""}, {runstatus.Succeeded, 2, sec, ""}, {runstatus.Failed, 3, sec, ""},
			{runstatus.Skipped, 4, 0, ""}, {runstatus.Interrupted, 5, sec, ""}, {runstatus.Timeout, 6, sec, ""},
			{runstatus.Running, 7, 0, ""},
		}, StatsFilter{}, func(t *testing.T, k KeyStats) {
			if k.FailureStreak != 2 || k.StreakCapped {
				t.Errorf("streak %d capped %v, want 2 not capped", k.FailureStreak, k.StreakCapped)
			}
			if !k.LastSuccess.Equal(at(2)) || !k.LastFailure.Equal(at(6)) {
				t.Errorf("last success %v, last failure %v", k.LastSuccess, k.LastFailure)
			}
		}},
		{"a success last ends the streak", []spec{{runstatus.Failed, 1, sec, ""}, {runstatus.Succeeded, 2, sec, ""}},
			StatsFilter{}, func(t *testing.T, k KeyStats) {
				if k.FailureStreak != 0 {
					t.Errorf("streak %d, want 0", k.FailureStreak)
				}
			}},
		{"window: newest Last runs; last success found beyond it", []spec{
			{runstatus.Succeeded, 1, sec, ""}, {runstatus.Failed, 2, sec, ""}, {runstatus.Failed, 3, sec, ""},
			{runstatus.Failed, 4, sec, ""}, {runstatus.Failed, 5, sec, ""},
		}, StatsFilter{Last: 3}, func(t *testing.T, k KeyStats) {
			if k.Runs != 3 || !k.Truncated || !k.Oldest.Equal(at(3)) || !k.Newest.Equal(at(5)) {
				t.Errorf("runs %d truncated %v oldest %v newest %v", k.Runs, k.Truncated, k.Oldest, k.Newest)
			}
			if !k.LastSuccess.Equal(at(1)) {
				t.Errorf("last success %v, want %v (outside the window)", k.LastSuccess, at(1))
			}
			if k.FailureStreak != 3 || !k.StreakCapped {
				t.Errorf("streak %d capped %v, want 3 capped", k.FailureStreak, k.StreakCapped)
			}
		}},
		{"window of every run", []spec{{runstatus.Succeeded, 1, sec, ""}, {runstatus.Failed, 2, sec, ""}},
			StatsFilter{Last: -1}, func(t *testing.T, k KeyStats) {
				if k.Runs != 2 || k.Truncated {
					t.Errorf("runs %d truncated %v", k.Runs, k.Truncated)
				}
			}},
		{"since and until bound the window and the last times", []spec{
			{runstatus.Succeeded, 1, sec, ""}, {runstatus.Failed, 2, sec, ""}, {runstatus.Succeeded, 3, sec, ""},
			{runstatus.Failed, 4, sec, ""}, {runstatus.Succeeded, 5, sec, ""}, {runstatus.Failed, 6, sec, ""},
		}, StatsFilter{Since: at(2), Until: at(5)}, func(t *testing.T, k KeyStats) {
			if k.Runs != 3 || !k.Oldest.Equal(at(2)) || !k.Newest.Equal(at(4)) || k.Truncated {
				t.Errorf("runs %d oldest %v newest %v truncated %v", k.Runs, k.Oldest, k.Newest, k.Truncated)
			}
			if !k.LastSuccess.Equal(at(3)) || !k.LastFailure.Equal(at(4)) {
				t.Errorf("last success %v last failure %v, want minutes 3 and 4", k.LastSuccess, k.LastFailure)
			}
		}},
		{"node", []spec{{runstatus.Succeeded, 1, sec, "n1"}, {runstatus.Failed, 2, sec, "n2"}, {runstatus.Failed, 3, sec, "n1"}},
			StatsFilter{Node: "n2"}, func(t *testing.T, k KeyStats) {
				if k.Runs != 1 || k.Failed != 1 || !k.LastSuccess.IsZero() || !k.LastFailure.Equal(at(2)) {
					t.Errorf("runs %d failed %d last ok %v last failure %v", k.Runs, k.Failed, k.LastSuccess, k.LastFailure)
				}
			}},
		{"recent: newest 20, oldest first, with their durations",
			append(append([]spec{{runstatus.Failed, 0, sec, ""}}, twenty...), spec{runstatus.Running, 40, 0, ""}),
			StatsFilter{}, func(t *testing.T, k KeyStats) {
				if len(k.Recent) != RecentRuns {
					t.Fatalf("%d recent runs, want %d", len(k.Recent), RecentRuns)
				}
				first, last := k.Recent[0], k.Recent[len(k.Recent)-1]
				if first != (Outcome{runstatus.Succeeded, 2 * sec, true}) || last != (Outcome{runstatus.Running, 0, false}) {
					t.Errorf("recent starts %+v ends %+v", first, last)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := openTemp(t)
			insertSpecs(t, s, "job", c.runs...)
			insertSpecs(t, s, "other", spec{runstatus.Succeeded, 3, time.Hour, ""}) // must not leak in
			f := c.f
			f.Key = "job"
			k := oneStats(t, s, f)
			if k.Key != "job" {
				t.Errorf("key %q", k.Key)
			}
			c.check(t, k)
		})
	}
}

func TestStatsEmpty(t *testing.T) {
	s, _ := openTemp(t)
	if got, err := s.Stats(StatsFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %+v, %v", got, err)
	}
	insertSpecs(t, s, "job", spec{runstatus.Succeeded, 1, time.Second, ""})
	for _, f := range []StatsFilter{{Key: "none"}, {Key: "job", Since: at(2)}, {Key: "job", Node: "elsewhere"}} {
		if got, err := s.Stats(f); err != nil || len(got) != 0 {
			t.Errorf("Stats(%+v) = %+v, %v; want no keys", f, got, err)
		}
	}
}

// TestStatsKeys checks that every key is found by the skip-scan, in byte order, and that
// keys without a matching run are left out.
func TestStatsKeys(t *testing.T) {
	s, _ := openTemp(t)
	keys := []string{"b", "a", "a/b", "z\x1b[31m", "é", "a:b"}
	for i, k := range keys {
		insertSpecs(t, s, k, spec{runstatus.Succeeded, i, time.Second, ""}, spec{runstatus.Failed, 10 + i, time.Second, ""})
	}
	got, err := s.Stats(StatsFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range got {
		names = append(names, k.Key)
		if k.Runs != 2 {
			t.Errorf("key %q: %d runs, want 2", k.Key, k.Runs)
		}
	}
	if want := "a a/b a:b b z\x1b[31m é"; strings.Join(names, " ") != want {
		t.Errorf("keys %q, want %q", strings.Join(names, " "), want)
	}
	got, err = s.Stats(StatsFilter{Since: at(3)}) // only the failures of keys 3.. and every key's failure
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Errorf("--since: %d keys, want %d", len(got), len(keys))
	}
	got, err = s.Stats(StatsFilter{Until: at(2)}) // only "b" (minute 0) and "a" (minute 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "a" || got[1].Key != "b" {
		t.Errorf("--until: %+v, want keys a and b", got)
	}
}

// TestStatsQueryPlans pins that every query of Stats reads an index range (SEARCH), never
// the whole table or a whole index (SCAN), and never sorts: the cost of stats must not
// grow with the number of rows in the file.
func TestStatsQueryPlans(t *testing.T) {
	s, _ := openTemp(t)
	insertSpecs(t, s, "job", spec{runstatus.Succeeded, 1, time.Second, ""}, spec{runstatus.Failed, 2, time.Second, "n2"})
	s.db.Exec("ANALYZE") // the planner must choose well with statistics too
	type query struct {
		name string
		q    string
		args []any
	}
	qs := []query{{"keys", statsKeysQuery, nil}}
	for _, f := range []StatsFilter{{}, {Node: "n2"}, {Since: at(1), Until: at(3)}} {
		for _, sts := range [][]string{runstatus.All, {runstatus.Succeeded}, runstatus.Failures} {
			q, args := newestQuery(sts, f)
			args = append(args, sql.Named("key", "job"), sql.Named("lim", 10))
			qs = append(qs, query{fmt.Sprintf("newest %v %+v", sts, f), q, args})
		}
	}
	for _, c := range qs {
		plan := queryPlan(t, s, c.q, c.args...)
		if len(plan) == 0 {
			t.Fatalf("%s: no plan", c.name)
		}
		for _, line := range plan {
			if strings.Contains(line, "TEMP B-TREE") || strings.Contains(line, "runs") && !strings.HasPrefix(line, "SEARCH runs USING") {
				t.Errorf("%s: %q reads too much\nplan: %s", c.name, line, strings.Join(plan, "; "))
			}
		}
		// Without --node, the window needs nothing but the index.
		if !strings.Contains(c.name, "Node:n2") && strings.Contains(c.name, "newest") {
			for _, line := range plan {
				if strings.HasPrefix(line, "SEARCH runs") && !strings.Contains(line, "COVERING INDEX runs_key_status_started") {
					t.Errorf("%s: %q reads table rows\nplan: %s", c.name, line, strings.Join(plan, "; "))
				}
			}
		}
	}
}

func TestListSinceUntil(t *testing.T) {
	s, _ := openTemp(t)
	insertSpecs(t, s, "job", spec{runstatus.Succeeded, 1, 0, ""}, spec{runstatus.Succeeded, 2, 0, ""},
		spec{runstatus.Succeeded, 3, 0, ""}, spec{runstatus.Succeeded, 4, 0, ""})
	insertSpecs(t, s, "other", spec{runstatus.Failed, 2, 0, ""})
	for _, c := range []struct {
		f    Filter
		want int
	}{
		{Filter{Since: at(2)}, 4},
		{Filter{Until: at(2)}, 1},
		{Filter{Since: at(2), Until: at(4)}, 3},
		{Filter{Key: "job", Since: at(2), Until: at(4)}, 2},
		{Filter{Since: at(5)}, 0},
		{Filter{Since: at(2), Until: at(2)}, 0},
	} {
		runs, err := s.List(c.f)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != c.want {
			t.Errorf("List(since %v until %v key %q) = %d runs, want %d", c.f.Since, c.f.Until, c.f.Key, len(runs), c.want)
		}
		for _, r := range runs {
			if !c.f.Since.IsZero() && r.StartedAt.Before(c.f.Since) || !c.f.Until.IsZero() && !r.StartedAt.Before(c.f.Until) {
				t.Errorf("List(since %v until %v) returned a run of %v", c.f.Since, c.f.Until, r.StartedAt)
			}
		}
	}
}
