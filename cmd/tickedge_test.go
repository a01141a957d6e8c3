package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of the edges of once per tick (SPEC §10): the backend's clock decides the tick
// and the start deadline, a data loss is said, ticks nobody claimed are recorded, and a
// schedule that changes or flips is marked. Hosts are simulated as in tick_test.go.

// dailyAt is a daily schedule (UTC) whose tick is t's minute: its ticks are a day apart,
// so a skew of minutes passes a --max-skew of minutes.
func dailyAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d * * *", t.Minute(), t.Hour())
}

// TestTickBackendClockEarly: a host whose clock is ahead (within --max-skew) and past
// tick + --start-deadline on its own clock, before the tick has come on Redis's clock,
// must not call the tick missed (leaving it to nobody): it waits for the tick on Redis's
// clock and runs the job then; the on-time host is skipped.
func TestTickBackendClockEarly(t *testing.T) {
	hosts := newFleet(t, "redis", "fast", "ontime")
	marks := filepath.Join(t.TempDir(), "marks")
	now := time.Now()
	tick := now.Truncate(time.Minute).Add(time.Minute)
	if tick.Sub(now) < 2*time.Second {
		tick = tick.Add(time.Minute)
	}
	args := []string{"run", "-k", "billing", "--schedule", dailyAt(tick), "--tz", "UTC", "--max-skew", "2m",
		"--start-deadline", "20s", "--", "sh", "-c", "date +%s.%N >> " + marks}
	// The fast host's clock says tick + 21 s: past its deadline, while Redis's is before
	// the tick.
	off := tick.Add(21 * time.Second).Sub(time.Now())
	code, _, errs := hosts[0].at(off, args...)
	if code != 0 || errs != "" {
		t.Fatalf("fast host: exit %d, stderr %q; want 0 and silence", code, errs)
	}
	checkRow(t, hosts[0], "succeeded", "", tick)
	b, _ := os.ReadFile(marks)
	ran, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("the job did not run once (marks %q)", b)
	}
	if at := time.Unix(0, int64(ran*1e9)); at.Before(tick) {
		t.Errorf("the job ran at %v, %v before its tick %v", at, tick.Sub(at), tick)
	}
	// Cron on the host with a good clock fires now, just after the tick.
	if code, _, errs := hosts[1].at(0, args...); code != 0 || errs != "" {
		t.Fatalf("on-time host: exit %d, stderr %q", code, errs)
	}
	checkRow(t, hosts[1], "skipped", "fast (run ", tick)
	if b, _ := os.ReadFile(marks); strings.Count(string(b), "\n") != 1 {
		t.Errorf("the job ran %d times; want once", strings.Count(string(b), "\n"))
	}
}

// TestTickBackendClockMissed: a host whose clock is behind judges itself within its
// --start-deadline; Redis's clock says the tick is past it: the run is missed, and the
// job does not run.
func TestTickBackendClockMissed(t *testing.T) {
	hosts := newFleet(t, "redis", "slow")
	marks := filepath.Join(t.TempDir(), "marks")
	now := time.Now()
	tick := now.Truncate(time.Minute)
	if now.Sub(tick) < 30*time.Second {
		tick = tick.Add(-time.Minute)
	}
	off := tick.Add(5 * time.Second).Sub(time.Now()) // the host's clock: 5 s after the tick
	code, _, errs := hosts[0].at(off, "run", "-k", "billing", "--schedule", dailyAt(tick), "--tz", "UTC", "--max-skew", "2m",
		"--start-deadline", "20s", "--", "sh", "-c", "echo ran >> "+marks)
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "missed the") {
		t.Fatalf("slow host: exit %d, stderr %q; want 0 and one line saying the tick was missed", code, errs)
	}
	checkRow(t, hosts[0], "missed", "", tick)
	if _, err := os.Stat(marks); err == nil {
		t.Error("a run past its deadline on Redis's clock ran its job")
	}
}
