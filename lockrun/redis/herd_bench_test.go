package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cronlock/lockrun"
)

// BenchmarkHerd is a fleet of simulated hosts asking one Redis for short runs at once:
// each host is a goroutine that, run after run, does what one `cronlock run --schedule …
// -- true` does on Redis: a new Locker (a new connection, like a new process), the
// acquire with its tick, and for the winner the release with the fleet's record. Runs
// go to 1,000 keys, and the tick moves on every 10 runs of a key, so each tick of each
// key has one winner and nine skipped runs, as when ten hosts share a crontab line.
//
// Sub-benchmarks ramp the number of hosts running at once (CRONLOCK_BENCH_HERD_HOSTS,
// default 100,1000,5000,10000); b.N is the number of runs. Besides ns/op it reports
// decisions per second (a run's acquire answered: taken or skipped), the p50 and p99 of a
// decision (from the new locker to the acquire's answer), and from Redis's INFO: CPU
// milliseconds per 1,000 runs and commands per run (a script's inner commands not counted).
//
// CRONLOCK_BENCH_REDIS_URL names the server (any URL --redis takes: a proxy, Sentinel or
// Cluster); without it CRONLOCK_BENCH_HERD_FORM (plain, sentinel or cluster) says what to
// start privately, each with room for 20,000 clients (herd_info_test.go). The Redis
// figures are the data servers': one server, the Sentinels' master, or every master of a
// Cluster summed; a Sentinel's own CPU is reported apart. Run it alone: it is not part
// of the tests.
func BenchmarkHerd(b *testing.B) {
	url := herdServer(b)
	levels := []int{100, 1000, 5000, 10000}
	if s := os.Getenv("CRONLOCK_BENCH_HERD_HOSTS"); s != "" {
		levels = levels[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("CRONLOCK_BENCH_HERD_HOSTS=%q: want numbers of hosts such as 100,1000", s)
			}
			levels = append(levels, n)
		}
	}
	info, err := newInfoReader(url)
	if err != nil {
		b.Fatal(err)
	}
	defer info.Close()
	for _, hosts := range levels {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) { benchHerd(b, url, hosts, info) })
	}
}

const herdKeys = 1000

func benchHerd(b *testing.B, url string, hosts int, info *infoReader) {
	prefix := fmt.Sprintf("herd%d-%d:", time.Now().UnixNano(), hosts)
	base := time.Now().Truncate(time.Minute).Add(-24 * time.Hour)
	var next, won, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	lat := make([][]time.Duration, hosts)
	b.ResetTimer()
	before, err := info.read()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for h := 0; h < hosts; h++ {
		wg.Add(1)
		go func(h int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				// One tick per 10 runs of a key: run i is for key i%1000, tick i/10000.
				req := lockrun.Request{Key: "k" + strconv.FormatInt(i%herdKeys, 10), TTL: time.Minute,
					Node: "host-" + strconv.Itoa(h), PID: h, RunID: strconv.FormatInt(i, 10),
					Tick: base.Add(time.Duration(i/(10*herdKeys)) * time.Second), Schedule: "* * * * * *", Zone: "UTC"}
				t0 := time.Now()
				took, err := herdRun(url, prefix, req)
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				case took:
					won.Add(1)
				}
				if err == nil {
					lat[h] = append(lat[h], time.Since(t0))
				}
			}
		}(h)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after, err := info.read()
	if err != nil {
		b.Fatal(err)
	}
	if p := firstErr.Load(); p != nil {
		b.Logf("%d of %d runs failed; the first: %v", failed.Load(), b.N, *p)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	n := float64(b.N)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(ms(pctl(all, 50)), "p50-ms")
	b.ReportMetric(ms(pctl(all, 99)), "p99-ms")
	b.ReportMetric((after.cpu-before.cpu)*1000/n*1000, "redis-cpu-ms/1k-runs")
	b.ReportMetric(float64(after.calls-before.calls)/n, "redis-cmds/run")
	if after.sentinelCPU > 0 {
		b.ReportMetric((after.sentinelCPU-before.sentinelCPU)*1000/n*1000, "sentinel-cpu-ms/1k-runs")
	}
	b.ReportMetric(float64(won.Load())/n, "won/run")
	b.ReportMetric(float64(failed.Load())/n, "failed/run")
	if testing.Verbose() {
		b.Logf("hosts=%d runs=%d: per run %s", hosts, b.N, after.perRun(before, n))
	}
}

// herdRun is one short run on its own connection: acquire with the tick; when taken,
// release at once with the fleet's record. It reports whether the lock was taken; a
// skipped run (tick claimed, lock held) is not an error.
func herdRun(url, prefix string, req lockrun.Request) (bool, error) {
	l, err := New(Options{URL: url, Prefix: prefix, Timeout: 30 * time.Second, AllowEviction: true})
	if err != nil {
		return false, err
	}
	defer l.Close()
	ctx := context.Background()
	lease, err := l.Acquire(ctx, req)
	var held *lockrun.HeldError
	var tick *lockrun.TickError
	if errors.As(err, &held) || errors.As(err, &tick) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	lease.SetRecord(&lockrun.RunRecord{RunID: req.RunID, Node: req.Node, Status: "succeeded", Tick: req.Tick, Tries: 1})
	return true, lease.Release(ctx)
}

func pctl(s []time.Duration, p int) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perRun lists each command's calls and µs per run since before.
func (s redisStats) perRun(before redisStats, n float64) string {
	var parts []string
	for cmd, v := range s.cmds {
		calls, usec := v[0]-before.cmds[cmd][0], v[1]-before.cmds[cmd][1]
		if calls <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f calls %.1f µs", cmd, calls/n, usec/n))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
