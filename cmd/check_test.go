package cmd

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

// Tests of `cronlock check` through the built binary, on the local backend.
// The clock is the test build's CRONLOCK_TEST_CLOCK_OFFSET, which check reads as run does.

// checkLine is the plugin's status line: state, key, summary, perfdata in the plugin format.
var checkLine = regexp.MustCompile(`^CRONLOCK (OK|WARNING|CRITICAL|UNKNOWN) - [^|\n]+( \| ([^'= ]+=(U|[0-9.]+)(s)?(;[0-9.]*){0,4} ?)+)?\n$`)

func TestCheckLocal(t *testing.T) {
	h := newFleet(t, "local", "vmA")[0]
	// Every minute, so that the test clock moves from tick to tick; the grace is 5m.
	sched := []string{"--schedule", "* * * * *"}
	if code, out := h.check(0, "--key", "billing"); code != 3 || !strings.Contains(out, "never recorded") && !strings.Contains(out, "no run of this key was ever recorded") {
		t.Fatalf("never-seen key: exit %d %q; want 3 UNKNOWN", code, out)
	}
	if code, _, errs := h.at(0, append(append([]string{"run", "--key", "billing"}, sched...), "--", "true")...); code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	// The schedule comes from the tick record the run left.
	if code, out := h.check(0, "--key", "billing"); code != 0 || !strings.HasPrefix(out, "CRONLOCK OK - billing: ") {
		t.Fatalf("after a success of the current tick: exit %d %q; want 0 OK", code, out)
	}
	// Ten minutes later the tick due (now - 5m) has no run: CRITICAL.
	if code, out := h.check(10*time.Minute, "--key", "billing"); code != 2 || !strings.Contains(out, "no successful run for the ") {
		t.Fatalf("tick + grace passed without a run: exit %d %q; want 2 CRITICAL", code, out)
	}
	// --schedule wins over the tick record: for @yearly, the success covers this year's tick.
	if code, out := h.check(10*time.Minute, "--key", "billing", "--schedule", "@yearly"); code != 0 || !strings.Contains(out, "-01-01 00:00 tick") {
		t.Fatalf("--schedule @yearly after this year's success: exit %d %q; want 0 OK", code, out)
	}
	// A run of a later tick that fails: CRITICAL, and failures counted.
	if code, _, _ := h.at(2*time.Minute, append(append([]string{"run", "--key", "billing"}, sched...), "--", "false")...); code != 1 {
		t.Fatalf("failing run exited %d", code)
	}
	code, out := h.check(2*time.Minute, "--key", "billing")
	if code != 2 || !strings.Contains(out, "ended failed") || !strings.Contains(out, "failures=1") {
		t.Fatalf("after a failure: exit %d %q; want 2 CRITICAL with failures=1", code, out)
	}
	// --json: one object with the same verdict.
	code, out = h.check(2*time.Minute, "--key", "billing", "--json")
	var j struct {
		State    string   `json:"state"`
		ExitCode int      `json:"exit_code"`
		Key      string   `json:"key"`
		Reasons  []string `json:"reasons"`
		Due      *string  `json:"due"`
		Failures int      `json:"failures"`
		Perfdata string   `json:"perfdata"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil || code != 2 || j.State != "CRITICAL" || j.ExitCode != 2 ||
		j.Key != "billing" || j.Due == nil || j.Failures != 1 || !strings.HasPrefix(j.Perfdata, "age=") || len(j.Reasons) == 0 {
		t.Fatalf("--json: exit %d %q (%v); want a CRITICAL object", code, out, err)
	}
}

func TestCheckBadInputIsUnknown(t *testing.T) {
	h := newFleet(t, "local", "vmA")[0]
	for _, args := range [][]string{
		{},
		{"--key", "bad key"},
		{"--key", "billing", "--nope"},
		{"--key", "billing", "--grace", "soon"},
		{"--key", "billing", "--max-age", "-1h"},
		{"--key", "billing", "--schedule", "61 * * * *"},
		{"--key", "billing", "extra"},
		{"--key", "billing", "--history", "relative.db"},
	} {
		code, out := h.check(0, args...)
		if code != 3 || !strings.HasPrefix(out, "CRONLOCK UNKNOWN - ") {
			t.Errorf("check %q: exit %d %q; want 3 with an UNKNOWN line", args, code, out)
		}
	}
}

// TestCheckFleet: on Redis, check answers for the fleet from any host — here a monitoring
// host that never ran the job and has no history of it — with the schedule from the
// Redis tick record; a failure on another host is CRITICAL; a real overlap is flagged;
// an unreachable Redis is UNKNOWN.
func TestCheckFleet(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB", "mon")
	a, b, mon := hosts[0], hosts[1], hosts[2]
	sched := []string{"--schedule", "* * * * *"}
	if code, out := mon.check(0, "--key", "billing"); code != 3 {
		t.Fatalf("never-seen key: exit %d %q; want 3 UNKNOWN", code, out)
	}
	if code, _, errs := a.at(0, append(append([]string{"run", "--key", "billing"}, sched...), "--", "true")...); code != 0 {
		t.Fatalf("vmA run: %d %s", code, errs)
	}
	if code, out := mon.check(0, "--key", "billing"); code != 0 || !strings.HasPrefix(out, "CRONLOCK OK - billing: ") {
		t.Fatalf("the monitoring host after vmA's success: exit %d %q; want 0 OK from the fleet's record", code, out)
	}
	if rows := mon.history("billing"); len(rows) != 0 {
		t.Fatalf("the monitoring host has local rows %+v: the test proves nothing", rows)
	}
	if code, out := mon.check(10*time.Minute, "--key", "billing"); code != 2 || !strings.Contains(out, "no successful run for the ") {
		t.Fatalf("ten minutes on: exit %d %q; want 2 CRITICAL", code, out)
	}
	if code, _, errs := b.at(2*time.Minute, append(append([]string{"run", "--key", "billing", "--max-skew", "0"}, sched...), "--", "false")...); code != 1 {
		t.Fatalf("vmB's failing run exited %d: %s", code, errs)
	}
	if code, out := mon.check(2*time.Minute, "--key", "billing"); code != 2 || !strings.Contains(out, "failures=1") {
		t.Fatalf("after vmB's failure: exit %d %q; want 2 CRITICAL with failures=1", code, out)
	}

	// A real overlap: the lock deleted under a run that may continue, a second host runs.
	ready := filepath.Join(a.dir, "ready")
	holder := a.command("run", "--key", "dup", "--on-lock-lost", "continue", "--ttl", "1s", "--",
		"sh", "-c", `touch "$0"; sleep 1.5`, ready)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, ready)
	key := envOf(a.env, "CRONLOCK_PREFIX") + "{dup}:lock"
	t.Cleanup(func() {
		for _, k := range []string{"fence", "runs", "ledger", "order", "days"} {
			redistest.Do(redistest.Addr(t), "DEL", envOf(a.env, "CRONLOCK_PREFIX")+"{dup}:"+k)
		}
	})
	if n, err := redistest.Do(redistest.Addr(t), "DEL", key); err != nil || n != "1" {
		t.Fatalf("deleting the lock: %q %v", n, err)
	}
	if code, _, errs := b.run("run", "--key", "dup", "--", "true"); code != 0 {
		t.Fatalf("vmB during the overlap: %d %s", code, errs)
	}
	holder.Wait()
	if code, out := mon.check(0, "--key", "dup", "--max-age", "1h"); code == 0 || !strings.Contains(strings.ToLower(out), "duplicate") {
		t.Fatalf("after an overlap: exit %d %q; want a verdict naming the duplicate", code, out)
	}

	// Redis down: UNKNOWN, exit 3.
	down := *mon.cli
	down.env = append(append([]string(nil), mon.env...), "CRONLOCK_REDIS_URL=redis://127.0.0.1:1/0", "CRONLOCK_REDIS_TIMEOUT=300ms")
	code, out, _ := down.run("check", "--key", "billing")
	if code != 3 || !strings.HasPrefix(out, "CRONLOCK UNKNOWN - ") {
		t.Fatalf("Redis down: exit %d %q; want 3 UNKNOWN", code, out)
	}
}

// A machine whose config sets CRONLOCK_TZ reads --schedule in that zone when it runs the
// job; check must read the same --schedule in the same zone, or it judges another tick.
// Asia/Kolkata (+05:30) puts the hourly tick at :30 UTC, half an hour from the UTC one.
func TestCheckScheduleZone(t *testing.T) {
	h := newFleet(t, "local", "vmA")[0]
	now := time.Now()
	// The run at hh:40 UTC is for the hh:30 UTC tick; the check half an hour later, at
	// hh+1:10, must still find that tick due (the next one is at hh+1:30).
	runAt := now.Truncate(time.Hour).Add(time.Hour + 40*time.Minute)
	checkAt := runAt.Add(30 * time.Minute)
	h.env = append(h.env, "CRONLOCK_TZ=Asia/Kolkata")
	if code, _, errs := h.at(runAt.Sub(now), "run", "--key", "billing", "--schedule", "0 * * * *", "--", "true"); code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	for _, args := range [][]string{
		{"--schedule", "0 * * * *"},                         // the zone from CRONLOCK_TZ, as the run had it
		{"--schedule", "0 * * * *", "--tz", "Asia/Kolkata"}, // or from the flag
		{}, // the recorded schedule keeps its zone
	} {
		code, out := h.check(checkAt.Sub(now), append([]string{"--key", "billing"}, args...)...)
		if code != 0 || !strings.Contains(out, "for the ") {
			t.Errorf("check %v: exit %d %q; want 0 OK for the run of the due tick", args, code, out)
		}
	}
	if code, out := h.check(checkAt.Sub(now), "--key", "billing", "--schedule", "0 * * * *", "--tz", "UTC"); code != 2 {
		t.Errorf("check in UTC: exit %d %q; want 2 CRITICAL (no run for the hh:00 UTC tick)", code, out)
	}
	if code, out := h.check(checkAt.Sub(now), "--key", "billing", "--tz", "Asia/Kolkata"); code != 3 || !strings.Contains(out, "--tz works only with --schedule") {
		t.Errorf("--tz without --schedule: exit %d %q; want 3 UNKNOWN", code, out)
	}
}
