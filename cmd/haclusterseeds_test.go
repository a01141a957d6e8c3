package cmd

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"cronlock/internal/redistest"
)

// TestClusterSeedsDownOrFrozen: a redis-cluster:// URL that names a node that is down
// (nothing listens) and one that is frozen (it accepts and never answers, as a stopped
// process or a hung host does) besides a live one: every run finds the slot map through
// the live node, whichever order the nodes are asked in.
func TestClusterSeedsDownOrFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	frozen, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel does
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	c := newCLI(t, fmt.Sprintf("redis-cluster://127.0.0.1:%d,%s,%s", redistest.FreePort(t), frozen.Addr(), cl.Nodes[0].Addr))
	// go-redis asks the nodes in a random order: over six runs, the live node comes
	// last in some.
	for i := range 6 {
		if code, _, errs := c.run("run", "-k", "seeds", "--redis-timeout", "1s", "--", "true"); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errs)
		}
	}
}

// TestClusterMasterFrozenNamed: status and history --fleet walk every master; one that
// never answers (SIGSTOP) fails them within the time-out with one line naming it.
func TestClusterMasterFrozenNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	frozen := cl.Nodes[2]
	c := newCLI(t, cl.URL())
	if code, _, errs := c.run("run", "-k", "fz", "--", "true"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	frozen.Stop()
	defer frozen.Cont()
	for _, args := range [][]string{{"status"}, {"history", "--fleet"}} {
		code, _, errs := c.run(append(args, "--redis-timeout", "1s")...)
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "the master "+frozen.Addr) {
			t.Errorf("%s: exit %d, stderr %q: want 125 and one line naming %s", args[0], code, errs, frozen.Addr)
		}
	}
}
