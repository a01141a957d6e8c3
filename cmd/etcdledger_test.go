//go:build etcd

package cmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/internal/etcdtest"
	"cronlock/internal/proctest"
)

// Tests of the fleet's record on etcd as a ledger (README, "etcd backend"): an entry per
// run from its claim, completed by its release, never rewritten by another run's claim.

// etcdHosts are hosts of one fleet on srv: one prefix, one node name each.
func etcdHosts(t *testing.T, srv *etcdtest.Server, nodes ...string) []*fleetHost {
	t.Helper()
	var hosts []*fleetHost
	for i, n := range nodes {
		c := newEtcdCLI(t, srv)
		c.env = append(c.env, "CRONLOCK_NODE="+n)
		if i > 0 {
			c.env = append(c.env, "CRONLOCK_PREFIX="+envOf(hosts[0].env, "CRONLOCK_PREFIX"))
		}
		hosts = append(hosts, &fleetHost{cli: c, node: n})
	}
	return hosts
}

// waitEtcdKeyGone returns once key is absent from srv (a lease that ran out).
func waitEtcdKeyGone(t *testing.T, srv *etcdtest.Server, key string) {
	t.Helper()
	root := srv.Root()
	for i := 0; ; i++ {
		resp, err := root.Get(context.Background(), key)
		if err == nil && len(resp.Kvs) == 0 {
			return
		}
		if i > 1000 {
			t.Fatalf("%s is still there", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEtcdLedgerAbandonedStaysVisible: a run SIGKILLed while it holds the lock is running
// in the fleet's record from its claim, abandoned once its lease ends, and stays so after
// the next tick is claimed (which used to overwrite the only trace of it, the tick record).
// history --fleet without --key finds the key while its only run is running or abandoned.
func TestEtcdLedgerAbandonedStaysVisible(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "vmA", "vmB")
	a, b := hosts[0], hosts[1]
	off, tick := inMinute()
	started := filepath.Join(a.dir, "started")
	run := a.command("run", "-k", "billing", "--ttl", "1s", "--schedule", "* * * * *", "--", "sh", "-c", "touch "+started+"; sleep 60")
	run.Env = append(run.Env, "CRONLOCK_TEST_CLOCK_OFFSET="+off.String())
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	proctest.WaitFile(t, started)
	for _, args := range [][]string{{"--key", "billing"}, {}} {
		rows := fleetRows(t, b.cli, args...)
		if len(rows) != 1 || rows[0].Status != "running" || rows[0].Node != "vmA" || rows[0].ScheduledFor == nil || *rows[0].ScheduledFor != rfc(tick) || rows[0].FencingToken == 0 {
			t.Fatalf("history --fleet %v while vmA runs: %+v; want its running entry for %s, with its token", args, rows, rfc(tick))
		}
	}
	run.Process.Kill()
	run.Wait()
	waitEtcdKeyGone(t, srv, envOf(a.env, "CRONLOCK_PREFIX")+"{billing}:lock")
	if rows := fleetRows(t, b.cli); len(rows) != 1 || rows[0].Status != "abandoned" || rows[0].Node != "vmA" {
		t.Fatalf("history --fleet (no --key) after the kill: %+v; want vmA's run abandoned", rows)
	}
	// The next tick, on another host.
	if code, _, errs := b.at(off+time.Minute, "run", "-k", "billing", "--schedule", "* * * * *", "--", "true"); code != 0 {
		t.Fatalf("next tick: exit %d: %s", code, errs)
	}
	rows := fleetRows(t, b.cli, "--key", "billing")
	if len(rows) != 2 || rows[0].Status != "succeeded" || rows[0].Node != "vmB" ||
		rows[1].Status != "abandoned" || rows[1].Node != "vmA" || rows[1].ScheduledFor == nil || *rows[1].ScheduledFor != rfc(tick) || rows[1].Duplicate {
		t.Fatalf("after the next tick's claim: %+v; want vmB's success and vmA's abandoned run of %s, no DUPLICATE", rows, rfc(tick))
	}
}

// TestEtcdLedgerKeepTwo: with CRONLOCK_FLEET_KEEP=2, failures after a success trim the
// record, but never the key's last success (which used to be trimmed and then read as an
// abandoned claim), nor its last failure, nor a running entry.
func TestEtcdLedgerKeepTwo(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "vmA", "vmB")
	a, b := hosts[0], hosts[1]
	for _, h := range hosts {
		h.env = append(h.env, "CRONLOCK_FLEET_KEEP=2")
	}
	if code, _, errs := a.run("run", "-k", "keep", "--schedule", "@yearly", "--", "true"); code != 0 {
		t.Fatalf("success: exit %d: %s", code, errs)
	}
	for i := range 4 {
		if code, _, errs := a.run("run", "-k", "keep", "--", "sh", "-c", "exit 3"); code != 3 {
			t.Fatalf("failure %d: exit %d: %s", i, code, errs)
		}
	}
	rows := fleetRows(t, b.cli, "--key", "keep")
	var ok, failed int
	for _, r := range rows {
		switch r.Status {
		case "succeeded":
			ok++
		case "failed":
			failed++
		default:
			t.Errorf("entry %+v: want only the success and failures", r)
		}
	}
	if ok != 1 || failed < 1 || len(rows) > 3 {
		t.Fatalf("entries %+v: want the success kept, and the record trimmed to 2 (3 before the next trim)", rows)
	}
	if code, out, _ := b.run("check", "--key", "keep"); strings.Contains(out, "abandoned") {
		t.Fatalf("check: exit %d, %q: no run was abandoned", code, out)
	}

	// A running entry outlives trims made by other hosts' missed entries: when its run
	// then dies, it is there to say so.
	holder, _, _ := a.startHolding([]string{"run", "-k", "keep", "--ttl", "1s"})
	defer holder.Process.Kill()
	off, _ := inMinute()
	for i := 1; i <= 4; i++ {
		// Each a minute later, 2s or more past its tick: missed, each claiming its own tick.
		code, _, errs := b.at(off+time.Duration(i)*time.Minute, "run", "-k", "keep", "--schedule", "* * * * *", "--start-deadline", "1s", "--", "true")
		if code != 0 || !strings.Contains(errs, "missed") {
			t.Fatalf("missed run %d: exit %d, %q", i, code, errs)
		}
	}
	holder.Process.Kill()
	holder.Wait()
	waitEtcdKeyGone(t, srv, envOf(a.env, "CRONLOCK_PREFIX")+"{keep}:lock")
	rows = fleetRows(t, b.cli, "--key", "keep")
	abandoned := 0
	for _, r := range rows {
		if r.Status == "abandoned" && r.Node == "vmA" {
			abandoned++
		}
		if r.Version == "" {
			t.Errorf("entry %+v: no cronlock version (written at the claim and kept by the completion)", r)
		}
	}
	if abandoned != 1 || len(rows) > 4 {
		t.Fatalf("entries %+v: want vmA's run, killed while it held the lock, kept through the trims (abandoned), the record bounded", rows)
	}
}

// TestEtcdLedgerMissedAfterWait: a --wait cut short at tick + --start-deadline ends as
// missed, and its entry is in the fleet's record, with its tick.
func TestEtcdLedgerMissedAfterWait(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "vmA", "vmB")
	a, b := hosts[0], hosts[1]
	holder, errb, release := a.startHolding([]string{"run", "-k", "mw"})
	defer release()
	// vmB's clock 300ms past a minute: its tick is that minute, its deadline 1.5s later.
	now := time.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	off := next.Sub(now) + 300*time.Millisecond
	tick := next.UTC()
	code, _, errs := b.at(off, "run", "-k", "mw", "--schedule", "* * * * *", "--start-deadline", "1500ms", "--wait", "30s", "--", "true")
	if code != 0 || !strings.Contains(errs, "missed") {
		t.Fatalf("waiter: exit %d, %q; want 0 and a line saying it missed its tick", code, errs)
	}
	rows := fleetRows(t, a.cli, "--key", "mw")
	var found bool
	for _, r := range rows {
		if r.Node == "vmB" && r.Status == "missed" && r.ScheduledFor != nil && *r.ScheduledFor == rfc(tick) && r.Exit != nil {
			found = true
		}
	}
	if !found {
		t.Fatalf("entries %+v: want vmB's missed entry for %s", rows, rfc(tick))
	}
	release()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v, %s", err, errb)
	}
}
