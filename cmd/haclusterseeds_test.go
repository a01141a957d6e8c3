package cmd

import (
	"fmt"
	"net"
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
