package cmd

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/jobrun"
	"cronlock/procfs"
	"cronlock/runstatus"
)

// TestConcurrentRunsOneKey starts 12 cronlocks on one key at once, on Redis and on the
// local lock, with a job three times longer than the TTL: exactly one runs, all exit 0.
func TestConcurrentRunsOneKey(t *testing.T) {
	url := "redis://" + redistest.Addr(t) + "/0"
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			concurrentRunsOneKey(t, newCLI(t, url), "--backend", backend)
		})
	}
}

// TestSigtermReachesGrandchild: a SIGTERM to cronlock reaches the whole process group,
// a grandchild included; the run is interrupted with 128+15.
func TestSigtermReachesGrandchild(t *testing.T) {
	c := newCLI(t, "")
	gc := filepath.Join(c.dir, "gc.pid")
	got := filepath.Join(c.dir, "gc.got")
	cmd := c.command("run", "-k", "term", "--grace", "5s", "--", "sh", "-c",
		// The grandchild traps TERM and says so; sh itself waits for it.
		"sh -c 'trap \"echo TERM > "+got+"; exit 0\" TERM; echo $$ > "+gc+"; while :; do sleep 0.05; done' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, gc)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+15 {
		t.Fatalf("cronlock ended with %v, want exit 143", err)
	}
	if b, _ := os.ReadFile(got); string(b) != "TERM\n" {
		t.Fatalf("the grandchild did not get SIGTERM (marker %q)", b)
	}
	if !proctest.Dead(pid) {
		t.Fatalf("grandchild %d outlived cronlock", pid)
	}
	rows := c.history("term")
	if len(rows) != 1 || rows[0].Status != runstatus.Interrupted {
		t.Fatalf("history %+v, want one interrupted run", rows)
	}
}

// TestIgnoredSigtermKilledAfterGrace: a job that ignores SIGTERM is SIGKILLed after
// --grace when cronlock stops it for --timeout.
func TestIgnoredSigtermKilledAfterGrace(t *testing.T) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "child.pid")
	start := time.Now()
	code, _, stderr := c.run("run", "-k", "stubborn", "--timeout", "300ms", "--grace", "500ms", "--", "sh", "-c",
		"trap '' TERM; echo $$ > "+pidf+"; while :; do sleep 0.05; done")
	took := time.Since(start)
	if code != 124 {
		t.Fatalf("exit %d, want 124 (stderr %q)", code, stderr)
	}
	if took < 800*time.Millisecond {
		t.Fatalf("cronlock returned after %v: it did not give the job its 500ms grace after the 300ms timeout", took)
	}
	if pid := proctest.ReadPID(t, pidf); !proctest.Dead(pid) {
		t.Fatalf("the job %d survived SIGKILL", pid)
	}
	rows := c.history("stubborn")
	if len(rows) != 1 || rows[0].Status != runstatus.Timeout || rows[0].Signal == nil || *rows[0].Signal != "SIGKILL" {
		t.Fatalf("history %+v, want one timeout ended by SIGKILL", rows)
	}
}

// TestCronlockKilledTakesTheJobAlong: cronlock SIGKILLed → the job's whole group dies
// with it, and the Redis lock is free again after its TTL.
func TestCronlockKilledTakesTheJobAlong(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr+"/0")
	a, b := filepath.Join(c.dir, "a.pid"), filepath.Join(c.dir, "b.pid")
	cmd := c.command("run", "-k", "killed", "--ttl", "1s", "--", "sh", "-c",
		"sh -c 'echo $$ > "+a+"; exec sleep 1000' | sh -c 'echo $$ > "+b+"; exec sleep 1000'")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pa, pb := proctest.ReadPID(t, a), proctest.ReadPID(t, b)
	cmd.Process.Kill()
	cmd.Wait()
	proctest.WaitDead(t, pa, 5*time.Second, "first process of the pipeline")
	proctest.WaitDead(t, pb, 5*time.Second, "second process of the pipeline")
	// The lock expires after the TTL (1s), then another run takes it.
	time.Sleep(1200 * time.Millisecond)
	code, out, stderr := c.run("run", "-k", "killed", "--", "echo", "again")
	if code != 0 || out != "again\n" {
		t.Fatalf("after the TTL: exit %d, stdout %q, stderr %q; want the lock free", code, out, stderr)
	}
}

// waitWatching waits until cronlock process pid watches a lock file with inotify: a
// local --wait waiter does, and only once it waits, past setting up its signals. (A
// fixed pause stood for this, and a -race cronlock that started slower than that on a
// loaded machine died of the SIGTERM before it handled any.)
func waitWatching(t *testing.T, pid int) {
	t.Helper()
	fdinfo := "/proc/" + strconv.Itoa(pid) + "/fdinfo"
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		fds, _ := os.ReadDir(fdinfo)
		for _, fd := range fds {
			if b, err := os.ReadFile(fdinfo + "/" + fd.Name()); err == nil && bytes.Contains(b, []byte("inotify wd:")) {
				return
			}
		}
	}
	t.Fatalf("cronlock (pid %d) did not watch a lock file within 20s", pid)
}

