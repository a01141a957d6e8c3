package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/runstatus"
)

// TestJitterSleepsWithinBound: each run sleeps a random time in [0, --jitter) before it
// asks for the lock, and the sleeps differ.
func TestJitterSleepsWithinBound(t *testing.T) {
	c := newCLI(t, "")
	seen := map[time.Duration]bool{}
	for range 5 {
		code, _, errs := c.run("run", "-v", "-k", "jit", "--jitter", "300ms", "--", "true")
		m := sleptRe.FindStringSubmatch(errs)
		if code != 0 || m == nil {
			t.Fatalf("exit %d, stderr %q: want 0 and the jitter reported", code, errs)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil || d < 0 || d >= 300*time.Millisecond {
			t.Fatalf("slept %q (%v): want a time in [0, 300ms)", m[1], err)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("five runs slept %v: the jitter is not random", seen)
	}
	// The setting works as well as the flag, with days as every duration.
	c.env = append(c.env, "CRONLOCK_JITTER=1ms")
	if code, _, errs := c.run("run", "-v", "-k", "jit", "--", "true"); code != 0 || !strings.Contains(errs, "(--jitter 1ms)") {
		t.Fatalf("CRONLOCK_JITTER: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := c.run("run", "-k", "jit", "--schedule", "* * * * *", "--jitter", "1d", "--start-deadline", "5m", "--", "true"); code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--start-deadline") {
		t.Fatalf("jitter not shorter than the deadline: exit %d, stderr %q; want 125 and one line", code, errs)
	}
}

// TestJitterInterrupted: a stop signal during the sleep ends the run as interrupted, and
// the job never starts.
func TestJitterInterrupted(t *testing.T) {
	c := newCLI(t, "")
	marker := filepath.Join(c.dir, "ran")
	cmd, sc := c.startUntil(sleptRe.MatchString, "run", "-v", "-k", "jitstop", "--jitter", "1h", "--", "touch", marker)
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	if code := c.exitCode(cmd.Wait()); code != 128+15 {
		t.Fatalf("exit %d, want 143", code)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the job ran although the run was stopped during its jitter")
	}
	rows := c.history("jitstop")
	if len(rows) != 1 || rows[0].Status != runstatus.Interrupted || rows[0].Signal == nil || *rows[0].Signal != "SIGTERM" {
		t.Fatalf("history %+v, want one interrupted run (SIGTERM)", rows)
	}
}

// TestJitterKeepsTheStartTick: the tick is the one of the clock at start-up, even when the
// sleep runs into the next minute. The run starts 50 ms before a minute ends and sleeps up
// to 3 s: a tick taken after the sleep would almost always be the next minute.
func TestJitterKeepsTheStartTick(t *testing.T) {
	h := newFleet(t, "local", "vmA")[0]
	now := time.Now()
	off := now.Truncate(time.Minute).Add(time.Minute - 50*time.Millisecond).Sub(now)
	code, _, errs := h.at(off, "run", "-k", "billing", "--schedule", "* * * * *", "--jitter", "3s", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	_, out, _ := h.run("history", "--json", "-k", "billing")
	var row struct {
		Status       string    `json:"status"`
		StartedAt    time.Time `json:"started_at"`
		ScheduledFor time.Time `json:"scheduled_for"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &row); err != nil {
		t.Fatalf("history %q: %v", out, err)
	}
	if row.Status != runstatus.Succeeded || !row.ScheduledFor.Equal(row.StartedAt.Truncate(time.Minute)) {
		t.Fatalf("row %+v: want succeeded, scheduled for the minute it started in", row)
	}
}
