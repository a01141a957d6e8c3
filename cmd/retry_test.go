package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// Tests of --retries through the built binary.

// tryRow is the part of `history --json` the retry tests read.
type tryRow struct {
	ID           string `json:"id"`
	RunID        string `json:"run_id"`
	Try          int    `json:"try"`
	Status       string `json:"status"`
	Exit         *int   `json:"exit"`
	FencingToken uint64 `json:"fencing_token"`
	Error        string `json:"error"`
}

// TestRetriesTryAgainUnderOneRun: a job that fails twice and then succeeds is one run of
// three tries: exit 0, three rows linked by the first try's id, CRONLOCK_TRY 1, 2, 3 with
// the same run id and fencing token, and stats that count one successful run.
func TestRetriesTryAgainUnderOneRun(t *testing.T) {
	c := newCLI(t, "")
	envs := filepath.Join(c.dir, "envs")
	job := `echo "$CRONLOCK_TRY $CRONLOCK_RUN_ID $CRONLOCK_FENCING_TOKEN" >>` + envs + `; echo "try $CRONLOCK_TRY"; [ "$CRONLOCK_TRY" -ge 3 ]`
	code, out, errs := c.run("run", "-k", "flaky", "--retries", "4", "--retry-delay", "50ms", "--", "sh", "-c", job)
	if code != 0 || out != "try 1\ntry 2\ntry 3\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q: want 0 after three tries", code, out, errs)
	}
	if errs != "" {
		t.Errorf("stderr %q: tries mended by a later one are not news to cron mail", errs)
	}
	b, _ := os.ReadFile(envs)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("the job saw %q, want three tries", lines)
	}
	rows := c.tries("flaky")
	if statuses(rows) != "retried,retried,succeeded" {
		t.Fatalf("rows %+v, want retried, retried, succeeded", rows)
	}
	for i, r := range rows {
		want := strings.Join([]string{strconv.Itoa(i + 1), rows[0].ID, strconv.FormatUint(rows[0].FencingToken, 10)}, " ")
		if lines[i] != want {
			t.Errorf("try %d saw %q, want %q (CRONLOCK_TRY, the first try's id, one token)", i+1, lines[i], want)
		}
		if r.Try != i+1 || r.RunID != rows[0].ID || r.FencingToken != rows[0].FencingToken {
			t.Errorf("row %d: %+v, want try %d of run %s with one token", i, r, i+1, rows[0].ID)
		}
		if i < 2 && (r.Exit == nil || *r.Exit != 1 || !strings.Contains(r.Error, "try "+strconv.Itoa(i+1)+" of 5 failed with exit 1")) {
			t.Errorf("retried row %d: %+v, want its own exit 1 and a note", i, r)
		}
	}
	code, out, _ = c.run("history", "stats", "--json", "--key", "flaky")
	var st struct{ Runs, Succeeded, Failed int }
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Runs != 1 || st.Succeeded != 1 || st.Failed != 0 {
		t.Fatalf("stats %s (exit %d): want one run, one success", out, code)
	}
	// All tries failing: the run fails with the last try's code, and is one failure.
	code, _, _ = c.run("run", "-k", "bad", "--retries", "2", "--retry-delay", "10ms", "--", "sh", "-c", "exit 3")
	if rows := c.tries("bad"); code != 3 || statuses(rows) != "retried,retried,failed" {
		t.Fatalf("all tries fail: exit %d, rows %+v; want 3 and retried, retried, failed", code, rows)
	}
	code, out, _ = c.run("history", "stats", "--json", "--key", "bad")
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Runs != 1 || st.Failed != 1 {
		t.Fatalf("stats %s: want one run, one failure", out)
	}
}

// TestRetriesNeverRetried: what another try would not mend, or must not run, is tried once.
func TestRetriesNeverRetried(t *testing.T) {
	c := newCLI(t, "")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		status string
	}{
		{"not found", []string{"--", "/no/such/job"}, 127, runstatus.Error},
		{"not executable", []string{"--", "/etc/hostname"}, 126, runstatus.Error},
		{"timeout", []string{"--timeout", "200ms", "--", "sleep", "5"}, 124, runstatus.Timeout},
		{"code not in --retry-on", []string{"--retry-on", "75,111", "--", "sh", "-c", "exit 4"}, 4, runstatus.Failed},
		{"output lost", []string{"--", "sh", "-c", "echo x; exit 1"}, 125, runstatus.Failed},
	} {
		key := strings.ReplaceAll(tc.name, " ", "-")
		cmd := c.command(append([]string{"run", "-k", key, "--retries", "3", "--retry-delay", "10ms"}, tc.args...)...)
		if tc.name == "output lost" {
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer full.Close()
			cmd.Stdout = full
		}
		code := c.exitCode(cmd.Run())
		if rows := c.tries(key); code != tc.code || len(rows) != 1 || rows[0].Status != tc.status {
			t.Errorf("%s: exit %d, rows %+v; want %d and one %s try", tc.name, code, rows, tc.code, tc.status)
		}
	}
	// Listed codes are tried again.
	code, _, _ := c.run("run", "-k", "listed", "--retries", "1", "--retry-delay", "10ms", "--retry-on", "75", "--", "sh", "-c", "exit 75")
	if rows := c.tries("listed"); code != 75 || statuses(rows) != "retried,failed" {
		t.Errorf("--retry-on 75: exit %d, rows %+v; want a second try", code, rows)
	}
}

