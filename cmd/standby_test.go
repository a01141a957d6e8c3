package cmd

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

// Standby takeover through the built binary, against a private Redis: hosts with their
// own node, history and lock folder run one every-minute tick; the holder's host is lost
// (SIGKILL of its cronlock and its job's whole tree) or frozen (SIGSTOP past its TTL), and
// a standby takes the tick over. States are waited for, never slept on.

// standbyHost is one simulated machine of a standby test.
type standbyHost struct {
	*cli
	node string
	off  time.Duration // the test clock's offset, so that the fleet stays in one minute
}

func standbyFleet(t *testing.T, url string, off time.Duration, nodes ...string) []*standbyHost {
	var hs []*standbyHost
	for _, n := range nodes {
		c := newCLI(t, url)
		c.env = append(c.env, "CRONLOCK_NODE="+n, "CRONLOCK_BACKEND=redis", "CRONLOCK_TEST_CLOCK_OFFSET="+off.String())
		hs = append(hs, &standbyHost{cli: c, node: n, off: off})
	}
	return hs
}

// runArgs is a `run` of the tick with a 2 s lease and extra flags, then the job.
func runArgs(extra []string, job string) []string {
	return append(append([]string{"run", "-k", "bill", "--ttl", "2s", "--grace", "200ms", "--schedule", "* * * * *", "--tz", "UTC"}, extra...), "--", "sh", "-c", job)
}

// startJob starts a run whose job writes its run id to DIR/id and loops until DIR/stop
// exists, and returns once the job runs.
func (h *standbyHost) startJob(t *testing.T, extra ...string) (*exec.Cmd, string) {
	return h.startJobExit(t, 0, extra...)
}

// startJobExit is startJob whose job exits with code once let go.
func (h *standbyHost) startJobExit(t *testing.T, code int, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	id, stop := filepath.Join(h.dir, "id"), filepath.Join(h.dir, "stop")
	cmd := h.command(runArgs(extra, `echo "$CRONLOCK_RUN_ID" > `+id+`.tmp; mv `+id+`.tmp `+id+`; while [ ! -e `+stop+` ]; do sleep 0.05; done; exit `+strconv.Itoa(code))...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, id)
	b, _ := os.ReadFile(id)
	return cmd, strings.TrimSpace(string(b))
}

// startStandby starts a --standby run that records its job's variables in DIR/job, and
// returns once it says it waits as a standby; done gets its exit code and stderr.
func (h *standbyHost) startStandby(t *testing.T, extra ...string) (done chan standbyEnd) {
	t.Helper()
	done, errs := h.tryStandby(t, "", extra...)
	if done == nil {
		t.Fatalf("%s did not become a standby; stderr %q", h.node, errs)
	}
	return done
}

// tryStandby starts a --standby run (then job, if given, after recording the variables)
// and returns once it says it waits as a standby, or, with a nil channel, its stderr
// once it ended without.
func (h *standbyHost) tryStandby(t *testing.T, then string, extra ...string) (chan standbyEnd, string) {
	t.Helper()
	_, done, errs := h.tryStandbyCmd(t, then, extra...)
	return done, errs
}

// tryStandbyCmd is tryStandby that also returns the standby's process.
func (h *standbyHost) tryStandbyCmd(t *testing.T, then string, extra ...string) (*exec.Cmd, chan standbyEnd, string) {
	t.Helper()
	out := filepath.Join(h.dir, "job")
	// Written whole (a rename): a test that sees the file reads all of it.
	job := `echo "$CRONLOCK_TICK_ATTEMPT $CRONLOCK_TAKEOVER_OF $CRONLOCK_FENCING_TOKEN $CRONLOCK_SCHEDULED_FOR" > ` + out + `.tmp; mv ` + out + `.tmp ` + out
	if then != "" {
		job += "; " + then
	}
	args := runArgs(append([]string{"-v", "--standby"}, extra...), job)
	cmd := h.command(args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	var errs strings.Builder
	for sc.Scan() {
		errs.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "waiting as a standby") {
			break
		}
	}
	if !strings.Contains(errs.String(), "waiting as a standby") {
		cmd.Wait()
		return cmd, nil, errs.String()
	}
	done := make(chan standbyEnd, 1)
	go func() {
		for sc.Scan() {
			errs.WriteString(sc.Text() + "\n")
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		done <- standbyEnd{code, errs.String()}
	}()
	return cmd, done, ""
}

type standbyEnd struct {
	code int
	errs string
}

// awaitEnd waits for a standby's end (a bound against a hang, not a timing assertion).
func awaitEnd(t *testing.T, done chan standbyEnd, what string) standbyEnd {
	t.Helper()
	select {
	case e := <-done:
		return e
	case <-time.After(40 * time.Second):
		t.Fatalf("%s had not ended after 40s", what)
	}
	return standbyEnd{}
}

// processTree is pid and every process descended from it (its guard, its job's group).
func processTree(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 1 {
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		for p, pp := range parent {
			if pp == tree[i] {
				tree = append(tree, p)
			}
		}
	}
	return tree
}

func signalTree(pids []int, s syscall.Signal) {
	for _, p := range pids {
		syscall.Kill(p, s)
	}
}

// standbyRow is the part of `history --json` these tests read.
type standbyRow struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	Error       string  `json:"error"`
	Exit        *int    `json:"exit"`
	TickAttempt *int    `json:"tick_attempt"`
	TakeoverOf  *string `json:"takeover_of"`
}

