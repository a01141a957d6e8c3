package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sentinel is a private Sentinel deployment: a master, its replicas and three Sentinels
// (quorum 2) that see a master down after 500ms.
type Sentinel struct {
	Name      string // the master's name: "mymaster"
	Master    *Server
	Replica   *Server   // the first of Replicas
	Replicas  []*Server // in sync when StartSentinel returns
	Sentinels []*Server
	t         testing.TB
}

// StartSentinel starts a Sentinel deployment with one replica on free loopback ports,
// all of it stopped when the test ends. The replica is in sync when it returns; the
// Sentinels may not know each other yet (WaitFailoverReady waits for that).
func StartSentinel(t testing.TB, extra ...string) *Sentinel {
	t.Helper()
	return StartSentinelReplicas(t, 1, extra...)
}

// StartSentinelReplicas is StartSentinel with n replicas.
func StartSentinelReplicas(t testing.TB, n int, extra ...string) *Sentinel {
	t.Helper()
	bin := serverBinary(t)
	d := &Sentinel{Name: "mymaster", t: t}
	// No 5s wait for more replicas before a full sync (the default of Redis 7), on every
	// server: a replica may become the master that the others sync from.
	extra = append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
	d.Master = Start(t, extra...)
	for i := 0; i < n; i++ {
		r := Start(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(d.Master.Port)}, extra...)...)
		d.Replicas = append(d.Replicas, r)
		waitSynced(t, r)
	}
	d.Replica = d.Replicas[0]
	waitOnline(t, d.Master, n)
	d.startSentinels(bin, d.Master.Port)
	return d
}

// startSentinels starts three Sentinels (quorum 2, down after 500ms) that monitor the
// master on 127.0.0.1:port.
func (d *Sentinel) startSentinels(bin string, port int) {
	t := d.t
	t.Helper()
	for i := 0; i < 3; i++ {
		s := &Server{t: t}
		s.startOnFreePort(bin, func() {
			s.log = filepath.Join(s.Dir, "sentinel.log")
			conf := filepath.Join(s.Dir, "sentinel.conf")
			text := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s 500
sentinel failover-timeout %s 3000
sentinel parallel-syncs %s 1
`, s.Port, s.Dir, s.log, d.Name, port, d.Name, d.Name, d.Name)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			s.args = []string{conf, "--sentinel"}
		})
		d.Sentinels = append(d.Sentinels, s)
	}
}

// URL is the redis-sentinel:// URL of the deployment.
func (d *Sentinel) URL() string {
	var hosts []string
	for _, s := range d.Sentinels {
		hosts = append(hosts, s.Addr)
	}
	return "redis-sentinel://" + strings.Join(hosts, ",") + "/" + d.Name
}

// WaitFailoverReady waits until every Sentinel knows the replicas and the other two,
// so that killing the master leads to a failover.
func (d *Sentinel) WaitFailoverReady() {
	d.t.Helper()
	want := fmt.Sprintf("slaves=%d,sentinels=3", len(d.Replicas))
	waitFor(d.t, 15*time.Second, "the Sentinels to know each other and the replicas", func() bool {
		for _, s := range d.Sentinels {
			info, err := s.Do("INFO", "sentinel")
			if err != nil || !strings.Contains(info, want) {
				return false
			}
		}
		return true
	})
}

// MasterAddr is the master's address as the first Sentinel that answers says.
func (d *Sentinel) MasterAddr() string {
	for _, s := range d.Sentinels {
		info, err := s.Do("INFO", "sentinel")
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(info, "address=")
		if ok {
			addr, _, _ := strings.Cut(rest, ",")
			return addr
		}
	}
	return ""
}

// WaitPromoted waits until the Sentinels name a master other than old.
func (d *Sentinel) WaitPromoted(old string) {
	d.t.Helper()
	waitFor(d.t, 20*time.Second, "the Sentinels to promote a new master", func() bool {
		a := d.MasterAddr()
		return a != "" && a != old
	})
}

// Cluster is a private Redis Cluster of three masters, with replicas or without
// (cluster.go).
type Cluster struct {
	Nodes []*Server // masters first, in slot order, then the replicas
}

// StartCluster starts a three-master Cluster without replicas on free loopback ports,
// stopped when the test ends; every slot is served when it returns.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterReplicas(t, 0)
}

// URL is the redis-cluster:// URL of the cluster, naming every node.
func (c *Cluster) URL() string {
	var hosts []string
	for _, s := range c.Nodes {
		hosts = append(hosts, s.Addr)
	}
	return "redis-cluster://" + strings.Join(hosts, ",")
}

func waitFor(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSynced waits for replica r's link to its master to be up.
func waitSynced(t testing.TB, r *Server) {
	t.Helper()
	waitFor(t, 10*time.Second, "the replica to sync", func() bool {
		info, err := r.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
}

// waitOnline waits for master to count n replicas online. After a diskless sync the
// master counts a replica (in WAIT too) only once the replica's first once-a-second
// REPLCONF ACK came in.
func waitOnline(t testing.TB, master *Server, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, "the master to see its replicas online", func() bool {
		info, err := master.Do("INFO", "replication")
		return err == nil && strings.Count(info, "state=online") == n
	})
}