// TestRetriesTimeoutBoundsTheRun: --timeout counts from the first try: a second try that
// would still be inside a per-try timeout is stopped when the whole run's time is up, and
// no try starts once the delay would pass it.
func TestRetriesTimeoutBoundsTheRun(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_TEST_RANDOM=max")
	// 1 s of try 1, 0.5 s of delay, then try 2 would end at 2.5 s: the run's 2 s stop it.
	code, _, errs := c.run("run", "-k", "bound", "--timeout", "2s", "--grace", "1s", "--retries", "3",
		"--retry-delay", "500ms", "--", "sh", "-c", "sleep 1; exit 1")
	if rows := c.tries("bound"); code != 124 || statuses(rows) != "retried,timeout" {
		t.Fatalf("exit %d, rows %+v, stderr %q: want 124 and retried, timeout", code, rows, errs)
	}
	// A delay that would reach past --timeout starts no try; the run keeps the last
	// try's status and code.
	code, _, errs = c.run("run", "-k", "nodelay", "--timeout", "1s", "--retries", "3",
		"--retry-delay", "2s", "--", "sh", "-c", "exit 5")
	if rows := c.tries("nodelay"); code != 5 || statuses(rows) != "failed" {
		t.Fatalf("exit %d, rows %+v, stderr %q: want 5 and one failed try", code, rows, errs)
	}
}

// TestRetriesStopSignalInDelay: SIGTERM while the run waits to try again ends it as
// interrupted (143) before the next try starts, and the lock is free at once.
func TestRetriesStopSignalInDelay(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_TEST_RANDOM=max")
	marks := filepath.Join(c.dir, "marks")
	cmd, sc := c.startUntil(lineHas("trying again in"), "run", "-v", "-k", "stopdelay", "--retries", "2", "--retry-delay", "1h", "--",
		"sh", "-c", `echo "$CRONLOCK_TRY" >>`+marks+`; exit 1`)
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	if code := c.exitCode(cmd.Wait()); code != 143 {
		t.Fatalf("exit %d, want 143", code)
	}
	if b, _ := os.ReadFile(marks); string(b) != "1\n" {
		t.Fatalf("tries run: %q, want only the first", b)
	}
	rows := c.tries("stopdelay")
	if statuses(rows) != "retried,interrupted" || rows[1].Try != 2 || !strings.Contains(rows[1].Error, "before try 2 started") {
		t.Fatalf("rows %+v: want retried, then an interrupted try 2 that never started", rows)
	}
	if code, out, _ := c.run("run", "-k", "stopdelay", "--", "echo", "free"); code != 0 || out != "free\n" {
		t.Fatalf("after the stop: exit %d, stdout %q; want the lock free", code, out)
	}
}

