package fleetview_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"cronlock/fleetview"
	"cronlock/internal/redistest"
	"cronlock/lockrun"
	"cronlock/lockrun/redis"
)

// BenchmarkJobsRedis is `cronlock jobs` on a private loopback Redis whose fleet has
// CRONLOCK_BENCH_JOBS_KEYS keys (default 10,000), each claimed and released once by a
// run with a schedule (one in ten still running): one op reads every key's line from
// the acquire script's index (sub-benchmark index) or from a walk of the whole database
// (scan, `jobs --scan`), and sorts them. The goal: one op under 1 s for 10,000 keys.
func BenchmarkJobsRedis(b *testing.B) {
	n := 10000
	if s := os.Getenv("CRONLOCK_BENCH_JOBS_KEYS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	srv := redistest.Start(b)
	l, err := redis.New(redis.Options{URL: "redis://" + srv.Addr + "/0", Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	fill(b, l, n)
	for _, scan := range []bool{false, true} {
		name := "index"
		if scan {
			name = "scan"
		}
		b.Run(fmt.Sprintf("%s/keys=%d", name, n), func(b *testing.B) {
			src, err := fleetview.FromBackend(l, scan)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				jobs, err := fleetview.Read(src, fleetview.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if len(jobs) != n {
					b.Fatalf("%d jobs; want %d", len(jobs), n)
				}
			}
		})
	}
}

// fill gives l's fleet n keys, as `cronlock run --schedule S -- true` leaves them (every
// tenth still holding its lock), from 8 goroutines.
func fill(b *testing.B, l *redis.Locker, n int) {
	b.Helper()
	scheds := []string{"* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * *", "0 0 * * 0"}
	now := time.Now().UTC().Truncate(time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				key := fmt.Sprintf("job-%05d", i)
				id := fmt.Sprintf("run-%05d", i)
				req := lockrun.Request{Key: key, TTL: time.Hour, Node: "vm" + strconv.Itoa(i%20), PID: 1, RunID: id,
					Tick: now, Schedule: scheds[i%len(scheds)], Zone: "UTC",
					Entry: &lockrun.RunRecord{RunID: id, Node: "vm", Status: "running", Tick: now, Tries: 1}}
				lease, err := l.Acquire(context.Background(), req)
				if err != nil {
					errs <- err
					return
				}
				if i%10 == 0 {
					continue
				}
				lease.SetRecord(&lockrun.RunRecord{RunID: id, Node: "vm", Status: "succeeded", Tick: now, Tries: 1, Duration: time.Second})
				if err := lease.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
