package cmd

import (
	"path/filepath"
	"strings"
	"testing"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// What a Cluster failover does to a running job: the master of the lock's slot is
// SIGKILLed under it and the cluster promotes one of that master's replicas.

// clusterFailoverRun runs one long job on cl, kills the master of its lock's slot, and
// returns the run's exit code, history row and stderr once it ended.
func clusterFailoverRun(t *testing.T, cl *redistest.Cluster, extra ...string) (int, historyRow, string) {
	c := newCLI(t, cl.URL())
	// The job outlives the lease: it ends well only if a renewal after the failover
	// reached the promoted replica.
	args := append([]string{"run", "-k", "long", "--ttl", "9s", "--redis-timeout", "1s", "--grace", "300ms", "-v"}, extra...)
	started := filepath.Join(c.dir, "started")
	run := c.command(append(args, "--", "sh", "-c", "touch "+started+"; exec sleep 11")...)
	var errb strings.Builder
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// The job has started: the acquire, its WAIT included, is over. (The lock shows in
	// status as soon as the script ran, while a --min-replicas WAIT may still be
	// waiting: a master killed then fails the acquire itself.)
	proctest.WaitFile(t, started)
	// Every key of the lock has the hash tag {long}: one slot, one master.
	old := cl.MasterOf("{long}")
	if old == nil {
		t.Fatal("no node serves the lock's slot")
	}
	old.Kill()
	cl.WaitPromoted(t, "{long}", old)
	code := c.exitCode(run.Wait())
	rows := c.history("long")
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want one", rows)
	}
	// The release found the slot's new master: no lock is left to block the fleet
	// for a TTL, whichever way the run ended.
	if strings.Contains(errb.String(), "releasing long failed") {
		t.Fatalf("the release did not reach the slot's new master: %s", errb.String())
	}
	if _, out, errs := c.run("status", "--json"); strings.Contains(out, `"key":"long"`) {
		t.Fatalf("the lock outlived the run: %s%s; the run said %q", out, errs, errb.String())
	}
	m := newCLI(t, cl.URL())
	m.env = append(m.env, "CRONLOCK_HISTORY=off", prefixOf(c))
	settleLedger(t, []*cli{c}, m, []string{"long"}, ledgerExpect{settle: append([]string{"--redis-timeout", "1s"}, extra...)})
	return code, rows[0], errb.String()
}

// TestClusterFailoverUnderRun: without --min-replicas the run either keeps its lock on
// the promoted replica or is stopped fail-closed, and its row and exit code agree.
func TestClusterFailoverUnderRun(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Cluster failover")
	}
	cl := redistest.StartClusterReplicas(t, 1)
	code, row, errs := clusterFailoverRun(t, cl)
	keptOrStopped(t, code, row.Status, errs)
}

// TestClusterFailoverKeepsAckedLock: with --min-replicas 1 and two replicas per master,
// the promoted replica has the lock, the other one acknowledges the renewals sent to it,
// and the run follows the slot to its new master within the lease: it keeps its lock.
func TestClusterFailoverKeepsAckedLock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Cluster failover")
	}
	cl := redistest.StartClusterReplicas(t, 2)
	code, row, errs := clusterFailoverRun(t, cl, "--min-replicas", "1")
	if code != 0 || row.Status != runstatus.Succeeded {
		t.Fatalf("exit %d, status %s, stderr %q: want the lock kept through the failover", code, row.Status, errs)
	}
}
