package cmd

import (
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// TestHABench prints what a short run costs on each form of the Redis backend: the
// commands every server and Sentinel received (INFO commandstats, less what Sentinels
// and replicas send each other) and the median time of the whole run. It measures, it
// does not judge: run it by hand for BENCHMARKS.md.
//
//	CRONLOCK_BENCH_HA=1 go test -count=1 -run TestHABench -v ./cmd
func TestHABench(t *testing.T) {
	if os.Getenv("CRONLOCK_BENCH_HA") == "" {
		t.Skip("a measurement: set CRONLOCK_BENCH_HA=1")
	}
	single := redistest.Start(t)
	sent := redistest.StartSentinel(t)
	cl := redistest.StartCluster(t)
	// A Sentinel keeps no command statistics: its requests are counted by a proxy in
	// front of the one Sentinel the URL names.
	sp := newCountingProxy(t, sent.Sentinels[0].Addr)
	sentURL := "redis-sentinel://" + sp.addr + "/" + sent.Name
	forms := []struct {
		name, url string
		extra     []string
		servers   []*redistest.Server
	}{
		{"redis://", "redis://" + single.Addr + "/0", nil, []*redistest.Server{single}},
		{"redis-sentinel://", sentURL, nil, append([]*redistest.Server{sent.Master}, sent.Sentinels...)},
		{"redis-sentinel:// --min-replicas 1", sentURL, []string{"--min-replicas", "1"}, append([]*redistest.Server{sent.Master}, sent.Sentinels...)},
		{"redis-cluster://", cl.URL(), nil, cl.Nodes},
	}
	for _, f := range forms {
		c := newCLI(t, f.url)
		args := append(append([]string{"run", "-k", "bench", "--history", "off"}, f.extra...), "--", "true")
		for _, s := range f.servers {
			s.Do("CONFIG", "RESETSTAT")
		}
		sp.requests.Store(0)
		if code, _, errs := c.run(args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", f.name, code, errs)
		}
		var cmds []string
		for _, s := range f.servers {
			cmds = append(cmds, clientCommands(t, s)...)
		}
		sort.Strings(cmds)
		if n := sp.requests.Load(); n > 0 {
			cmds = append(cmds, fmt.Sprintf("Sentinel requests×%d", n))
		}
		var ds []time.Duration
		for range 30 {
			start := time.Now()
			if code, _, errs := c.run(args...); code != 0 {
				t.Fatalf("%s: exit %d: %s", f.name, code, errs)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		fmt.Printf("| `%s` | %s | %.2f |\n", f.name, strings.Join(cmds, ", "), float64(ds[len(ds)/2].Microseconds())/1000)
	}
}

// clientCommands lists the commands s received as "name×calls", leaving out those the
// scripts run inside Redis and those Sentinels and replicas send each other.
func clientCommands(t *testing.T, s *redistest.Server) []string {
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	noise := map[string]bool{"ping": true, "info": true, "publish": true, "replconf": true, "psync": true,
		"subscribe": true, "client": true, "role": true, "config": true, "sentinel|is-master-down-by-addr": true}
	var out []string
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name = strings.TrimPrefix(name, "cmdstat_")
		if !ok || scriptCommands[name] || noise[name] || noise[strings.Split(name, "|")[0]] || strings.HasPrefix(line, "#") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		if n, _ := strconv.Atoi(calls); n > 0 {
			out = append(out, fmt.Sprintf("%s×%d", name, n))
		}
	}
	return out
}

// countingProxy forwards TCP connections to one server and counts the client's requests
// (each read of client bytes: a command, or a pipeline, sent at once).
type countingProxy struct {
	addr     string
	requests atomic.Int64
}

func newCountingProxy(t *testing.T, upstream string) *countingProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &countingProxy{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(c, u); c.Close() }()
			go func() {
				defer u.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						p.requests.Add(1)
						u.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}
