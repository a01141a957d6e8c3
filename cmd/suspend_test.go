package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// Tests of cronlock suspend and resume through the built binary.

// dayTicks are three 09:00 UTC ticks in the past, a day apart, and the clock offsets that
// put a host 5 s after each: successive ticks of a daily schedule without waiting a day
// (with --max-skew 0 the backend's clock judges none of them).
func dayTicks() (ticks [3]time.Time, offs [3]time.Duration) {
	now := time.Now().UTC()
	nine := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC).AddDate(0, 0, -4)
	for i := range ticks {
		ticks[i] = nine.AddDate(0, 0, i)
		offs[i] = ticks[i].Add(5 * time.Second).Sub(now)
	}
	return ticks, offs
}

// TestSuspendFleet: suspend on one host stops the next tick's run on every host (status
// suspended, exit 0, the job not started, one entry in the fleet's record for the
// tick), check is OK with the reason and WARNING past --max-suspend, resume lets the
// next tick run, and the tick that came while suspended counts as satisfied.
func TestSuspendFleet(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB", "vmC")
	ticks, offs := dayTicks()
	ran := filepath.Join(t.TempDir(), "ran")
	job := func(h *fleetHost, tick int, args ...string) (int, string) {
		t.Helper()
		a := append([]string{"run", "-k", "billing", "--schedule", "0 9 * * *", "--tz", "UTC", "--max-skew", "0"}, args...)
		code, _, errs := h.at(offs[tick], append(a, "--", "sh", "-c", "echo "+h.node+" >> "+ran)...)
		return code, errs
	}
	ranLines := func() string { b, _ := os.ReadFile(ran); return strings.TrimSpace(string(b)) }

	if code, errs := job(hosts[0], 0); code != 0 || ranLines() != "vmA" {
		t.Fatalf("first tick: exit %d (%s), ran %q", code, errs, ranLines())
	}
	code, out, errs := hosts[1].run("suspend", "-k", "billing", "--reason", "db upgrade")
	if code != 0 || !strings.Contains(out, "until cronlock resume") || !strings.Contains(out, "db upgrade") {
		t.Fatalf("suspend: exit %d, %q (%s); want 0 and a line that says it lasts until resume", code, out, errs)
	}
	for _, h := range hosts {
		code, errs := job(h, 1, "-v")
		if code != 0 || !strings.Contains(errs, "suspended by ") || !strings.Contains(errs, "@") || !strings.Contains(errs, `"db upgrade"`) {
			t.Fatalf("%s during the suspension: exit %d, stderr %q; want 0 and a -v line naming who, since and why", h.node, code, errs)
		}
		if rows := h.rows("billing"); rows[0].Status != "suspended" || rows[0].Exit == nil || *rows[0].Exit != 0 ||
			rows[0].ScheduledFor == nil || *rows[0].ScheduledFor != rfc(ticks[1]) {
			t.Fatalf("%s's history: %+v; want suspended, exit 0, for the %s tick", h.node, rows[0], rfc(ticks[1]))
		}
	}
	if code, errs := job(hosts[2], 1); code != 0 || errs != "" {
		t.Errorf("a suspended run without -v: exit %d, stderr %q; want 0 and silence", code, errs)
	}
	if ranLines() != "vmA" {
		t.Fatalf("jobs that ran: %q; want only the first tick's", ranLines())
	}
	m := monitor(t, hosts[0])
	var susp []fleetRow
	for _, r := range fleetRows(t, m, "--key", "billing") {
		switch r.Status {
		case "suspended":
			susp = append(susp, r)
		case "never_fired":
			t.Errorf("a never_fired entry: %+v", r)
		}
	}
	if len(susp) != 1 || susp[0].ScheduledFor == nil || *susp[0].ScheduledFor != rfc(ticks[1]) || !strings.Contains(susp[0].Error, "db upgrade") {
		t.Fatalf("suspended entries of the fleet's record: %+v; want one, for the %s tick, with the reason", susp, rfc(ticks[1]))
	}

	code, out = hosts[2].check(0, "-k", "billing")
	if code != 0 || !strings.Contains(out, "OK") || !strings.Contains(out, "suspended by ") || !strings.Contains(out, "db upgrade") {
		t.Errorf("check during the suspension: exit %d, %q; want OK with who and why", code, out)
	}
	code, out = hosts[2].check(0, "-k", "billing", "--max-suspend", "1ms")
	if code != 1 || !strings.Contains(out, "WARNING") || !strings.Contains(out, "--max-suspend") {
		t.Errorf("check past --max-suspend: exit %d, %q; want WARNING", code, out)
	}
	code, out, errs = hosts[1].run("status", "-k", "billing")
	if code != 0 || !strings.Contains(out, "is suspended by ") || !strings.Contains(out, "db upgrade") {
		t.Errorf("status: exit %d, %q (%s); want the suspension", code, out, errs)
	}

	if code, out, errs := hosts[0].run("resume", "-k", "billing"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: exit %d, %q (%s)", code, out, errs)
	}
	if code, _, errs := hosts[0].run("resume", "-k", "billing"); code != ExitNotSuspended || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "not suspended") {
		t.Errorf("resume of a key that is not suspended: exit %d, %q; want %d and one line", code, errs, ExitNotSuspended)
	}
	// After the resume, the tick that came while suspended needs no success.
	code, out = hosts[2].check(offs[1]+10*time.Minute, "-k", "billing")
	if code != 0 || !strings.Contains(out, "while the key was suspended") {
		t.Errorf("check of the suspended tick after resume: exit %d, %q; want OK", code, out)
	}
	if code, errs := job(hosts[2], 2); code != 0 || ranLines() != "vmA\nvmC" {
		t.Fatalf("the tick after resume: exit %d (%s), ran %q; want vmC to run it", code, errs, ranLines())
	}
	for _, r := range fleetRows(t, m, "--key", "billing") {
		if r.Status == "never_fired" || r.Duplicate {
			t.Errorf("after resume: %+v; the suspended tick is neither never fired nor a duplicate", r)
		}
	}
}

