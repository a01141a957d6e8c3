package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
)

// statsFixture writes a history for stats and returns its path: "billing" with four
// successes of 1–4 s, a failure and two skips; a key with control bytes that failed; a
// key whose only run was interrupted.
func statsFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2025, 6, 1, 7, 0, 0, 0, time.UTC)
	i := 0
	add := func(key, status string, d time.Duration) {
		at := start.Add(time.Duration(i) * time.Minute)
		i++
		r := history.Run{Key: key, Node: "web-1", Command: []string{"job"}, Status: status,
			StartedAt: at, FinishedAt: at.Add(d)}
		if err := s.Insert(&r); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []time.Duration{1, 2, 3, 4} {
		add("billing", runstatus.Succeeded, d*time.Second)
	}
	add("billing", runstatus.Failed, 500*time.Millisecond) // 07:04
	add("billing", runstatus.Skipped, 0)
	add("billing", runstatus.Skipped, 0)
	add("evil\x1b[31m", runstatus.Timeout, 90*time.Second)
	add("report", runstatus.Interrupted, 2*time.Second)
	return path
}

func runStats(t *testing.T, o historyStatsOptions) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	o.Stdout, o.Stderr = &out, &errb
	if o.Loc == nil {
		o.Loc = time.FixedZone("CEST", 2*3600)
	}
	err := historyStatsRun(&o)
	return out.String(), errb.String(), err
}

