package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run whose history cannot be opened has no row: its exit code says what happened.
// Its per-run file must not outlive it either, or the next history (the user moves the
// corrupt file aside, as cronlock advises) records it abandoned, "killed or crashed",
// and check says CRITICAL about a run that succeeded.
func TestHistoryUnusableLeavesNoClaim(t *testing.T) {
	c := newCLI(t, "")
	path := filepath.Join(c.dir, "history.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database; ", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	// One run ends before its running row is due, one after (StartRowDelay).
	// The warning comes once an hour: only the first run says it.
	for i, job := range [][]string{{"true"}, {"sleep", "1.2"}} {
		code, _, errs := c.run(append([]string{"run", "--key", "bad", "--"}, job...)...)
		if code != 0 || i == 0 && !strings.Contains(errs, "corrupt") {
			t.Fatalf("run %v: exit %d, stderr %q; want 0 and a line about the corrupt history", job, code, errs)
		}
	}
	entries, _ := os.ReadDir(path + "-runs")
	for _, e := range entries {
		t.Errorf("per-run file %s left behind by a finished run", e.Name())
	}
	if err := os.Rename(path, path+".bad"); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.history("bad") {
		t.Errorf("the new history has a row %s %q for a run that was never recorded", r.Status, r.Error)
	}
}