// TestSuspendLiftsItself: --for ends the suspension by itself, on the backend's clock.
func TestSuspendLiftsItself(t *testing.T) {
	c := newCLI(t, "redis://"+redistest.Addr(t)+"/0")
	if code, out, errs := c.run("suspend", "-k", "lift", "--for", "300ms"); code != 0 || strings.Contains(out, "until cronlock resume") {
		t.Fatalf("suspend --for: exit %d, %q (%s)", code, out, errs)
	}
	if code, _, _ := c.run("run", "-k", "lift", "--", "true"); code != 0 || lastRun(t, c).Status != "suspended" {
		t.Fatalf("a run at once: exit %d, status %s; want suspended", code, lastRun(t, c).Status)
	}
	waitUntil(t, 10*time.Second, "the suspension to lift", func() bool {
		c.run("run", "-k", "lift", "--", "true")
		return lastRun(t, c).Status == "succeeded"
	})
	if code, _, errs := c.run("resume", "-k", "lift"); code != ExitNotSuspended {
		t.Errorf("resume after --for passed: exit %d (%s); want %d", code, errs, ExitNotSuspended)
	}

	// A job already running when its key is suspended goes on to its end, renewed.
	run, errb, let := c.startHolding([]string{"run", "-k", "lift", "--ttl", "1s"})
	if code, _, errs := c.run("suspend", "-k", "lift"); code != 0 {
		t.Fatalf("suspend under a running job: exit %d (%s)", code, errs)
	}
	suspended := time.Now().UnixMicro()
	lockKey := strings.TrimPrefix(prefixOf(c), "CRONLOCK_PREFIX=") + "{lift}:lock"
	waitUntil(t, 10*time.Second, "a renewal after the suspension", func() bool {
		v, _ := redistest.Do(redistest.Addr(t), "GET", lockKey)
		var h struct {
			RenewedUS string `json:"renewed_us"`
		}
		json.Unmarshal([]byte(v), &h)
		us, _ := strconv.ParseInt(h.RenewedUS, 10, 64)
		return us > suspended
	})
	let()
	if err := run.Wait(); err != nil || lastRun(t, c).Status != "succeeded" {
		t.Fatalf("the running job: %v (%s), status %s; want it to end succeeded", err, errb, lastRun(t, c).Status)
	}
}

// TestSuspendBadInput: one line and the usage code for flags that cannot be meant.
func TestSuspendBadInput(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_BACKEND=local")
	for _, args := range [][]string{
		{"suspend", "-k", "x", "--for", "1h", "--until", "2099-01-01"},
		{"suspend", "-k", "x", "--until", "2001-01-01"},
		{"suspend", "-k", "x", "--until", "tomorrow"},
		{"suspend", "--for", "1h"},
		{"resume"},
	} {
		code, out, errs := c.run(args...)
		if code != ExitFailed || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and one line", args, code, out, errs, ExitFailed)
		}
	}
	if code, _, errs := c.run("resume", "-k", "never"); code != ExitNotSuspended || strings.Count(errs, "\n") != 1 {
		t.Errorf("resume of an unknown key: exit %d, %q; want %d and one line", code, errs, ExitNotSuspended)
	}
}