func (h *standbyHost) lastRow(t *testing.T) standbyRow {
	t.Helper()
	code, out, errs := h.run("history", "--json", "--limit", "1", "--key", "bill")
	var r standbyRow
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &r) != nil {
		t.Fatalf("%s: history exited %d: %q %q", h.node, code, out, errs)
	}
	return r
}

// fleetEntries reads the fleet's record of bill as any host sees it.
func fleetEntries(t *testing.T, h *standbyHost) map[string]map[string]any {
	t.Helper()
	code, out, errs := h.run("history", "--fleet", "--json", "--key", "bill")
	if code != 0 {
		t.Fatalf("history --fleet exited %d: %s", code, errs)
	}
	es := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			es[e["id"].(string)] = e
		}
	}
	return es
}

// TestStandbyTakesOverLostHost is the story of a lost VM: vmA runs the tick's long job,
// vmB waits as a standby; vmA's cronlock and its job's whole tree are SIGKILLed (its host
// is lost). vmB takes the tick over as attempt 2, its job sees vmA's run id, the fleet's
// record shows vmA's run abandoned and vmB's as its takeover, and a third host with
// --standby after vmB completed skips.
// It runs on plain Redis, Sentinel and Cluster.
func TestStandbyTakesOverLostHost(t *testing.T) {
	t.Run("redis", func(t *testing.T) { lostHostStory(t, "redis://"+redistest.Start(t).Addr+"/0") })
	t.Run("sentinel", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Sentinel deployment")
		}
		lostHostStory(t, redistest.StartSentinel(t).URL())
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		lostHostStory(t, redistest.StartCluster(t).URL())
	})
}

func lostHostStory(t *testing.T, url string) {
	off, tick := inMinute()
	hs := standbyFleet(t, url, off, "vmA", "vmB", "vmC")
	a, aID := hs[0].startJob(t)
	done := hs[1].startStandby(t)
	tree := processTree(a.Process.Pid)
	killed := time.Now()
	signalTree(tree, syscall.SIGKILL)
	a.Wait()
	end := awaitEnd(t, done, "vmB's standby")
	t.Logf("vmB ended %v after vmA's host was lost (ttl 2s)", time.Since(killed).Round(10*time.Millisecond))
	if end.code != 0 {
		t.Fatalf("vmB exited %d; stderr %q", end.code, end.errs)
	}
	b, err := os.ReadFile(filepath.Join(hs[1].dir, "job"))
	if err != nil {
		t.Fatalf("vmB's job never ran: %v; stderr %q", err, end.errs)
	}
	f := strings.Fields(string(b))
	if len(f) != 4 || f[0] != "2" || f[1] != aID || f[3] != rfc(tick) {
		t.Fatalf("vmB's job saw %q; want attempt 2, takeover of %s, tick %s", b, aID, rfc(tick))
	}
	row := hs[1].lastRow(t)
	if row.Status != "succeeded" || row.TickAttempt == nil || *row.TickAttempt != 2 || row.TakeoverOf == nil || *row.TakeoverOf != aID {
		t.Fatalf("vmB's row %+v; want succeeded, tick_attempt 2, takeover_of %s", row, aID)
	}
	if _, out, _ := hs[1].run("history", "show", row.ID); !strings.Contains(out, "attempt 2: takeover of run "+aID) {
		t.Fatalf("history show of vmB's run does not name the takeover:\n%s", out)
	}
	es := fleetEntries(t, hs[2])
	if ea := es[aID]; ea == nil || ea["status"] != "abandoned" {
		t.Fatalf("vmA's entry %v; want abandoned", ea)
	}
	eb := es[row.ID]
	if eb == nil || eb["takeover_of"] != aID || eb["tick_attempt"] != float64(2) || eb["duplicate"] == true {
		t.Fatalf("vmB's entry %v; want the takeover of %s, attempt 2, not DUPLICATE", eb, aID)
	}
	// A third host after vmB completed the tick: skipped, naming vmB's run.
	code, _, errs := hs[2].run(runArgs([]string{"--standby"}, "echo C ran")...)
	if r := hs[2].lastRow(t); code != 0 || r.Status != "skipped" || !strings.Contains(r.Error, row.ID) {
		t.Fatalf("vmC: exit %d, row %+v, stderr %q; want skipped naming %s", code, r, errs, row.ID)
	}
}

