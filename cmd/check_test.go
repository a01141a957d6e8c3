package cmd

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cronlock/check"
	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

// Tests of `cronlock check` through the built binary, on the local backend.
// The clock is the test build's CRONLOCK_TEST_CLOCK_OFFSET, which check reads as run does.

// checkLine is the plugin's status line: state, key, summary, perfdata in the plugin format.
var checkLine = regexp.MustCompile(`^CRONLOCK (OK|WARNING|CRITICAL|UNKNOWN) - [^|\n]+( \| ([^'= ]+=(U|-?[0-9.]+)(s)?(;[0-9.]*){0,4} ?)+)?\n$`)

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
		{"--key", "billing", "-t", "0"},
		{"--key", "billing", "--timeout", "soon"},
		{"--key", "billing", "-t"},
		{"--key", "billing", "--verbose=many"},
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

// hourAt is a clock offset that puts the host's clock m minutes and s seconds into the
// current hour (of the real clock, so the tick it makes has come on Redis's clock too),
// and that hour.
func hourAt(m, s int) (time.Duration, time.Time) {
	now := time.Now()
	h := now.Truncate(time.Hour)
	return h.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second).Sub(now), h.UTC()
}

// TestCheckInProgressAfterFailure: the run of the due tick is in
// progress on one host after the run of the tick before failed on another. That is OK:
// the failure ended before the run that now answers for the job; and the line never
// calls the older run "the last run". Once the run is done and failed too, CRITICAL.
func TestCheckInProgressAfterFailure(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB", "mon")
	a, b, mon := hosts[0], hosts[1], hosts[2]
	off, hour := hourAt(30, 0)
	sched := []string{"--schedule", "0 * * * *", "--tz", "UTC", "--max-skew", "0"}
	if code, _, errs := a.at(off-time.Hour, append(append([]string{"run", "--key", "billing"}, sched...), "--", "false")...); code != 1 {
		t.Fatalf("vmA's run of the tick before: exit %d %s; want 1 (failed)", code, errs)
	}
	if code, out := mon.check(off-time.Hour, "--key", "billing"); code != 2 || !strings.Contains(out, "ended failed") {
		t.Fatalf("after vmA's failure: exit %d %q; want 2 CRITICAL naming it", code, out)
	}
	b.env = append(b.env, "CRONLOCK_TEST_CLOCK_OFFSET="+off.String())
	run, _, release := b.startHolding(append([]string{"run", "--key", "billing"}, sched...))
	code, out := mon.check(off, "--key", "billing")
	want := "the run of the " + hour.Format("15:04") + " tick is in progress on vmB"
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "failed") || strings.Contains(out, "the last run") {
		t.Errorf("vmB's run of the due tick in progress after vmA's failure: exit %d %q; want 0 OK with %q", code, out, want)
	}
	release()
	run.Wait()
	if code, out := mon.check(off, "--key", "billing"); code != 0 || !strings.Contains(out, "for the "+hour.Format("15:04")+" tick") {
		t.Errorf("after vmB's success: exit %d %q; want 0 OK for its tick", code, out)
	}
}

// TestCheckNamesTheSuccessTick: seconds after the tick, within the
// grace, the due tick is the one before; the OK line names the tick the success was for
// (its scheduled_for), not the due one.
func TestCheckNamesTheSuccessTick(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "mon")
	a, mon := hosts[0], hosts[1]
	off, hour := hourAt(0, 10)
	if time.Until(hour.Add(20*time.Second)) > 0 {
		off, hour = off-time.Hour, hour.Add(-time.Hour) // its tick must have come on Redis's clock
	}
	if code, _, errs := a.at(off, "run", "--key", "billing", "--schedule", "0 * * * *", "--tz", "UTC", "--max-skew", "0", "--", "true"); code != 0 {
		t.Fatalf("vmA's run: exit %d %s", code, errs)
	}
	code, out := mon.check(off+10*time.Second, "--key", "billing")
	want, wrong := hour.Format("15:04")+" tick", hour.Add(-time.Hour).Format("15:04")+" tick"
	if code != 0 || !strings.Contains(out, "for the ") || !strings.Contains(out, want) || strings.Contains(out, wrong) {
		t.Errorf("within the grace after the success: exit %d %q; want 0 OK naming the %s, not the %s (the due one)", code, out, want, wrong)
	}
}

