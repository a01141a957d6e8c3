package cmd

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
	"cronlock/runview"
)

// Tests of the fleet's ledger through the built binary, against a
// real Redis.

// waitLockGone waits for key's lock to expire on the Redis clock, on the shared server or
// on addr.
func waitLockGone(t *testing.T, c *cli, key string, addr ...string) {
	t.Helper()
	lock := sibling(c, key, "lock")
	server := redistest.Addr(t)
	if len(addr) > 0 {
		server = addr[0]
	}
	waitUntil(t, 20*time.Second, "the lock to expire", func() bool {
		v, _ := redistest.Do(server, "EXISTS", lock)
		return v == "0"
	})
}

// TestLedgerAbandonedStays: a run whose cronlock is SIGKILLed mid-job stays in the
// fleet's record as abandoned, with its tick, after the next tick was claimed by another
// host (the claim used to overwrite the only trace of it).
func TestLedgerAbandonedStays(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB")
	off, tick := inMinute()
	a := hosts[0]
	// vmA's clock a minute behind: its tick is the one before vmB's.
	a.env = append(a.env, "CRONLOCK_TEST_CLOCK_OFFSET="+(off-time.Minute).String())
	run, _, _ := a.startHolding([]string{"run", "-k", "billing", "--ttl", "1s", "--max-skew", "0", "--schedule", "* * * * *"})
	run.Process.Kill()
	run.Wait()
	waitLockGone(t, a.cli, "billing")
	if code, _, errs := hosts[1].at(off, "run", "-k", "billing", "--schedule", "* * * * *", "--", "true"); code != 0 {
		t.Fatalf("vmB: exit %d (%s)", code, errs)
	}
	rows := fleetRows(t, monitor(t, a), "--key", "billing")
	var got []string
	for _, r := range rows {
		s := r.Node + ":" + r.Status
		if r.ScheduledFor != nil {
			s += "@" + *r.ScheduledFor
		}
		got = append(got, s)
	}
	want := "vmB:succeeded@" + rfc(tick) + " vmA:abandoned@" + rfc(tick.Add(-time.Minute))
	if strings.Join(got, " ") != want {
		t.Fatalf("history --fleet: %s; want %s", strings.Join(got, " "), want)
	}
	if rows[1].FinishedAt != nil || rows[1].FencingToken == 0 {
		t.Errorf("abandoned entry %+v: want no end and the fencing token of its claim", rows[1])
	}
}

// TestLedgerTrimKeepsLastSuccess: with CRONLOCK_FLEET_KEEP=2, a success followed by two
// refusals keeps its entry (the key's last success is never trimmed) and stays a
// success: it does not turn into abandoned, and check is not CRITICAL.
func TestLedgerTrimKeepsLastSuccess(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB", "vmC")
	for _, h := range hosts {
		h.env = append(h.env, "CRONLOCK_FLEET_KEEP=2")
	}
	off, tick := inMinute()
	sched := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--", "true"}
	if code, _, errs := hosts[0].at(off, sched...); code != 0 {
		t.Fatalf("vmA: exit %d (%s)", code, errs)
	}
	for _, h := range hosts[1:] {
		if code, _, errs := h.at(off+45*time.Second, sched...); code != 125 {
			t.Fatalf("%s 45 s ahead: exit %d (%s); want 125", h.node, code, errs)
		}
	}
	m := monitor(t, hosts[0])
	rows := fleetRows(t, m, "--key", "billing")
	var got []string
	for _, r := range rows {
		got = append(got, r.Node+":"+r.Status)
	}
	if strings.Join(got, " ") != "vmC:error vmA:succeeded" {
		t.Fatalf("history --fleet: %s; want vmC:error vmA:succeeded (KEEP=2, the last success kept)", strings.Join(got, " "))
	}
	if r := rows[1]; r.ScheduledFor == nil || *r.ScheduledFor != rfc(tick) || r.FinishedAt == nil || r.Exit == nil || *r.Exit != 0 {
		t.Errorf("the success's entry %+v; want whole: its tick %s, an end, exit 0", r, rfc(tick))
	}
	if n := checkEntrySizes(t, m, "billing"); n != 2 {
		t.Errorf("%d entries kept; want 2", n)
	}
	if code, out := hosts[0].check(off, "--key", "billing", "--schedule", "* * * * *"); code == 2 {
		t.Errorf("check: exit %d, %s; the success was not abandoned", code, out)
	}
}