// TestStandbyFrozenHolder freezes vmA's whole tree past its lease: vmB takes the tick over,
// and vmA, woken, must not complete as the tick's owner: its keeper finds the lock lost
// and stops the job (lock_lost, 125).
func TestStandbyFrozenHolder(t *testing.T) {
	srv := redistest.Start(t)
	off, _ := inMinute()
	hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
	a, aID := hs[0].startJob(t)
	done := hs[1].startStandby(t)
	tree := processTree(a.Process.Pid)
	signalTree(tree, syscall.SIGSTOP)
	end := awaitEnd(t, done, "vmB's standby")
	signalTree(tree, syscall.SIGCONT)
	b, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
	if end.code != 0 || !strings.HasPrefix(string(b), "2 "+aID) {
		t.Fatalf("vmB: exit %d, job saw %q, stderr %q; want a takeover of %s", end.code, b, end.errs, aID)
	}
	err := a.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if r := hs[0].lastRow(t); code != 125 || r.Status != "lock_lost" {
		t.Fatalf("vmA woken: exit %d, row %+v; want 125, lock_lost", code, r)
	}
}

// TestStandbyNeverTakesOverContinue: a holder with --on-lock-lost continue may run on after
// losing its lease, so a standby never takes it over: it ends skipped with one line.
func TestStandbyNeverTakesOverContinue(t *testing.T) {
	srv := redistest.Start(t)
	off, _ := inMinute()
	hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
	a, _ := hs[0].startJob(t, "--on-lock-lost", "continue")
	defer func() { os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600); a.Wait() }()
	signalTree(processTree(a.Process.Pid), syscall.SIGKILL)
	code, _, errs := hs[1].run(runArgs([]string{"--standby"}, "echo B ran > "+filepath.Join(hs[1].dir, "job"))...)
	if _, err := os.Stat(filepath.Join(hs[1].dir, "job")); err == nil || code != 0 || !strings.Contains(errs, "never taken over") {
		t.Fatalf("vmB: exit %d, stderr %q, job ran: %v; want skipped with a line, no run", code, errs, err == nil)
	}
}

// TestStandbyBackendGone: Redis killed while a standby waits ends the standby as an
// error (125), never a takeover.
func TestStandbyBackendGone(t *testing.T) {
	srv := redistest.Start(t)
	off, _ := inMinute()
	hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
	a, _ := hs[0].startJob(t)
	defer func() { os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600); a.Wait() }()
	done := hs[1].startStandby(t, "--redis-timeout", "500ms")
	srv.Kill()
	end := awaitEnd(t, done, "vmB's standby")
	if _, err := os.Stat(filepath.Join(hs[1].dir, "job")); err == nil || end.code != 125 {
		t.Fatalf("vmB: exit %d, job ran %v, stderr %q; want 125 and no run", end.code, err == nil, end.errs)
	}
	if r := hs[1].lastRow(t); r.Status != "error" {
		t.Fatalf("vmB's row %+v; want error", r)
	}
}

// TestStandbyBadFlags: --standby needs --schedule, and --standbys 0 is refused; so is an
// empty --standby= (a --standby=$MODE whose variable is unset), which ran with no standby.
func TestStandbyBadFlags(t *testing.T) {
	c := newCLI(t, "")
	for _, args := range [][]string{
		{"run", "-k", "k", "--standby", "--", "true"},
		{"run", "-k", "k", "--schedule", "* * * * *", "--standby", "--standbys", "0", "--", "true"},
		{"run", "-k", "k", "--schedule", "* * * * *", "--standby", "--max-attempts", "0", "--", "true"},
		{"run", "-k", "k", "--schedule", "* * * * *", "--standby=maybe", "--", "true"},
		{"run", "-k", "k", "--schedule", "* * * * *", "--standby=", "--", "true"},
		{"run", "-k", "k", "--schedule", "* * * * *", "--standby=", "--standbys", "1", "--", "true"},
	} {
		code, _, errs := c.run(args...)
		if code != 125 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 125 and one line", args, code, errs)
		}
	}
}

