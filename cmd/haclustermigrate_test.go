package cmd

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// TestClusterMigrationKeepsAckedLock: the lock's slot is migrated to another master
// under a --min-replicas run (CLUSTER SETSLOT … IMPORTING/MIGRATING, then MIGRATE of its
// keys), and stays half-way for longer than the lease: the source answers ASK, and the
// renewals follow it to the target, so the run keeps its lock; once the slot is given to
// the target, a second run is skipped.
func TestClusterMigrationKeepsAckedLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterReplicas(t, 1)
	c := newCLI(t, cl.URL())
	const key = "mig"
	prefix := strings.ReplaceAll(t.Name(), "/", "-") + strconv.Itoa(os.Getpid()) + ":" // newCLI's
	lock, fence := prefix+"{"+key+"}:lock", prefix+"{"+key+"}:fence"
	run, errb, release := c.startHolding([]string{"run", "-k", key, "--ttl", "3s", "--min-replicas", "1", "--redis-timeout", "1s", "--grace", "300ms", "-v"})
	src := cl.MasterOf(lock)
	dst := cl.Nodes[0]
	if dst == src {
		dst = cl.Nodes[1]
	}
	slot := do(t, src, "CLUSTER", "KEYSLOT", lock)
	srcID, dstID := do(t, src, "CLUSTER", "MYID"), do(t, dst, "CLUSTER", "MYID")
	do(t, dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(t, src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port, _ := strings.Cut(dst.Addr, ":")
	// Every key of the lock: the lock and its counter, and the fleet's ledger.
	ledger := prefix + "{" + key + "}:"
	if got := do(t, src, "MIGRATE", host, port, "", "0", "5000", "KEYS", lock, fence, ledger+"ledger", ledger+"order", ledger+"days"); got != "OK" {
		t.Fatalf("MIGRATE: %s", got)
	}
	// Longer than the lease: only renewals that reached the target kept it.
	time.Sleep(4 * time.Second)
	for _, n := range cl.Nodes[:3] {
		do(t, n, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}
	if code, _, errs := c.run("run", "-k", key, "--conflict-exit-code", "99", "--", "true"); code != 99 {
		t.Errorf("a second run: exit %d (%s), want 99 (skipped); first run: %q", code, errs, errb.String())
	}
	release()
	code := c.exitCode(run.Wait())
	var status string
	for _, r := range c.history(key) {
		if len(r.Command) > 0 && r.Command[0] == "sh" && r.Status != runstatus.Skipped {
			status = r.Status
		}
	}
	if code != 0 || status != runstatus.Succeeded {
		t.Fatalf("exit %d, status %s, stderr %q: want the lock kept through the migration", code, status, errb.String())
	}
	m := newCLI(t, cl.URL())
	m.env = append(m.env, "CRONLOCK_HISTORY=off", prefixOf(c))
	settleLedger(t, []*cli{c}, m, []string{key}, ledgerExpect{settle: []string{"--redis-timeout", "1s", "--min-replicas", "1"}})
}

func do(t *testing.T, s *redistest.Server, args ...string) string {
	t.Helper()
	v, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%s on %s: %v", strings.Join(args, " "), s.Addr, err)
	}
	return v
}
