package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
)

// SentinelNet is a Sentinel deployment wired for real partitions on loopback: every
// connection to the master (the Sentinels', the replicas' and the clients', which go
// where the Sentinels say) passes through MasterProxy, and the Sentinels reach each
// replica through its proxy (the replica announces the proxy's port), so a test can cut
// the master, the processes it chooses and some replicas off from the rest. The Sentinels
// talk to each other directly, and a client reaches them where its URL says (ProxiedURL).
type SentinelNet struct {
	*Sentinel
	MasterProxy    *faultproxy.Proxy   // the master's address as the Sentinels name it
	ReplicaProxies []*faultproxy.Proxy // in the order of Replicas
}

// StartSentinelNet starts a SentinelNet with n replicas, in sync when it returns.
func StartSentinelNet(t testing.TB, n int, extra ...string) *SentinelNet {
	t.Helper()
	bin := serverBinary(t)
	d := &SentinelNet{Sentinel: &Sentinel{Name: "mymaster", t: t}}
	extra = append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
	d.Master = Start(t, extra...)
	d.MasterProxy = startProxy(t, d.Master.Addr)
	mport := strconv.Itoa(proxyPort(t, d.MasterProxy))
	for i := 0; i < n; i++ {
		r := Start(t, extra...)
		p := startProxy(t, r.Addr)
		for _, cmd := range [][]string{
			{"CONFIG", "SET", "replica-announce-port", strconv.Itoa(proxyPort(t, p))},
			{"REPLICAOF", "127.0.0.1", mport},
		} {
			if _, err := r.Do(cmd...); err != nil {
				t.Fatalf("%s on a replica: %v", strings.Join(cmd, " "), err)
			}
		}
		d.Replicas = append(d.Replicas, r)
		d.ReplicaProxies = append(d.ReplicaProxies, p)
		waitFor(t, 10*time.Second, "the replica to sync", func() bool {
			info, err := r.Do("INFO", "replication")
			return err == nil && strings.Contains(info, "master_link_status:up")
		})
	}
	d.Replica = d.Replicas[0]
	waitFor(t, 10*time.Second, "the master to see its replicas online", func() bool {
		info, err := d.Master.Do("INFO", "replication")
		return err == nil && strings.Count(info, "state=online") == n
	})
	d.startSentinels(bin, proxyPort(t, d.MasterProxy))
	return d
}

// ProxiedURL is a redis-sentinel:// URL that reaches each Sentinel through a proxy of
// its own, and the function that switches those proxies (a host cut off from the
// Sentinels: faultproxy.Blackhole; back: faultproxy.Pass).
func (d *SentinelNet) ProxiedURL() (string, func(faultproxy.Mode)) {
	d.t.Helper()
	var hosts []string
	var ps []*faultproxy.Proxy
	for _, s := range d.Sentinels {
		p := startProxy(d.t, s.Addr)
		ps = append(ps, p)
		hosts = append(hosts, p.Addr)
	}
	return "redis-sentinel://" + strings.Join(hosts, ",") + "/" + d.Name, func(m faultproxy.Mode) {
		for _, p := range ps {
			p.Set(m, 0)
		}
	}
}

// Partition cuts the master off from the Sentinels, the replicas and every client, but
// for the processes pids (a holder's cronlock) and the replicas numbered with, which
// keep replicating from it and are cut off from the Sentinels with it. Connections are
// black-holed, not closed: a silent partition. Heal ends it.
func (d *SentinelNet) Partition(with []int, pids ...int) {
	for _, i := range with {
		pids = append(pids, d.Replicas[i].PID())
		d.ReplicaProxies[i].Set(faultproxy.Blackhole, 0)
	}
	d.MasterProxy.SetPartition(func(client *net.TCPAddr) bool {
		return proctest.SocketOwnedBy(client, pids...)
	})
}

// Heal ends a Partition.
func (d *SentinelNet) Heal() {
	d.MasterProxy.Set(faultproxy.Pass, 0)
	for _, p := range d.ReplicaProxies {
		p.Set(faultproxy.Pass, 0)
	}
}

// PID is the server's process id; 0 when it is not running.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func startProxy(t testing.TB, upstream string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func proxyPort(t testing.TB, p *faultproxy.Proxy) int {
	t.Helper()
	_, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}
