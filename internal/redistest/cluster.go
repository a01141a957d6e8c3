package redistest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartClusterReplicas starts a Cluster of three masters with n replicas each (3×(1+n)
// redis-server processes) on free loopback ports, stopped when the test ends. Every
// slot is served, and every replica is in sync and counted by its master (in WAIT too),
// when it returns. With replicas, a master is seen failed after 1s (cluster-node-timeout)
// and one of its replicas promoted a moment later, so a test of a failover stays short.
// A --requirepass among extra is every node's password.
func StartClusterReplicas(t testing.TB, n int, extra ...string) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		missing(t, "redis-cli is not installed (apt-get install redis-tools)")
	}
	timeout := "2000"
	if n > 0 {
		timeout = "1000"
	}
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", timeout, "--repl-diskless-sync-delay", "0"}
	var all []*Server
	var addrs []string
	for i := 0; i < 3*(1+n); i++ {
		s := Start(t, append(append([]string{}, args...), extra...)...)
		all = append(all, s)
		addrs = append(addrs, s.Addr)
	}
	create := append([]string{"--cluster", "create"}, addrs...)
	create = append(create, "--cluster-replicas", strconv.Itoa(n), "--cluster-yes")
	if pw := all[0].Password; pw != "" {
		// A cluster whose nodes need a password (with --masterauth for the replicas).
		create = append(create, "-a", pw, "--no-auth-warning")
	}
	if out, err := exec.Command(cli, create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c := &Cluster{Nodes: all}
	waitFor(t, 15*time.Second, "every node to report cluster_state:ok", func() bool {
		for _, s := range all {
			info, err := s.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	if n == 0 {
		return c
	}
	// redis-cli chooses which nodes are masters: put them first.
	var masters, replicas []*Server
	waitFor(t, 15*time.Second, "every master to count its replicas online", func() bool {
		masters, replicas = masters[:0], replicas[:0]
		for _, s := range all {
			info, err := s.Do("INFO", "replication")
			switch {
			case err != nil:
				return false
			case strings.Contains(info, "role:master"):
				if strings.Count(info, "state=online") != n {
					return false
				}
				masters = append(masters, s)
			case strings.Contains(info, "master_link_status:up"):
				replicas = append(replicas, s)
			default:
				return false
			}
		}
		return len(masters) == 3
	})
	c.Nodes = append(masters, replicas...)
	return c
}

// Node is the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// MasterOf is the node that serves key's slot now, as the first node that answers
// says, or nil when none knows one.
func (c *Cluster) MasterOf(key string) *Server {
	for _, s := range c.Nodes {
		slot, err := s.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		nodes, err := s.Do("CLUSTER", "NODES")
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(slot)
		return c.Node(slotMaster(nodes, n))
	}
	return nil
}

// slotMaster reads CLUSTER NODES text: the address of the master, not marked failed,
// whose ranges include slot.
func slotMaster(nodes string, slot int) string {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				addr, _, _ := strings.Cut(f[1], "@")
				return addr
			}
		}
	}
	return ""
}

// WaitPromoted waits until a node other than old serves key's slot and every node
// still running reports cluster_state:ok.
func (c *Cluster) WaitPromoted(t testing.TB, key string, old *Server) *Server {
	t.Helper()
	var now *Server
	waitFor(t, 20*time.Second, "the cluster to promote a replica", func() bool {
		now = c.MasterOf(key)
		if now == nil || now == old {
			return false
		}
		for _, s := range c.Nodes {
			if s == old || s.cmd == nil {
				continue
			}
			info, err := s.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	return now
}

// MigrateSlot moves slot from the master from to the master to as redis-cli --cluster
// reshard does: SETSLOT IMPORTING on to, MIGRATING on from, MIGRATE of the slot's keys
// batch at a time, then SETSLOT NODE on to, on from and on the other masters. Before each
// batch, between (when not nil) is told how many keys have moved: a test holds the slot
// half-way there for a while, or leaves it so (a reshard that died) by returning false.
// Called again on a slot left half-way, it finishes the move.
func (c *Cluster) MigrateSlot(slot int, from, to *Server, batch int, between func(moved int) bool) error {
	s := strconv.Itoa(slot)
	fromID, err := from.Do("CLUSTER", "MYID")
	if err != nil {
		return err
	}
	toID, err := to.Do("CLUSTER", "MYID")
	if err != nil {
		return err
	}
	if _, err := to.Do("CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return fmt.Errorf("SETSLOT IMPORTING on %s: %w", to.Addr, err)
	}
	if _, err := from.Do("CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		return fmt.Errorf("SETSLOT MIGRATING on %s: %w", from.Addr, err)
	}
	host, port, _ := strings.Cut(to.Addr, ":")
	for moved := 0; ; {
		if between != nil && !between(moved) {
			return nil
		}
		out, err := from.Do("CLUSTER", "GETKEYSINSLOT", s, strconv.Itoa(batch))
		if err != nil {
			return err
		}
		keys := strings.Fields(out)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", "5000"}
		if to.Password != "" {
			args = append(args, "AUTH", to.Password)
		}
		// A key gone meanwhile is NOKEY, not an error.
		if got, err := from.Do(append(append(args, "KEYS"), keys...)...); err != nil || (got != "OK" && got != "NOKEY") {
			return fmt.Errorf("MIGRATE %v from %s: %q %v", keys, from.Addr, got, err)
		}
		moved += len(keys)
	}
	others := []*Server{to, from}
	for _, n := range c.Nodes {
		if n != to && n != from && n.cmd != nil {
			if info, err := n.Do("INFO", "replication"); err == nil && strings.Contains(info, "role:master") {
				others = append(others, n)
			}
		}
	}
	for _, n := range others {
		if _, err := n.Do("CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			return fmt.Errorf("SETSLOT NODE on %s: %w", n.Addr, err)
		}
	}
	return nil
}
