package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// Sentinel and Cluster through the built binary: every lock path of a run, and what a
// failover does to a running job.

func TestSentinelCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	exerciseCLI(t, newCLI(t, d.URL()))
}

func TestClusterCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	exerciseCLI(t, newCLI(t, cl.URL()))
}

// TestMinReplicasShortfall: a lock no replica acknowledged is let go, the job never
// starts, and the run ends as an error with one line.
func TestMinReplicasShortfall(t *testing.T) {
	d := redistest.StartSentinel(t)
	c := newCLI(t, d.URL())
	d.Replica.Kill()
	marks := filepath.Join(c.dir, "marks")
	code, _, errs := c.run("run", "-k", "acked", "--min-replicas", "1", "--redis-timeout", "1s", "--", "sh", "-c", "echo ran > "+marks)
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "cronlock: only 0 of 1 replicas acknowledged the lock acked within ") {
		t.Fatalf("exit %d, stderr %q; want 125 and one line about the replicas", code, errs)
	}
	if _, err := os.Stat(marks); err == nil {
		t.Fatal("the job ran without an acknowledged lock")
	}
	if rows := c.history("acked"); len(rows) != 1 || rows[0].Status != runstatus.Error {
		t.Fatalf("rows %+v, want one error", rows)
	}
	// The lock was let go: a run without --min-replicas takes it at once.
	if code, _, errs := c.run("run", "-k", "acked", "--", "true"); code != 0 {
		t.Fatalf("a run after the shortfall: exit %d: %s", code, errs)
	}
	// The setting works from the environment too, and bad values are refused.
	c.env = append(c.env, "CRONLOCK_REDIS_MIN_REPLICAS=1")
	if code, _, errs := c.run("run", "-k", "acked", "--redis-timeout", "300ms", "--", "true"); code != 125 || !strings.Contains(errs, "only 0 of 1 replicas") {
		t.Fatalf("CRONLOCK_REDIS_MIN_REPLICAS=1: exit %d: %s", code, errs)
	}
	for _, bad := range []string{"-1", "101", "x"} {
		if code, _, errs := c.run("run", "-k", "acked", "--min-replicas", bad, "--", "true"); code != 125 || strings.Count(errs, "\n") != 1 {
			t.Errorf("--min-replicas %s: exit %d: %q", bad, code, errs)
		}
	}
}

// TestHAURLsRefusedClearly: malformed Sentinel and Cluster URLs end with 125 and one
// line, never showing the password.
func TestHAURLsRefusedClearly(t *testing.T) {
	c := newCLI(t, "")
	for url, want := range map[string]string{
		"redis-sentinel://:hunter2@127.0.0.1:1":       "it names no master",
		"redis-sentinel://:hunter2@127.0.0.1:1,/m":    "empty entry",
		"redis-cluster://:hunter2@127.0.0.1:1/3":      "database 0 only",
		"rediss-cluster://:hunter2@127.0.0.1:1":       "TLS is not supported",
		"redis-sentinel://:hunter2@[::1]:1,h:2/m/x/y": "more than /MASTER/db",
	} {
		code, _, errs := c.run("run", "-k", "x", "--redis", url, "--", "true")
		if code != 125 || strings.Count(errs, "\n") != 2 || strings.Contains(errs, "hunter2") || !strings.Contains(errs, want) {
			// Two lines: the URL's error, and the warning that --redis shows a password in ps.
			t.Errorf("%s: exit %d, stderr %q", url, code, errs)
		}
	}
}

// TestSentinelUnknownMaster: a master name no Sentinel monitors is one clear line, 125.
func TestSentinelUnknownMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	c := newCLI(t, strings.TrimSuffix(d.URL(), d.Name)+"nosuch")
	code, _, errs := c.run("run", "-k", "x", "--redis-timeout", "1s", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `monitors a master named "nosuch"`) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestSentinelsUnreachable: Sentinels that all refuse are one line naming each, 125.
func TestSentinelsUnreachable(t *testing.T) {
	c := newCLI(t, fmt.Sprintf("redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/m", redistest.FreePort(t), redistest.FreePort(t)))
	code, _, errs := c.run("run", "-k", "x", "--redis-timeout", "300ms", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || strings.Count(errs, "connection refused") != 2 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}