// TestCheckUnderNagios: what a Nagios 4 makes of the output. The
// reasons are separated by something it keeps (it turns ";" into ":"); perfdata has
// duration and lateness; -v puts each reason on a long-output line; --json holds no "|"
// (where Nagios would cut it) and no ";", and still decodes to the same line.
func TestCheckUnderNagios(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "mon")
	a, mon := hosts[0], hosts[1]
	off, _ := hourAt(30, 0)
	if code, _, errs := a.at(off, "run", "--key", "billing", "--schedule", "0 * * * *", "--tz", "UTC", "--max-skew", "0", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("vmA's run: exit %d %s", code, errs)
	}
	// An hour on: no success for the due tick, and the newest run failed: two reasons.
	code, out := mon.check(off+time.Hour, "--key", "billing")
	text, perf, _ := strings.Cut(strings.TrimSuffix(out, "\n"), " | ")
	if code != 2 || strings.Count(text, check.Separator) != 1 || strings.Contains(text, ";") {
		t.Errorf("two reasons: exit %d %q; want 2 CRITICAL, its reasons joined by %q and no ;", code, out, check.Separator)
	}
	if !regexp.MustCompile(`(^| )duration=[0-9.]+s;;;0( |$)`).MatchString(perf) || !regexp.MustCompile(`(^| )lateness=-?[0-9.]+s( |$)`).MatchString(perf) {
		t.Errorf("perfdata %q: want duration and lateness of the failed run", perf)
	}

	code, out, _ = mon.at(off+time.Hour, "check", "--key", "billing", "-v")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 2 || len(lines) < 4 || !checkLine.MatchString(lines[0]+"\n") || !strings.HasPrefix(lines[1], "- no successful run") ||
		!strings.HasPrefix(lines[2], "- the newest run of the job") || strings.Contains(strings.Join(lines[1:], "\n"), "|") {
		t.Errorf("-v: exit %d %q; want the status line, then a line per reason and the facts, none with |", code, out)
	}

	code, out = mon.check(off+time.Hour, "--key", "billing", "--json")
	var j struct {
		State     string   `json:"state"`
		Line      string   `json:"line"`
		Perfdata  string   `json:"perfdata"`
		DurationS *float64 `json:"duration_s"`
		LatenessS *float64 `json:"lateness_s"`
	}
	if code != 2 || strings.ContainsAny(out, "|;") || strings.Count(out, "\n") != 1 {
		t.Errorf("--json: exit %d %q; want one line without | or ; (Nagios cuts at |, turns ; into :)", code, out)
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.State != "CRITICAL" || !strings.Contains(j.Line, " | age=") ||
		!strings.Contains(j.Perfdata, ";;") || j.DurationS == nil || j.LatenessS == nil {
		t.Errorf("--json %q decodes to %+v (%v); want the line with its | and the perfdata with its ;", out, j, err)
	}
}

// TestCheckPluginOptions: the options the plugin guidelines reserve.
// -V prints the version and ends UNKNOWN, as the Monitoring Plugins do (a check command
// left with -V must not show OK); -t bounds the whole check: a Redis that accepts the
// connection and never answers is UNKNOWN at -t, saying so, long before --redis-timeout.
func TestCheckPluginOptions(t *testing.T) {
	h := newFleet(t, "local", "vmA")[0]
	for _, args := range [][]string{{"-V"}, {"--version"}, {"--key", "billing", "-V"}} {
		code, out, errs := h.run(append([]string{"check"}, args...)...)
		if code != 3 || !strings.HasPrefix(out, "cronlock ") || strings.Count(out, "\n") != 1 || errs != "" {
			t.Errorf("check %v: exit %d %q %q; want 3 and one version line", args, code, out, errs)
		}
	}
	if code, _, errs := h.run("run", "--key", "billing", "--", "true"); code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	for _, args := range [][]string{{"-t", "5"}, {"--timeout", "5s"}, {"-t", "1m"}, {"-v"}, {"-vv"}, {"--verbose"}} {
		code, out, errs := h.run(append([]string{"check", "--key", "billing", "--max-age", "1h"}, args...)...)
		if code != 0 || !strings.HasPrefix(out, "CRONLOCK OK - billing: ") {
			t.Errorf("check %v: exit %d %q %q; want 0 OK", args, code, out, errs)
		}
	}

	srv := redistest.Start(t)
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	srv.Stop() // SIGSTOP: the kernel still accepts connections, nothing answers
	t.Cleanup(srv.Cont)
	code, out, _ := c.run("check", "--key", "billing", "--max-age", "1h", "--redis-timeout", "60s", "-t", "1")
	if code != 3 || !strings.HasPrefix(out, "CRONLOCK UNKNOWN - billing: no verdict within -t/--timeout 1s") {
		t.Errorf("a Redis that never answers, -t 1: exit %d %q; want 3 UNKNOWN at the -t bound", code, out)
	}
}

// TestCheckGraceFromClaims: a job whose runs may start up to --start-deadline (or
// --jitter) after their tick is not missing during that time: without --grace, check
// allows the larger of 5m and what the key's claims recorded. Its 09:00-style run,
// recorded with --start-deadline 50m, is still the answer 30 minutes into the next hour;
// with --grace 5m given, that next tick is due and has no success.
func TestCheckGraceFromClaims(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "mon")
	a, mon := hosts[0], hosts[1]
	off, hour := hourAt(1, 0)
	off, hour = off-2*time.Hour, hour.Add(-2*time.Hour) // a tick that came long ago on Redis's clock too
	if code, _, errs := a.at(off, "run", "--key", "late", "--schedule", "0 * * * *", "--tz", "UTC", "--max-skew", "0",
		"--start-deadline", "50m", "--", "true"); code != 0 {
		t.Fatalf("vmA's run: exit %d %s", code, errs)
	}
	later := off + time.Hour + 29*time.Minute // the next hour's tick + 30m
	if code, out := mon.check(later, "--key", "late"); code != 0 || !strings.Contains(out, hour.Format("15:04")+" tick") {
		t.Errorf("30m after the next tick, no --grace: exit %d %q; want 0 OK (the recorded 50m grace: the next tick is not due yet)", code, out)
	}
	if code, out := mon.check(later, "--key", "late", "--grace", "5m"); code != 2 {
		t.Errorf("30m after the next tick, --grace 5m: exit %d %q; want 2 CRITICAL (its tick is due, with no success)", code, out)
	}
}
