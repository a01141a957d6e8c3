package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cronlock/internal/etcdtest"
	"cronlock/lockrun"
)

// TestEtcdJobStatesBatches: keys past one transaction's 32 come back in their order,
// each with its own entry and tick record.
func TestEtcdJobStatesBatches(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Minute)
	var keys []string
	for i := range 45 {
		key, run := fmt.Sprintf("k%02d", i), fmt.Sprintf("0190%04d-0000-7000-8000-000000000000", i)
		req := etcdReq(key, run)
		req.Tick, req.Schedule, req.Zone = tick, "* * * * *", "UTC"
		lease, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		lease.SetRecord(&lockrun.RunRecord{RunID: run, Node: req.Node, Status: "succeeded", Tick: tick, Tries: 1})
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	got, _, err := l.JobKeys(ctx, false)
	if err != nil || len(got) != 45 {
		t.Fatalf("JobKeys: %d keys, %v; want 45", len(got), err)
	}
	sts, err := l.JobStates(ctx, keys, time.Now())
	if err != nil || len(sts) != 45 {
		t.Fatalf("JobStates: %d states, %v; want 45", len(sts), err)
	}
	for i, st := range sts {
		if st.Key != keys[i] || len(st.Recent) != 1 || st.Recent[0].Node != "n-"+st.Recent[0].RunID || st.Recent[0].Status != "succeeded" ||
			st.Tick == nil || st.Tick.Expr != "* * * * *" || st.Days != nil {
			t.Fatalf("state %d: %+v; want %s's succeeded run and its tick, no day counters", i, st, keys[i])
		}
	}
}
