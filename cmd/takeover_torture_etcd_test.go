//go:build etcd

package cmd

import (
	"strings"
	"testing"

	"cronlock/internal/etcdtest"
	"cronlock/internal/faultproxy"
)

// TestEtcdTakeoverTorture is TestTakeoverTorture on etcd: each host reaches the server
// through its own faultproxy, so that a partition cuts off the holder's host alone.
func TestEtcdTakeoverTorture(t *testing.T) {
	length := takeoverLength(t)
	srv := etcdtest.Start(t, etcdtest.Options{})
	var proxies []*faultproxy.Proxy
	for range toHosts {
		p, err := faultproxy.Start(strings.TrimPrefix(srv.Endpoint, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
	}
	runTakeoverTorture(t, toBackend{
		name: "etcd",
		env: func(h int) []string {
			return []string{"CRONLOCK_BACKEND=etcd", "CRONLOCK_ETCD_ENDPOINTS=http://" + proxies[h].Addr}
		},
		flags: []string{"--redis-timeout", "400ms"},
		cut:   proxyCut(proxies),
	}, length)
}
