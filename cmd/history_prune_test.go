package cmd

import (
	"bytes"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
)

// pruneHistory writes runs of key "k" and "gone" at the given ages (before the real
// now: the binary under test reads the real clock) and returns the history's path.
func pruneHistory(t *testing.T, path string, rows map[string]struct {
	status string
	age    time.Duration
}) {
	t.Helper()
	s, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, r := range rows {
		key := "k"
		if strings.HasPrefix(id, "gone") {
			key = "gone"
		}
		started := time.Now().Add(-r.age)
		if err := s.Insert(&history.Run{ID: id, Key: key, Node: "clinode", Status: r.status,
			StartedAt: started, FinishedAt: started.Add(time.Second), Output: []byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
}

func runIDs(t *testing.T, path string) []string {
	t.Helper()
	s, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.List(history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		if r.Key != "fresh" {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestRetentionByRun: cronlock run deletes runs older than the retention once a day,
// keeping the last success and the last failure of each key; the setting changes the
// age, and off keeps everything.
func TestRetentionByRun(t *testing.T) {
	const day = 24 * time.Hour
	type row = struct {
		status string
		age    time.Duration
	}
	fixture := map[string]row{
		"ok-old":    {runstatus.Succeeded, 100 * day},
		"ok-new":    {runstatus.Succeeded, 1 * day},
		"fail-old":  {runstatus.Failed, 120 * day}, // the last failure of k
		"skip-old":  {runstatus.Skipped, 91 * day},
		"skip-40":   {runstatus.Skipped, 40 * day},
		"gone-skip": {runstatus.Skipped, 200 * day},
	}
	for _, c := range []struct {
		setting string
		left    []string
	}{
		{"", []string{"fail-old", "ok-new", "skip-40"}},
		{"90d", []string{"fail-old", "ok-new", "skip-40"}},
		{"30d", []string{"fail-old", "ok-new"}},
		{"off", []string{"fail-old", "gone-skip", "ok-new", "ok-old", "skip-40", "skip-old"}},
	} {
		t.Run("retention="+c.setting, func(t *testing.T) {
			cl := newCLI(t, "")
			cl.env = append(cl.env, "CRONLOCK_HISTORY_RETENTION="+c.setting)
			path := filepath.Join(cl.dir, "history.db")
			pruneHistory(t, path, fixture)
			code, _, errs := cl.run("run", "-k", "fresh", "--", "true")
			if code != 0 || errs != "" {
				t.Fatalf("run: exit %d, stderr %q", code, errs)
			}
			if got := runIDs(t, path); !reflect.DeepEqual(got, c.left) {
				t.Fatalf("runs left %v, want %v", got, c.left)
			}
			// The pass is claimed for a day: runs made old since are left to the next one.
			pruneHistory(t, path, map[string]row{"skip-late": {runstatus.Skipped, 365 * day}})
			if code, _, errs := cl.run("run", "-k", "fresh", "--", "true"); code != 0 || errs != "" {
				t.Fatalf("second run: exit %d, stderr %q", code, errs)
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(c.left), "skip-late")))
			if got := runIDs(t, path); !reflect.DeepEqual(got, want) {
				t.Fatalf("after a second run the same day: runs left %v, want %v", got, want)
			}
		})
	}
}

func TestHistoryPruneRun(t *testing.T) {
	path := historyFixture(t) // billing ×2, report ×2 on 2025-06-01, and a live run
	o := &historyPruneOptions{Path: path, OlderThan: time.Hour,
		Now: time.Date(2025, 6, 2, 7, 0, 0, 0, time.UTC)}
	var out, errb bytes.Buffer
	o.Stdout, o.Stderr = &out, &errb
	o.DryRun = true
	if err := historyPruneRun(o); err != nil {
		t.Fatal(err)
	}
	// billing keeps its last success and failure; report's skip and interruption go.
	if want := "would remove 2 runs (and 0 output tails) from " + path + "\n"; out.String() != want {
		t.Fatalf("dry run said %q, want %q", out.String(), want)
	}
	out.Reset()
	o.DryRun = false
	if err := historyPruneRun(o); err != nil {
		t.Fatal(err)
	}
	if want := "removed 2 runs (and 0 output tails) from " + path + "\n"; out.String() != want {
		t.Fatalf("prune said %q, want %q", out.String(), want)
	}
	out.Reset()
	o.Path = filepath.Join(t.TempDir(), "none.db")
	if err := historyPruneRun(o); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "nothing to prune: no runs recorded yet in ") {
		t.Fatalf("missing file: %q", out.String())
	}
}
