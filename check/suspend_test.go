package check

import (
	"strings"
	"testing"
	"time"
)

// TestSuspended: a key suspended now is OK with the suspension in the line, whatever is
// due; WARNING past MaxSuspend; a tick that came while suspended is satisfied after the
// resume, and its suspended runs are not failures.
func TestSuspended(t *testing.T) {
	s := sched(t, "0 9 * * *")
	susp := &Suspension{By: "ops@box", Since: at("2026-12-01T08:00:00Z"), Until: at("2026-12-02T08:00:00Z"), Reason: "db upgrade"}
	runs := append(five(), ended("failed", "2026-11-30T09:00:00Z")) // a failure, then no run of the due tick
	in := Input{Key: "k", Schedule: s, Grace: 5 * time.Minute, Now: at("2026-12-01T10:00:00Z"), Runs: runs}
	if r := Evaluate(in); r.State != Critical {
		t.Fatalf("not suspended: %s; want CRITICAL", r.Line())
	}
	in.Suspension, in.MaxSuspend = susp, 7*24*time.Hour
	r := Evaluate(in)
	if r.State != OK || !strings.Contains(r.Line(), "suspended by ops@box since 2026-12-01T08:00Z until 2026-12-02T08:00Z (db upgrade)") {
		t.Errorf("suspended: %s; want OK with who, since, until and why", r.Line())
	}
	in.MaxSuspend = time.Hour
	if r := Evaluate(in); r.State != Warning || !strings.Contains(r.Line(), "--max-suspend") {
		t.Errorf("suspended 2h, --max-suspend 1h: %s; want WARNING", r.Line())
	}

	// Resumed: the 09:00 tick came while suspended (its runs say so).
	in.Suspension = nil
	in.Runs = append(five(), ended("suspended", "2026-12-01T09:00:00Z"), ended("suspended", "2026-12-01T09:00:00Z"))
	r = Evaluate(in)
	if r.State != OK || !strings.Contains(r.Line(), "while the key was suspended") || r.Failures != 0 {
		t.Errorf("after resume: %s (failures %d); want OK, the tick satisfied", r.Line(), r.Failures)
	}
	// The next tick after the resume needs its success again.
	in.Now = at("2026-12-02T10:00:00Z")
	if r := Evaluate(in); r.State != Critical {
		t.Errorf("the tick after resume without a run: %s; want CRITICAL", r.Line())
	}
}