// TestSuspendLocal: on the local backend the suspension is a file of its own beside the
// lock file (private, not the lock file), and suspend/resume work as on Redis.
func TestSuspendLocal(t *testing.T) {
	hosts := newFleet(t, "local", "a", "b")
	if code, out, errs := hosts[0].run("suspend", "-k", "billing", "--for", "1h", "--reason", "window"); code != 0 || !strings.Contains(out, "lifts by itself") {
		t.Fatalf("suspend: exit %d, %q (%s)", code, out, errs)
	}
	var dir string // the fleet's shared folder: the last CRONLOCK_LOCK_DIR
	for _, kv := range hosts[0].env {
		if v, ok := strings.CutPrefix(kv, "CRONLOCK_LOCK_DIR="); ok {
			dir = v
		}
	}
	st, err := os.Stat(filepath.Join(dir, "billing.suspend"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("suspension file: %v, %v; want billing.suspend, 0600", st, err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	code, _, errs := hosts[1].run("run", "-k", "billing", "-v", "--", "touch", marker)
	if _, err := os.Stat(marker); code != 0 || err == nil || !strings.Contains(errs, "window") || lastRun(t, hosts[1].cli).Status != "suspended" {
		t.Fatalf("run while suspended: exit %d, ran %v, stderr %q", code, err == nil, errs)
	}
	if lb, _ := os.ReadFile(filepath.Join(dir, "billing.lock")); strings.Contains(string(lb), "window") {
		t.Errorf("the lock file holds the suspension: %q", lb)
	}
	metrics := t.TempDir()
	if code, _, errs := hosts[1].run("run", "-k", "billing", "--metrics-dir", metrics, "--", "touch", marker); code != 0 {
		t.Fatalf("run with --metrics-dir while suspended: exit %d (%s)", code, errs)
	}
	fams := promFamilies(t, filepath.Join(metrics, "cronlock_billing.prom"))
	if v := promValue(t, fams, metricLastStatus, "suspended"); v != 1 {
		t.Errorf("cronlock_last_status{status=suspended} = %v; want 1", v)
	}
	var stats struct{ Runs, Suspended int }
	if _, out, _ := hosts[1].run("history", "stats", "--json", "-k", "billing"); json.Unmarshal([]byte(out), &stats) != nil || stats.Runs != 2 || stats.Suspended != 2 {
		t.Errorf("history stats --json: %+v; want 2 runs, 2 suspended", stats)
	}
	code, out := hosts[1].check(0, "-k", "billing", "--max-age", "1h")
	if code != 0 || !strings.Contains(out, "window") {
		t.Errorf("check: exit %d, %q; want OK with the reason", code, out)
	}
	if code, _, errs := hosts[1].run("resume", "-k", "billing"); code != 0 {
		t.Fatalf("resume: exit %d (%s)", code, errs)
	}
	if code, _, errs := hosts[1].run("run", "-k", "billing", "--", "touch", marker); code != 0 || lastRun(t, hosts[1].cli).Status != "succeeded" {
		t.Fatalf("run after resume: exit %d (%s)", code, errs)
	}
	var j struct {
		Suspension *json.RawMessage `json:"suspension"`
	}
	if _, out, _ := hosts[0].run("status", "-k", "billing", "--json"); json.Unmarshal([]byte(out), &j) == nil && j.Suspension != nil {
		t.Errorf("status --json after resume: %s; want no suspension", out)
	}
}

// TestSuspendStandby: a standby waiting beside a run whose host is then lost does not
// take the tick over once the key is suspended: it ends suspended, its job never started.
func TestSuspendStandby(t *testing.T) {
	off, _ := inMinute()
	hs := standbyFleet(t, "redis://"+redistest.Addr(t)+"/0", off, "vmA", "vmB")
	a, _ := hs[0].startJob(t)
	done := hs[1].startStandby(t)
	if code, _, errs := hs[1].run("suspend", "-k", "bill", "--reason", "lost host"); code != 0 {
		t.Fatalf("suspend: exit %d (%s)", code, errs)
	}
	signalTree(processTree(a.Process.Pid), syscall.SIGKILL)
	a.Wait()
	end := awaitEnd(t, done, "vmB's standby")
	if _, err := os.Stat(filepath.Join(hs[1].dir, "job")); end.code != 0 || err == nil || !strings.Contains(end.errs, "lost host") ||
		hs[1].lastRow(t).Status != "suspended" {
		t.Fatalf("vmB: exit %d, job ran %v, stderr %q; want it to end suspended without its job", end.code, err == nil, end.errs)
	}
}
