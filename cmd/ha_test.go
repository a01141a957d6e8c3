package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/redistest"
)

// Sentinel and Cluster through the built binary: every lock path of a run, and what a
// failover does to a running job.

// exerciseCLI runs the lock paths of the binary on c's Redis URL: exclusion among
// concurrent runs, a --wait hand-off, status, unlock, a --schedule tick claimed once,
// and the fleet's record.
func exerciseCLI(t *testing.T, c *cli) {
	concurrentRunsOneKey(t, c)
	marks := filepath.Join(c.dir, "marks")

	// A waiter takes over when the holder ends.
	holder := c.command("run", "-k", "handoff", "--ttl", "2s", "--", "sh", "-c", "echo a >> "+marks+"; sleep 1; echo b >> "+marks)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the holder's job to start", func() bool {
		b, _ := os.ReadFile(marks)
		return strings.Contains(string(b), "a\n")
	})
	code, _, errs := c.run("run", "-k", "handoff", "--wait", "20s", "--", "sh", "-c", "echo c >> "+marks)
	if err := holder.Wait(); err != nil || code != 0 {
		t.Fatalf("hand-off: holder %v, waiter exit %d: %s", err, code, errs)
	}
	if b, _ := os.ReadFile(marks); !strings.HasSuffix(string(b), "a\nb\nc\n") {
		t.Fatalf("job marks %q: the waiter did not run after the holder", b)
	}

	// status sees a held lock; unlock --force removes it.
	holder = c.command("run", "-k", "held", "--ttl", "5s", "--", "sleep", "30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	waitUntil(t, 10*time.Second, "the lock to show in status", func() bool {
		_, out, _ := c.run("status", "--json")
		return strings.Contains(out, `"key":"held"`)
	})
	if code, out, errs := c.run("unlock", "-k", "held", "--force"); code != 0 || !strings.Contains(out+errs, "clinode") {
		t.Fatalf("unlock --force: exit %d: %s%s", code, out, errs)
	}
	holder.Wait() // the holder's next renewal finds the lock gone
	if rows := c.history("held"); len(rows) != 1 || rows[0].Status != history.StatusLockLost {
		t.Fatalf("the unlocked run's rows: %+v, want one lock_lost", rows)
	}

	// A tick runs once; the fleet's record has it.
	for i, want := range []int{0, 99} {
		if code, _, errs := c.run("run", "-k", "ticked", "--schedule", "@hourly", "--conflict-exit-code", "99", "--", "true"); code != want {
			t.Fatalf("tick run %d: exit %d, want %d: %s", i+1, code, want, errs)
		}
	}
	code, out, errs := c.run("history", "--fleet", "--json")
	if code != 0 || strings.Count(out, `"key":"ticked"`) != 1 || strings.Count(out, `"key":"handoff"`) != 2 {
		t.Fatalf("history --fleet: exit %d: %s%s", code, out, errs)
	}
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
	if rows := c.history("acked"); len(rows) != 1 || rows[0].Status != history.StatusError {
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