// TestStopSignalBeforeTheChildStarts: a SIGTERM while cronlock waits for the lock ends
// the run at once with 128+15 and status interrupted; the job never starts.
func TestStopSignalBeforeTheChildStarts(t *testing.T) {
	c := newCLI(t, "")
	held := filepath.Join(c.dir, "held")
	holder := c.command("run", "-k", "sig", "--", "sh", "-c", "touch "+held+"; sleep 30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Signal(syscall.SIGTERM); holder.Wait() }()
	proctest.WaitFile(t, held)
	ran := filepath.Join(c.dir, "ran")
	waiter := c.command("run", "-k", "sig", "--wait", "60s", "--", "touch", ran)
	var errb bytes.Buffer
	waiter.Stderr = &errb
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waitWatching(t, waiter.Process.Pid)
	waiter.Process.Signal(syscall.SIGTERM)
	err := waiter.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("waiter ended with %v (stderr %q), want exit 143", err, errb.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the job ran although cronlock was stopped before it got the lock")
	}
	var interrupted int
	for _, r := range c.history("sig") {
		if r.Status == runstatus.Interrupted {
			interrupted++
		}
	}
	if interrupted != 1 {
		t.Fatalf("history has %d interrupted runs, want 1", interrupted)
	}
}

// TestRedisGoneFailsClosed: Redis killed, then paused, under a running job. Without a
// confirmed renewal the job is stopped before its lease can end (exit 125, lock_lost),
// and cronlock never falls back to the local lock.
func TestRedisGoneFailsClosed(t *testing.T) {
	for _, fault := range []string{"kill", "pause"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t)
			failsClosed(t, newCLI(t, "redis://"+srv.Addr+"/0"), func() {
				if fault == "kill" {
					srv.Kill()
				} else if _, err := srv.Do("CLIENT", "PAUSE", "4000", "ALL"); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestAbandonedRunFoundByNextRun: a cronlock SIGKILLed mid-run leaves a running row (or,
// in its first second, only its claimed per-run file); the next run on the node marks it
// abandoned, without any `history` call in between.
func TestAbandonedRunFoundByNextRun(t *testing.T) {
	for _, after := range []time.Duration{0, jobrun.StartRowDelay + 300*time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) { testAbandonedRunFoundByNextRun(t, after) })
	}
}

func testAbandonedRunFoundByNextRun(t *testing.T, after time.Duration) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "job.pid")
	cmd := c.command("run", "-k", "dies", "--", "sh", "-c", "echo $$ > "+pidf+"; exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.ReadPID(t, pidf)
	time.Sleep(after)
	cmd.Process.Kill()
	cmd.Wait()
	if code, _, errs := c.run("run", "-k", "other", "--", "true"); code != 0 {
		t.Fatalf("next run: exit %d, %s", code, errs)
	}
	// Read the file directly: `history` would reap by itself and hide whether run did.
	st, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.List(history.Filter{Key: "dies"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status != runstatus.Abandoned {
		t.Fatalf("rows %+v, want one abandoned run", rows)
	}
}

// TestHistoryShowsYoungRun: a run in its first second has no row of its own yet (see
// jobrun.StartRowDelay); `history` shows it as running all the same, from its claimed file.
// The job stops cronlock at once, so that cronlock cannot write the row itself meanwhile.
func TestHistoryShowsYoungRun(t *testing.T) {
	c := newCLI(t, "")
	pidf, idf := filepath.Join(c.dir, "cronlock.pid"), filepath.Join(c.dir, "run.id")
	cmd := c.command("run", "-k", "young", "--", "sh", "-c",
		"echo $CRONLOCK_RUN_ID > "+idf+"; echo $PPID > "+pidf+"; kill -STOP $PPID; exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	proctest.ReadPID(t, pidf)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, err := procfs.ReadStat(cmd.Process.Pid); err == nil && st.State == 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cronlock was not stopped by its job")
		}
	}
	id, _ := os.ReadFile(idf)
	if code, out, errs := c.run("history", "show", strings.TrimSpace(string(id))); code != 0 || !strings.Contains(out, "running") {
		t.Fatalf("history show of the young run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	rows := c.history("young")
	if len(rows) != 1 || rows[0].Status != runstatus.Running || rows[0].PID != cmd.Process.Pid || rows[0].Node != "clinode" ||
		len(rows[0].Command) != 3 || rows[0].Command[0] != "sh" {
		t.Fatalf("history of the young run: %+v; want it running, with its pid, node and command", rows)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("cronlock ended with %v, want exit 3", err)
	}
	rows = c.history("young")
	if len(rows) != 1 || rows[0].Status != runstatus.Failed || rows[0].ExitCode == nil || *rows[0].ExitCode != 3 {
		t.Fatalf("history after the run: %+v; want one failed row with exit code 3", rows)
	}
}

// TestControlBytesEscapedOnDisplay: a node name with ESC, BEL and a C1 control (another
// host's, read from the lock) reaches no terminal raw: status, status --json, history and
// the verbose skip message all escape it.
func TestControlBytesEscapedOnDisplay(t *testing.T) {
	c := newCLI(t, "")
	held := filepath.Join(c.dir, "held")
	holder := c.command("run", "-k", "ctl", "--node", "evil\x1b[31m\a\u009b2J", "--", "sh", "-c", "touch "+held+"; sleep 30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Signal(syscall.SIGTERM); holder.Wait() }()
	proctest.WaitFile(t, held)
	raw := func(s string) bool { return strings.ContainsAny(s, "\x1b\a\u009b") }
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"status", "--key", "ctl"}} {
		if _, out, _ := c.run(args...); raw(out) || !strings.Contains(out, "evil") {
			t.Errorf("%v printed %q", args, out)
		}
	}
	if _, _, errs := c.run("run", "-k", "ctl", "-v", "--", "true"); raw(errs) || !strings.Contains(errs, "evil") {
		t.Errorf("the skip message printed %q", errs)
	}
	holder.Process.Signal(syscall.SIGTERM)
	holder.Wait()
	for _, args := range [][]string{{"history"}, {"history", "--json"}} {
		if _, out, _ := c.run(args...); raw(out) || !strings.Contains(out, "evil") {
			t.Errorf("%v printed %q", args, out)
		}
	}
}
