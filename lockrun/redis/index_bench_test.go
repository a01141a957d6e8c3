package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// BenchmarkAcquireIndex is what the index of known keys costs a claim: the acquire of a
// short `run --schedule` (a new tick every time, over 10,000 keys already in the index)
// with the index written by the acquire script and without, interleaved op by op (so a
// busy machine slows both alike), each followed by its release. It reports the median
// and p90 of each acquire's round trip (µs) and their difference. Run it alone.
func BenchmarkAcquireIndex(b *testing.B) {
	srv := redistest.Start(b)
	var lockers [2]*Locker
	for i, name := range []string{"index", "noindex"} {
		l, err := New(Options{URL: "redis://" + srv.Addr + "/0", Timeout: 2 * time.Second, Prefix: name + ":"})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		l.noIndex = i == 1
		lockers[i] = l
	}
	tick := time.Now().UTC().Truncate(time.Minute).Add(-1000000 * time.Minute)
	op := func(l *Locker, i int) time.Duration {
		key := fmt.Sprintf("job-%05d", i%10000)
		id := "run-" + strconv.Itoa(i)
		t := tick.Add(time.Duration(i/10000) * time.Minute)
		start := time.Now()
		lease, err := l.Acquire(context.Background(), lockrun.Request{Key: key, TTL: time.Minute, Node: "vm", PID: 1, RunID: id,
			Tick: t, Schedule: "* * * * *", Zone: "UTC", Entry: &lockrun.RunRecord{RunID: id, Node: "vm", Status: "running", Tick: t, Tries: 1}})
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		lease.SetRecord(&lockrun.RunRecord{RunID: id, Node: "vm", Status: "succeeded", Tick: t, Tries: 1})
		if err := lease.Release(context.Background()); err != nil {
			b.Fatal(err)
		}
		return took
	}
	for i := 0; i < 10000; i++ {
		op(lockers[0], i)
		op(lockers[1], i)
	}
	var took [2][]time.Duration
	i := 10000
	for b.Loop() {
		for j := range 2 {
			l := lockers[(i+j)%2] // the order alternates
			took[(i+j)%2] = append(took[(i+j)%2], op(l, i))
		}
		i++
	}
	var p50 [2]float64
	for j, name := range []string{"index", "noindex"} {
		slices.Sort(took[j])
		p50[j] = float64(took[j][len(took[j])/2].Microseconds())
		b.ReportMetric(p50[j], name+"-p50-µs")
		b.ReportMetric(float64(took[j][len(took[j])*9/10].Microseconds()), name+"-p90-µs")
	}
	b.ReportMetric(p50[0]-p50[1], "index-cost-µs")
}
