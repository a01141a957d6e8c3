package cmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

// TestLockFolderDeletedUnderRun: rm -rf of the lock folder under a running job lets no
// second run start, and costs the running job nothing: it ends well, and the runs after
// its next renewal still see it as the holder.
func TestLockFolderDeletedUnderRun(t *testing.T) {
	c := newCLI(t, "")
	first, errb, release := c.startHolding([]string{"run", "-k", "rm", "--ttl", "3s"})
	if err := os.RemoveAll(filepath.Join(c.dir, "locks")); err != nil {
		t.Fatal(err)
	}
	second := func(what string) {
		t.Helper()
		code, out, errs := c.run("run", "-k", "rm", "--conflict-exit-code", "99", "--", "echo", "second ran")
		if code != 99 || out != "" {
			t.Fatalf("a run %s: exit %d, stdout %q, stderr %q; want 99, skipped", what, code, out, errs)
		}
	}
	second("just after rm -rf of the lock folder")
	// The holder's renewal (every ttl/3 = 1s) puts its file back: the skipped run left an
	// empty one, which gets the holder's record.
	lockFile := filepath.Join(c.dir, "locks", "rm.lock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(lockFile); strings.Contains(string(b), `"pid":`+strconv.Itoa(first.Process.Pid)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder did not put its lock file back")
		}
	}
	second("after the holder's renewal")
	release()
	if code := c.exitCode(first.Wait()); code != 0 {
		t.Fatalf("the holder exited %d (stderr %q), want 0: its lock was whole", code, errb.String())
	}
	var statuses []string
	for _, r := range c.history("rm") {
		statuses = append(statuses, r.Status)
	}
	want := []string{runstatus.Skipped, runstatus.Skipped, runstatus.Succeeded}
	if strings.Join(statuses, ",") != strings.Join(want, ",") {
		t.Fatalf("history %v, want %v (newest first)", statuses, want)
	}
}