// TestStandbyGracefulStop: a holder stopped by a forwarded SIGTERM (a reboot) leaves its
// tick resumable, and the standby takes it over at once as attempt 2.
// SIGINT (a person's Ctrl-C) is not resumable: the standby ends skipped.
func TestStandbyGracefulStop(t *testing.T) {
	srv := redistest.Start(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			off, _ := inMinute()
			hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
			a, aID := hs[0].startJob(t)
			done := hs[1].startStandby(t)
			a.Process.Signal(sig)
			a.Wait()
			end := awaitEnd(t, done, "vmB's standby")
			b, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
			took := strings.HasPrefix(string(b), "2 "+aID)
			if end.code != 0 || took != (sig != syscall.SIGINT) {
				t.Fatalf("vmB: exit %d, job saw %q, stderr %q; want a takeover of %s only after SIGTERM or SIGHUP", end.code, b, end.errs, aID)
			}
		})
	}
}

// TestStandbyFailedTick: a tick whose run failed by its own exit is not taken over by
// --standby (the standby ends skipped, naming the run and its outcome), and is by
// --standby=failed.
func TestStandbyFailedTick(t *testing.T) {
	for _, mode := range []string{"lost", "failed"} {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			off, _ := inMinute()
			hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
			a, aID := hs[0].startJobExit(t, 3)
			done := hs[1].startStandby(t, "--standby="+mode)
			os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600)
			a.Wait()
			end := awaitEnd(t, done, "vmB's standby")
			b, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
			r := hs[1].lastRow(t)
			switch {
			case mode == "lost" && (len(b) != 0 || r.Status != "skipped" || !strings.Contains(r.Error, aID) || !strings.Contains(r.Error, "failed")):
				t.Fatalf("vmB: job saw %q, row %+v; want skipped naming %s and failed", b, r, aID)
			case mode == "failed" && !strings.HasPrefix(string(b), "2 "+aID):
				t.Fatalf("vmB: exit %d, job saw %q, stderr %q; want a takeover of %s", end.code, b, end.errs, aID)
			}
		})
	}
}

// TestStandbyBounds: --standbys bounds the standbys of a tick (a later run skips), a
// SIGKILLed standby frees its slot when its slot's lease ends, and --max-attempts ends a
// standby of a tick that had that many attempts.
func TestStandbyBounds(t *testing.T) {
	srv := redistest.Start(t)
	off, _ := inMinute()
	hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB", "vmC", "vmD")
	a, aID := hs[0].startJob(t)
	defer func() { os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600); a.Wait() }()
	b := hs[1].command(runArgs([]string{"-v", "--standby", "--standbys", "1"}, "true")...)
	pipe, _ := b.StderrPipe()
	b.Start()
	sc := bufio.NewScanner(pipe)
	for sc.Scan() && !strings.Contains(sc.Text(), "waiting as a standby") {
	}
	if d, errs := hs[2].tryStandby(t, "", "--standbys", "1"); d != nil || hs[2].lastRow(t).Status != "skipped" {
		t.Fatalf("vmC became a standby beside vmB with --standbys 1 (stderr %q)", errs)
	}
	// vmB's standby is SIGKILLed: its slot frees itself when its lease ends, and vmC
	// waits in its place.
	b.Process.Kill()
	b.Wait()
	hold := "while [ ! -e " + filepath.Join(hs[2].dir, "stop") + " ]; do sleep 0.05; done"
	var done chan standbyEnd
	waitUntil(t, 20*time.Second, "vmC a standby in the slot of the killed vmB", func() bool {
		done, _ = hs[2].tryStandby(t, hold, "--standbys", "1")
		return done != nil
	})
	// vmA's host is lost: vmC takes over as attempt 2, and holds the tick.
	signalTree(processTree(a.Process.Pid), syscall.SIGKILL)
	proctest.WaitFile(t, filepath.Join(hs[2].dir, "job"))
	if j, _ := os.ReadFile(filepath.Join(hs[2].dir, "job")); !strings.HasPrefix(string(j), "2 "+aID) {
		t.Fatalf("vmC's job saw %q; want a takeover of %s", j, aID)
	}
	// With --max-attempts 2, a standby of the tick's second attempt ends at once.
	code, _, errs := hs[3].run(runArgs([]string{"--standby", "--max-attempts", "2"}, "true")...)
	if r := hs[3].lastRow(t); code != 0 || r.Status != "skipped" || !strings.Contains(errs, "--max-attempts") {
		t.Fatalf("vmD with --max-attempts 2: exit %d, row %+v, stderr %q; want skipped with a line", code, r, errs)
	}
	os.WriteFile(filepath.Join(hs[2].dir, "stop"), nil, 0o600)
	if e := awaitEnd(t, done, "vmC"); e.code != 0 {
		t.Fatalf("vmC exited %d: %q", e.code, e.errs)
	}
}

