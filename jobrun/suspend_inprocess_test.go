package jobrun_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/jobrun"
	"cronlock/lockrun"
	"cronlock/runstatus"
)

// TestRunSuspended: a run whose Acquire finds the key suspended ends with the conflict
// exit code and a suspended row that says who, since, until and why; its job does not
// start, nothing is released, and it says so only with -v.
func TestRunSuspended(t *testing.T) {
	s := &lockrun.Suspension{By: "ops@box", Since: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC),
		Until: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), Reason: "db upgrade"}
	for _, verbose := range []bool{false, true} {
		dir := t.TempDir()
		b := &backend{acquire: func(_ context.Context, req lockrun.Request) error {
			return &lockrun.SuspendedError{Key: req.Key, Suspension: s}
		}}
		ranFile := filepath.Join(dir, "ran")
		r := run(t, dir, b, []string{"touch", ranFile}, func(o *jobrun.Options) { o.ConflictExitCode, o.Verbose = 4, verbose })
		row := r.only(t)
		if r.code != 4 || row.Status != runstatus.Suspended || intOr(row.Exit) != 4 || exists(ranFile) || b.releases != 0 {
			t.Fatalf("-v %v: exit %d, row %s/%d, job ran %v, %d releases; want 4, suspended/4, no job, no release",
				verbose, r.code, row.Status, intOr(row.Exit), exists(ranFile), b.releases)
		}
		for _, want := range []string{"ops@box", "2026-12-02T06:00:00Z", "2026-12-02T08:00:00Z", `"db upgrade"`} {
			if !strings.Contains(row.Error, want) || verbose && !strings.Contains(r.stderr, want) {
				t.Errorf("-v %v: row error %q, stderr %q; want %q in both", verbose, row.Error, r.stderr, want)
			}
		}
		if !verbose && r.stderr != "" {
			t.Errorf("without -v: stderr %q; want silence", r.stderr)
		}
	}
}
