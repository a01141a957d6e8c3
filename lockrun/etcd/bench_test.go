package etcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cronlock/internal/etcdtest"
	"cronlock/lockrun"
)

// BenchmarkShortRun times the requests of a short run on a 3-member cluster, on one
// client, without the process around them: acquire with a tick (the read, then the grant
// with the transaction that claims lock, tick and entry) and release with the run's entry
// (the transaction with the revoke). scripts/bench.sh etcd measures whole runs, where the
// program's start and the history are most of the time; this is what the round trips cost.
func BenchmarkShortRun(b *testing.B) {
	cl := etcdtest.StartCluster(b, 3)
	l, err := New(Options{Endpoints: strings.Split(cl.Endpoints(), ","), Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	tick := time.Now().Truncate(time.Minute)
	for i := 0; b.Loop(); i++ {
		req := etcdReq(fmt.Sprintf("short%d", i), fmt.Sprintf("01900000-0000-7000-8000-%012d", i))
		req.Tick = tick
		lease, err := l.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		lease.SetRecord(&lockrun.RunRecord{RunID: req.RunID, Node: req.Node, Status: "succeeded", Tick: tick, Tries: 1})
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