// TestStandbyLocalTakeover: on the local backend, a standby takes over the tick of a run
// whose cronlock was SIGKILLed, and only once that run's job is dead: the guard keeps the
// lock file locked until the job's group is gone.
func TestStandbyLocalTakeover(t *testing.T) {
	off, _ := inMinute()
	locks := filepath.Join(t.TempDir(), "locks")
	hs := standbyFleet(t, "", off, "cronA", "cronB")
	for _, h := range hs {
		h.env = append(h.env, "CRONLOCK_BACKEND=local", "CRONLOCK_LOCK_DIR="+locks)
	}
	pidA := filepath.Join(hs[0].dir, "jobpid")
	id := filepath.Join(hs[0].dir, "id")
	a := hs[0].command(runArgs(nil, `echo $$ > `+pidA+`; echo "$CRONLOCK_RUN_ID" > `+id+`.tmp; mv `+id+`.tmp `+id+`; while :; do sleep 0.05; done`)...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, id)
	b, _ := os.ReadFile(id)
	aID := strings.TrimSpace(string(b))
	pid, _ := os.ReadFile(pidA)
	done, errs := hs[1].tryStandby(t, `if kill -0 `+strings.TrimSpace(string(pid))+` 2>/dev/null; then echo alive; else echo dead; fi >> `+filepath.Join(hs[1].dir, "job"))
	if done == nil {
		t.Fatalf("cronB did not become a standby: %q", errs)
	}
	a.Process.Kill() // cronlock alone: its guard stops the job
	a.Wait()
	end := awaitEnd(t, done, "cronB's standby")
	j, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
	if end.code != 0 || !strings.HasPrefix(string(j), "2 "+aID) || !strings.Contains(string(j), "dead") {
		t.Fatalf("cronB: exit %d, job saw %q, stderr %q; want a takeover of %s after its job was dead", end.code, j, end.errs, aID)
	}
}

// TestStandbyEnds: a standby ends skipped, never running the job, when its bound
// (--start-deadline) passes while the tick's run lives, and when the tick's run completed
// and keeps its lock for --min-hold (an expiry after a completed run is no loss).
func TestStandbyEnds(t *testing.T) {
	srv := redistest.Start(t)
	t.Run("bound", func(t *testing.T) {
		off, tick := inMinute()
		hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
		a, _ := hs[0].startJob(t)
		defer func() { os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600); a.Wait() }()
		d := (time.Now().Add(off).Sub(tick) + 2*time.Second).Truncate(100 * time.Millisecond)
		done := hs[1].startStandby(t, "--start-deadline", d.String())
		end := awaitEnd(t, done, "vmB's standby")
		_, err := os.Stat(filepath.Join(hs[1].dir, "job"))
		if r := hs[1].lastRow(t); end.code != 0 || err == nil || r.Status != "skipped" || !strings.Contains(end.errs, "not taken over") {
			t.Fatalf("vmB: exit %d, row %+v, job ran %v, stderr %q; want skipped with a line", end.code, r, err == nil, end.errs)
		}
	})
	t.Run("min-hold", func(t *testing.T) {
		off, _ := inMinute()
		hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
		a, aID := hs[0].startJob(t, "--min-hold", "1m")
		done := hs[1].startStandby(t)
		os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600)
		a.Wait()
		end := awaitEnd(t, done, "vmB's standby")
		_, err := os.Stat(filepath.Join(hs[1].dir, "job"))
		if r := hs[1].lastRow(t); end.code != 0 || err == nil || r.Status != "skipped" || !strings.Contains(r.Error, aID) || !strings.Contains(r.Error, "succeeded") {
			t.Fatalf("vmB: exit %d, row %+v, job ran %v; want skipped naming %s and succeeded", end.code, r, err == nil, aID)
		}
	})
}