// TestLedgerKeysWithoutEntries: history --fleet and history stats --fleet without --key
// find a key whose only run is running, and then abandoned.
func TestLedgerKeysWithoutEntries(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA")
	h := hosts[0]
	m := monitor(t, h)
	run, _, _ := h.startHolding([]string{"run", "-k", "billing", "--ttl", "1s"})
	defer run.Process.Kill()
	for _, want := range []string{"running", "abandoned"} {
		rows := fleetRows(t, m)
		if len(rows) != 1 || rows[0].Key != "billing" || rows[0].Status != want || rows[0].Node != "vmA" {
			t.Fatalf("history --fleet without --key: %+v; want one %s run of billing on vmA", rows, want)
		}
		code, out, errs := m.run("history", "stats", "--fleet", "--json")
		var st runview.StatsJSON
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Key != "billing" || st.Runs != 1 {
			t.Fatalf("history stats --fleet --json (exit %d, %s): %s; want the one run of billing", code, errs, out)
		}
		if want == "running" {
			run.Process.Kill() // SIGKILL: no release, no completion
			run.Wait()
			waitLockGone(t, h.cli, "billing")
		}
	}
}

// TestLedgerMissedAfterWait: a --wait that ends at tick + --start-deadline as missed has
// its entry in the fleet's record, with its tick and its reason, as the direct missed
// path has.
func TestLedgerMissedAfterWait(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB")
	holder, _, release := hosts[0].startHolding([]string{"run", "-k", "billing"})
	defer func() { release(); holder.Wait() }()
	now := time.Now()
	off := now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now) // 1 s after a tick
	tick := now.Add(off).Truncate(time.Minute)
	code, _, errs := hosts[1].at(off, "run", "-k", "billing", "--schedule", "* * * * *", "--max-skew", "0",
		"--wait", "1m", "--start-deadline", "2s", "--", "true")
	if code != 0 || !strings.Contains(errs, "missed the") {
		t.Fatalf("exit %d, stderr %q; want 0 and the missed line", code, errs)
	}
	rows := fleetRows(t, monitor(t, hosts[0]), "--key", "billing")
	var missed []fleetRow
	for _, r := range rows {
		if r.Status == "missed" {
			missed = append(missed, r)
		}
	}
	if len(missed) != 1 || missed[0].Node != "vmB" || missed[0].ScheduledFor == nil || *missed[0].ScheduledFor != rfc(tick) ||
		!strings.Contains(missed[0].Error, "--start-deadline") || missed[0].FinishedAt == nil {
		t.Fatalf("entries %+v; want one missed entry of vmB for %s, with its reason", rows, rfc(tick))
	}
}

// TestLedgerCompletionKeptAndSent: a run whose release, and the retry of its completion,
// get no answer (the network to Redis black-holed as the job ends) keeps its completion in
// the host's history; the host's next run of the key sends it inside its own release (no
// extra round trip), and both runs end completed in the fleet's record.
func TestLedgerCompletionKeptAndSent(t *testing.T) {
	// The next run is long enough for the history to be open at its release (the
	// completion then travels in the release), or as short as a run gets (it may be read
	// too late for the release: then one more round trip after it delivers it).
	for _, next := range [][]string{{"sleep", "0.3"}, {"true"}} {
		t.Run(next[0], func(t *testing.T) { completionKeptAndSent(t, next) })
	}
}

func completionKeptAndSent(t *testing.T, next []string) {
	srv := redistest.Start(t)
	p, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := newCLI(t, "redis://"+p.Addr+"/0")
	c.env = append(c.env, "CRONLOCK_REDIS_TIMEOUT=300ms")
	m := newCLI(t, "redis://"+srv.Addr+"/0")
	m.env = append(m.env, "CRONLOCK_HISTORY=off", prefixOf(c))
	if code, _, errs := c.run("run", "-k", "warm", "--", "true"); code != 0 { // loads the scripts
		t.Fatalf("warm-up: exit %d (%s)", code, errs)
	}
	a, errA, release := c.startHolding([]string{"run", "-k", "pend", "--ttl", "3s"})
	p.Set(faultproxy.Blackhole, 0)
	release()
	if err := a.Wait(); err != nil {
		t.Fatalf("run A: %v (%s); want exit 0: a lost completion never changes the outcome", err, errA)
	}
	if !strings.Contains(errA.String(), "next run of pend sends it") {
		t.Errorf("run A's stderr %q; want the warning that its next run sends its end", errA.String())
	}
	p.Set(faultproxy.Pass, 0)
	waitLockGone(t, m, "pend", srv.Addr)
	rows := fleetRows(t, m, "--key", "pend")
	if len(rows) != 1 || rows[0].Status != "abandoned" {
		t.Fatalf("after the lost release: %+v; want run A's claim, abandoned", rows)
	}
	idA := rows[0].ID
	before := len(p.Turns())
	if code, _, errs := c.run(append([]string{"run", "-k", "pend", "--"}, next...)...); code != 0 {
		t.Fatalf("run B: exit %d (%s)", code, errs)
	}
	got := strings.Join(turnCommands(t, p.Turns()[before:]), " | ")
	if got != "EVALSHA | EVALSHA" && (next[0] == "sleep" || got != "EVALSHA | EVALSHA | EVALSHA") {
		t.Errorf("run B sent %q; want its acquire and its release alone (or, read too late, one more)", got)
	}
	t.Logf("run B sent %q", got)
	rows = fleetRows(t, m, "--key", "pend")
	if len(rows) != 2 {
		t.Fatalf("entries %+v; want runs A and B", rows)
	}
	for _, r := range rows {
		if r.Status != "succeeded" || r.FinishedAt == nil || r.Exit == nil || *r.Exit != 0 {
			t.Errorf("entry %+v; want succeeded and completed", r)
		}
	}
	if rows[1].ID != idA {
		t.Errorf("oldest entry %s; want run A's %s", rows[1].ID, idA)
	}
	// Delivered: the next run sends nothing more (and finds nothing to complete).
	if code, _, errs := c.run("run", "-k", "pend", "--", "sleep", "0.3"); code != 0 || errs != "" {
		t.Fatalf("run C: exit %d (%s)", code, errs)
	}
	if n := len(fleetRows(t, m, "--key", "pend")); n != 3 {
		t.Errorf("%d entries; want 3", n)
	}
}

