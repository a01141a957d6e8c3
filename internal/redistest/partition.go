package redistest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
)

// SentinelNet is a Sentinel deployment wired for real partitions on loopback: every
// server is reached only through a faultproxy of its own (each announces its proxy's port,
// and the Sentinels monitor the master at its proxy), so every connection to a server,
// the Sentinels', the other servers' and the clients' (which go where the Sentinels say),
// passes through its proxy, whichever server is the master after failovers. A test can
// thus cut the master, the processes it chooses and some replicas off from the rest. The
// Sentinels talk to each other directly; a client reaches them where its URL says
// (ProxiedURL).
type SentinelNet struct {
	*Sentinel
	Servers []*Server           // the first master, then the replicas
	Proxies []*faultproxy.Proxy // in the order of Servers
}

// StartSentinelNet starts a SentinelNet with n replicas, in sync when it returns.
func StartSentinelNet(t testing.TB, n int, extra ...string) *SentinelNet {
	t.Helper()
	bin := serverBinary(t)
	d := &SentinelNet{Sentinel: &Sentinel{Name: "mymaster", t: t}}
	extra = append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
	for i := 0; i <= n; i++ {
		s := Start(t, extra...)
		p := startProxy(t, s.Addr)
		if _, err := s.Do("CONFIG", "SET", "replica-announce-port", strconv.Itoa(proxyPort(t, p))); err != nil {
			t.Fatalf("CONFIG SET replica-announce-port: %v", err)
		}
		d.Servers = append(d.Servers, s)
		d.Proxies = append(d.Proxies, p)
	}
	d.Master = d.Servers[0]
	mport := strconv.Itoa(proxyPort(t, d.Proxies[0]))
	for _, r := range d.Servers[1:] {
		if _, err := r.Do("REPLICAOF", "127.0.0.1", mport); err != nil {
			t.Fatalf("REPLICAOF: %v", err)
		}
		d.Replicas = append(d.Replicas, r)
		waitSynced(t, r)
	}
	d.Replica = d.Replicas[0]
	waitOnline(t, d.Master, n)
	d.startSentinels(bin, proxyPort(t, d.Proxies[0]))
	return d
}

// current is the index in Servers of the server every Sentinel names as the master; -1
// while they do not agree or cannot say.
func (d *SentinelNet) current() int {
	addr := ""
	for _, s := range d.Sentinels {
		info, err := s.Do("INFO", "sentinel")
		_, rest, ok := strings.Cut(info, "address=")
		v, _, _ := strings.Cut(rest, ",")
		if err != nil || !ok || (addr != "" && v != addr) {
			return -1
		}
		addr = v
	}
	for i, p := range d.Proxies {
		if addr == p.Addr {
			return i
		}
	}
	return -1
}

// Settled reports whether the deployment is whole again: every Sentinel names the same
// master and knows every replica and the other Sentinels, and the master has every
// replica online. A failover and a healed partition leave it unsettled for seconds.
func (d *SentinelNet) Settled() bool {
	m := d.current()
	if m < 0 {
		return false
	}
	want := fmt.Sprintf("slaves=%d,sentinels=3", len(d.Servers)-1)
	for _, s := range d.Sentinels {
		info, err := s.Do("INFO", "sentinel")
		if err != nil || !strings.Contains(info, want) {
			return false
		}
	}
	info, err := d.Servers[m].Do("INFO", "replication")
	return err == nil && strings.Contains(info, "role:master") && strings.Count(info, "state=online") == len(d.Servers)-1
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

// Partition cuts the master (the server the Sentinels name now, or the first one) off
// from the Sentinels, the other servers and every client, but for the processes that
// pids lists (asked for each connection: a holder's cronlock) and the servers with, which
// keep replicating from it and are cut off from the Sentinels with it. Connections are
// black-holed, not closed: a silent partition. Heal ends it.
func (d *SentinelNet) Partition(pids func() []int, with ...*Server) {
	m := max(d.current(), 0)
	for i, s := range d.Servers {
		for _, w := range with {
			if w == s {
				d.Proxies[i].Set(faultproxy.Blackhole, 0)
			}
		}
	}
	d.Proxies[m].SetPartition(func(client *net.TCPAddr) bool {
		owners := pids()
		for _, w := range with {
			owners = append(owners, w.PID())
		}
		return proctest.SocketOwnedBy(client, owners...)
	})
}

// Heal ends a Partition.
func (d *SentinelNet) Heal() {
	for _, p := range d.Proxies {
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