// TestStandbyFrozenPastBound: a standby frozen (SIGSTOP, a suspended VM) while the tick's
// run is lost, and woken after its bound (--start-deadline) with the lost run's lock free,
// ends skipped: before, it asked once more on waking and took the tick over late, its job
// started past the deadline. Local backend, whose host clock judges the deadline.
func TestStandbyFrozenPastBound(t *testing.T) {
	off, tick := inMinute()
	locks := filepath.Join(t.TempDir(), "locks")
	hs := standbyFleet(t, "", off, "cronA", "cronB")
	for _, h := range hs {
		h.env = append(h.env, "CRONLOCK_BACKEND=local", "CRONLOCK_LOCK_DIR="+locks)
	}
	a, _ := hs[0].startJob(t)
	defer func() { os.WriteFile(filepath.Join(hs[0].dir, "stop"), nil, 0o600); a.Wait() }()
	deadline := (time.Now().Add(off).Sub(tick) + 3*time.Second).Truncate(100 * time.Millisecond)
	b, done, errs := hs[1].tryStandbyCmd(t, "", "--start-deadline", deadline.String())
	if done == nil {
		t.Fatalf("cronB did not become a standby: %q", errs)
	}
	defer b.Process.Kill()
	// Frozen while it waits between two asks, not on its way into the first (which checks
	// the bound first): once it has read its tick file again after saying it waits.
	reads := func() string {
		io, _ := os.ReadFile("/proc/" + strconv.Itoa(b.Process.Pid) + "/io")
		_, after, _ := strings.Cut(string(io), "syscr:")
		n, _, _ := strings.Cut(after, "\n")
		return n
	}
	first := reads()
	waitUntil(t, 20*time.Second, "cronB asking again", func() bool { return reads() != first })
	if err := b.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	a.Process.Kill() // cronA's host is lost: its guard stops the job and frees the lock
	a.Wait()
	waitUntil(t, 20*time.Second, "cronA's lock free", func() bool {
		_, out, _ := hs[0].run("status", "--key", "bill")
		return strings.Contains(out, "bill is not held")
	})
	waitUntil(t, 20*time.Second, "the clock past tick + --start-deadline", func() bool {
		return time.Now().Add(off).After(tick.Add(deadline + 100*time.Millisecond))
	})
	b.Process.Signal(syscall.SIGCONT)
	end := awaitEnd(t, done, "cronB's standby")
	_, err := os.Stat(filepath.Join(hs[1].dir, "job"))
	if r := hs[1].lastRow(t); end.code != 0 || err == nil || r.Status != "skipped" || !strings.Contains(end.errs, "not taken over") {
		t.Fatalf("cronB woken past its bound: exit %d, row %+v, job ran %v, stderr %q; want skipped with a line, no job", end.code, r, err == nil, end.errs)
	}
}

// TestStandbyHungHolder: a run stopped by --heartbeat-timeout (its job saved no
// checkpoint in time: hung) is taken over by a plain --standby, as a lost run is; one
// stopped by --timeout is not (the tick had its time).
func TestStandbyHungHolder(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct{ backend, stop string }{{"redis", "--heartbeat-timeout"}, {"redis", "--timeout"},
		{"local", "--heartbeat-timeout"}, {"local", "--timeout"}} {
		stop := tc.stop
		t.Run(tc.backend+stop, func(t *testing.T) {
			off, _ := inMinute()
			hs := standbyFleet(t, "redis://"+srv.Addr+"/"+map[string]string{"--timeout": "1"}[stop], off, "vmA", "vmB")
			if tc.backend == "local" {
				locks := filepath.Join(t.TempDir(), "locks")
				for _, h := range hs {
					h.env = append(h.env, "CRONLOCK_BACKEND=local", "CRONLOCK_LOCK_DIR="+locks)
				}
			}
			a, aID := hs[0].startJob(t, stop, "3s")
			done := hs[1].startStandby(t)
			code := hs[0].exitCode(a.Wait())
			end := awaitEnd(t, done, "vmB's standby")
			b, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
			took := strings.HasPrefix(string(b), "2 "+aID)
			if code != 124 || end.code != 0 || took != (stop == "--heartbeat-timeout") {
				t.Fatalf("vmA exit %d; vmB exit %d, job saw %q, stderr %q; want vmA 124 and a takeover of %s only after %s",
					code, end.code, b, end.errs, aID, "--heartbeat-timeout")
			}
		})
	}
}