func TestHistoryStatsTable(t *testing.T) {
	path := statsFixture(t)
	out, _, err := runStats(t, historyStatsOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header and 3 keys:\n%s", len(lines), out)
	}
	for _, want := range []string{
		`^KEY +RUNS +OK +FAILED +SKIPPED +RATE +P50 +P95 +MAX +LAST SUCCESS +LAST FAILURE +STREAK$`,
		`^billing +7 +4 +1 +2 +80\.0% +2s +4s +4s +2025-06-01 09:03:00 CEST +2025-06-01 09:04:00 CEST +1$`,
		`^evil\\x1b\[31m +1 +0 +1 +0 +0\.0% +1m30s +1m30s +1m30s +- +2025-06-01 09:07:00 CEST +1$`,
		`^report +1 +0 +0 +0 +0\.0% +2s +2s +2s +- +- +0$`,
	} {
		if !slices.ContainsFunc(lines, regexp.MustCompile(want).MatchString) {
			t.Errorf("no line matches %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a raw escape byte reached the table:\n%q", out)
	}

	utc, _, _ := runStats(t, historyStatsOptions{Path: path, UTC: true, Filter: history.StatsFilter{Key: "billing"}})
	if !strings.Contains(utc, "2025-06-01 07:03:00 UTC") || strings.Count(utc, "\n") != 2 {
		t.Errorf("--utc --key billing:\n%s", utc)
	}
	none, errs, err := runStats(t, historyStatsOptions{Path: path, Filter: history.StatsFilter{Key: "nope"}})
	if err != nil || none != "no runs match\n" || errs != "" {
		t.Errorf("unknown key: %q %q %v", none, errs, err)
	}
}

func TestHistoryStatsSparkline(t *testing.T) {
	path := statsFixture(t)
	plain, _, _ := runStats(t, historyStatsOptions{Path: path, Spark: true, Filter: history.StatsFilter{Key: "billing"}})
	// Oldest first, right-aligned in 20 cells: bars of 1–4 s, the failure, two skips.
	if !strings.HasSuffix(plain, strings.Repeat(" ", 13)+"▂▄▆█x··\n") || !strings.Contains(plain, "RECENT") {
		t.Errorf("sparkline without colour:\n%q", plain)
	}
	if strings.Contains(plain, "\x1b") {
		t.Errorf("colour codes without colour:\n%q", plain)
	}
	colored, _, _ := runStats(t, historyStatsOptions{Path: path, Spark: true, Color: true})
	if !strings.Contains(colored, "\x1b[32m█") || !strings.Contains(colored, "\x1b[31m▁") || !strings.Contains(colored, "\x1b[33m·") {
		t.Errorf("sparkline with colour:\n%q", colored)
	}
	if strings.Contains(colored, "evil\x1b") || !strings.Contains(colored, `evil\x1b[31m`) {
		t.Errorf("the key's escape byte reached the terminal:\n%q", colored)
	}
}

func TestHistoryStatsJSON(t *testing.T) {
	path := statsFixture(t)
	out, _, err := runStats(t, historyStatsOptions{Path: path, JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	var fields []string
	for k := range m {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	want := []string{"failed", "failure_streak", "failure_streak_capped", "interrupted", "key",
		"last_failure", "last_success", "max_ms", "newest_started_at", "oldest_started_at", "p50_ms",
		"p95_ms", "running", "runs", "skipped", "succeeded", "success_rate", "suspended", "truncated"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
	wantVals := map[string]any{"key": "billing", "runs": 7.0, "succeeded": 4.0, "failed": 1.0, "skipped": 2.0,
		"interrupted": 0.0, "running": 0.0, "success_rate": 0.8, "p50_ms": 2000.0, "p95_ms": 4000.0, "max_ms": 4000.0,
		"last_success": "2025-06-01T07:03:00Z", "last_failure": "2025-06-01T07:04:00Z", "failure_streak": 1.0,
		"failure_streak_capped": false, "oldest_started_at": "2025-06-01T07:00:00Z",
		"newest_started_at": "2025-06-01T07:06:00Z", "truncated": false}
	for k, v := range wantVals {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	if !strings.Contains(lines[1], `"key":"evil\u001b[31m"`) || !strings.Contains(lines[1], `"last_success":null`) {
		t.Errorf("second line: %s", lines[1])
	}
	// --last 2: the window is the two skips, which have neither a rate nor durations.
	out, _, _ = runStats(t, historyStatsOptions{Path: path, JSON: true, Filter: history.StatsFilter{Key: "billing", Last: 2}})
	for _, f := range []string{`"runs":2`, `"success_rate":null`, `"p50_ms":null`, `"truncated":true`, `"last_success":"2025-06-01T07:03:00Z"`} {
		if !strings.Contains(out, f) {
			t.Errorf("--last 2: no %s in %s", f, out)
		}
	}
	out, errs, err := runStats(t, historyStatsOptions{Path: path, JSON: true, Filter: history.StatsFilter{Key: "nope"}})
	if err != nil || out != "" || !strings.Contains(errs, "no runs match") {
		t.Errorf("--json of nothing: stdout %q stderr %q, %v", out, errs, err)
	}
}

// TestHistoryStatsBinary runs the built cronlock on the fixture: what a script gets
// through a pipe (no sparkline, no colour), and exit 125 for bad --since and --until.
func TestHistoryStatsBinary(t *testing.T) {
	path := statsFixture(t)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		c := exec.Command(cronlockBin, args...)
		c.Env = append(inheritedEnv(), "CRONLOCK_HISTORY="+path, "CRONLOCK_CONFIG="+os.DevNull,
			"CRONLOCK_NODE=statsnode", "TZ=UTC")
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	out, errs, code := run("history", "stats")
	if code != 0 || errs != "" || strings.Count(out, "\n") != 4 || !strings.Contains(out, "billing") {
		t.Errorf("history stats: exit %d stderr %q\n%s", code, errs, out)
	}
	if strings.Contains(out, "RECENT") || strings.ContainsAny(out, "\x1b▁█·") {
		t.Errorf("sparkline or escape codes through a pipe:\n%q", out)
	}
	out, _, code = run("history", "stats", "--json", "--key", "billing", "--since", "2025-06-01T07:02", "--until", "2025-06-01 07:05")
	if code != 0 || !strings.Contains(out, `"runs":3,"succeeded":2,"failed":1`) || strings.Count(out, "\n") != 1 {
		t.Errorf("stats --since --until: exit %d\n%s", code, out)
	}
	out, _, code = run("history", "--json", "--since", "2025-06-01T07:02:00Z", "--until", "2025-06-01 07:05", "--utc")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("history --since --until: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"history", "--since", "yesterday"},
		{"history", "--until", "-3h"},
		{"history", "stats", "--since", "2025-06-31"},
		{"history", "stats", "--since", "1h", "--until", "2h"},
		{"history", "stats", "--last", "-1"},
	} {
		out, errs, code := run(args...)
		if code != 125 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "cronlock: --") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 125 and one cronlock: line", args, code, out, errs)
		}
	}
}