// TestLedgerMinReplicasShortfallKeepsTheTick: every host runs with --min-replicas 1 while
// the only replica is stopped, their crons 0.4 s apart. A host that finds the tick's
// claim still waiting for its WAIT waits for it instead of skipping; each claim falls
// short, gives the tick back and ends error (125) with its entry in the fleet's record:
// no host skips the tick in silence.
func TestLedgerMinReplicasShortfallKeepsTheTick(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port), "--repl-diskless-sync-delay", "0")
	waitUntil(t, 10*time.Second, "the master to count its replica online", func() bool {
		info, err := master.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "state=online")
	})
	replica.Stop()
	defer replica.Cont()
	off, tick := inMinute()
	var hosts []*cli
	for _, n := range []string{"vmA", "vmB", "vmC"} {
		c := newCLI(t, "redis://"+master.Addr+"/0")
		c.env = append(c.env, "CRONLOCK_NODE="+n, "CRONLOCK_TEST_CLOCK_OFFSET="+off.String(), "CRONLOCK_PREFIX=short:")
		hosts = append(hosts, c)
	}
	type result struct {
		code int
		errs string
	}
	results := make([]chan result, len(hosts))
	for i, h := range hosts {
		results[i] = make(chan result, 1)
		go func() {
			code, _, errs := h.run("run", "-k", "billing", "--schedule", "* * * * *", "--min-replicas", "1",
				"--redis-timeout", "500ms", "--", "true")
			results[i] <- result{code, errs}
		}()
		time.Sleep(400 * time.Millisecond) // the crons of the scenario fire 0.4 s apart
	}
	for i, ch := range results {
		r := <-ch
		if r.code != 125 || !strings.Contains(r.errs, "replicas acknowledged") {
			t.Errorf("host %d: exit %d, stderr %q; want 125 and the shortfall's line (never a silent skip)", i, r.code, r.errs)
		}
	}
	m := newCLI(t, "redis://"+master.Addr+"/0")
	m.env = append(m.env, "CRONLOCK_HISTORY=off", "CRONLOCK_PREFIX=short:")
	rows := fleetRows(t, m, "--key", "billing")
	nodes := map[string]bool{}
	for _, r := range rows {
		if r.Status != "error" || r.ScheduledFor == nil || *r.ScheduledFor != rfc(tick) || !strings.Contains(r.Error, "replicas acknowledged") || r.FinishedAt == nil {
			t.Errorf("entry %+v; want error for %s with the shortfall's reason", r, rfc(tick))
		}
		nodes[r.Node] = true
	}
	if len(rows) != 3 || len(nodes) != 3 {
		t.Fatalf("entries %+v; want one error entry of each host", rows)
	}
}

// TestLedgerStatsBeyondKeep: history stats --fleet counts with the per-day counters, so
// its success rate covers runs whose entries were trimmed (CRONLOCK_FLEET_KEEP=3).
func TestLedgerStatsBeyondKeep(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA")
	h := hosts[0]
	h.env = append(h.env, "CRONLOCK_FLEET_KEEP=3")
	for _, job := range []string{"true", "false", "true", "false", "true", "true"} {
		h.run("run", "-k", "billing", "--", job)
	}
	if n := len(ledgerEntries(t, h.cli, "billing")); n > 4 {
		t.Errorf("%d entries kept; want KEEP=3 (and the last failure)", n)
	}
	m := monitor(t, h)
	code, out, errs := m.run("history", "stats", "--fleet", "--json")
	var st runview.StatsJSON
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Runs != 6 || st.Succeeded != 4 || st.Failed != 2 ||
		st.SuccessRate == nil || *st.SuccessRate < 0.66 || *st.SuccessRate > 0.67 {
		t.Errorf("history stats --fleet --json (exit %d, %s): %s; want 6 runs, 4 succeeded, 2 failed", code, errs, out)
	}
}