// TestRetriesHoldTheLock: on Redis, the lock is held and renewed through a delay three
// times the TTL: a second host is skipped then, and the run's one fleet entry counts its
// tries.
func TestRetriesHoldTheLock(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr+"/0")
	c.env = append(c.env, "CRONLOCK_TEST_RANDOM=max")
	failed := filepath.Join(c.dir, "failed")
	holder := c.command("run", "-k", "held", "--ttl", "1s", "--retries", "1", "--retry-delay", "3s", "--",
		"sh", "-c", `if [ "$CRONLOCK_TRY" = 1 ]; then touch `+failed+`; exit 1; fi; echo done`)
	var out, errb bytes.Buffer
	holder.Stdout, holder.Stderr = &out, &errb
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, err := os.Stat(failed); err != nil; _, err = os.Stat(failed) {
		if time.Now().After(deadline) {
			t.Fatal("the first try never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Through the delay (3 s, the TTL 1 s): every try of host B is skipped.
	skips := 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		code, bout, berr := c.run("run", "--node", "hostB", "-k", "held", "--conflict-exit-code", "75", "--", "echo", "hostB ran")
		if code != 75 {
			t.Fatalf("host B during the delay: exit %d, stdout %q, stderr %q; want skipped (75)", code, bout, berr)
		}
		skips++
	}
	if code := c.exitCode(holder.Wait()); code != 0 || out.String() != "done\n" {
		t.Fatalf("holder: exit %d, stdout %q, stderr %q; want the second try's success", code, out.String(), errb.String())
	}
	rows := fleetRows(t, monitor(t, &fleetHost{cli: c}), "--key", "held")
	var mine []fleetRow
	for _, r := range rows {
		if r.Node == "clinode" {
			mine = append(mine, r)
		}
	}
	if len(mine) != 1 || mine[0].Tries != 2 || mine[0].Status != runstatus.Succeeded {
		t.Fatalf("fleet entries of the run %+v: want one succeeded entry with 2 tries (host B was skipped %d times)", mine, skips)
	}
}

// TestRetriesKilledInDelay: cronlock SIGKILLed while it waits to try again leaves the next
// try abandoned, so the run is still counted (as a failure), not lost at a retried row.
func TestRetriesKilledInDelay(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_TEST_RANDOM=max")
	cmd, _ := c.startUntil(lineHas("trying again in"), "run", "-v", "-k", "killdelay", "--retries", "1", "--retry-delay", "1h", "--", "false")
	// The first try's row is written in the background: a kill before it lands would
	// leave that try abandoned too.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(statuses(c.tries("killdelay")), "retried"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first try's row was never written")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	rows := c.tries("killdelay")
	if statuses(rows) != "retried,abandoned" || rows[1].Try != 2 || rows[1].RunID != rows[0].ID {
		t.Fatalf("rows %+v: want retried, then try 2 of the same run abandoned", rows)
	}
	code, out, _ := c.run("history", "stats", "--json", "--key", "killdelay")
	var st struct{ Runs, Failed int }
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Runs != 1 || st.Failed != 1 {
		t.Fatalf("stats %s: want one run, failed", out)
	}
}

// TestRetriesPingOnce: a run of several tries pings Healthchecks as one run: one start,
// one end by its final outcome, all with the run's id.
func TestRetriesPingOnce(t *testing.T) {
	c := newCLI(t, "")
	hc := newHC(t)
	code, _, _ := c.run("run", "-k", "pingtries", "--ping", hc.url(), "--retries", "2", "--retry-delay", "10ms",
		"--", "sh", "-c", `[ "$CRONLOCK_TRY" = 3 ]`)
	rows := c.tries("pingtries")
	if code != 0 || statuses(rows) != "retried,retried,succeeded" {
		t.Fatalf("exit %d, rows %+v", code, rows)
	}
	wantPings(t, hc.got(), rows[0].ID, "/start", "")

	hc = newHC(t)
	code, _, _ = c.run("run", "-k", "pingtriesbad", "--ping", hc.url(), "--retries", "1", "--retry-delay", "10ms",
		"--", "sh", "-c", `echo "try $CRONLOCK_TRY failed"; exit 4`)
	rows = c.tries("pingtriesbad")
	if code != 4 || len(rows) != 2 {
		t.Fatalf("exit %d, rows %+v", code, rows)
	}
	got := hc.got()
	wantPings(t, got, rows[0].ID, "/start", "/4")
	if !strings.Contains(got[1].Body, "try 2 failed") {
		t.Errorf("failure ping body %q: want the last try's output", got[1].Body)
	}
}

// TestRetriesOutputOnFailure: --output on-failure goes by the run's final outcome: tries
// mended by a later one print nothing; a run whose every try failed prints the output of
// every try, in order.
func TestRetriesOutputOnFailure(t *testing.T) {
	c := newCLI(t, "")
	code, out, errs := c.run("run", "-k", "quiet", "--output", "on-failure", "--retries", "2", "--retry-delay", "10ms",
		"--", "sh", "-c", `echo "try $CRONLOCK_TRY"; [ "$CRONLOCK_TRY" = 3 ]`)
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("mended run: exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errs)
	}
	code, out, _ = c.run("run", "-k", "loud", "--output", "on-failure", "--retries", "2", "--retry-delay", "10ms",
		"--", "sh", "-c", `echo "try $CRONLOCK_TRY"; exit 2`)
	if code != 2 || out != "try 1\ntry 2\ntry 3\n" {
		t.Fatalf("failed run: exit %d, stdout %q; want 2 and every try's output", code, out)
	}
}
