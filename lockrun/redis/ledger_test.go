package redis

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestLedgerTrimRules: with FleetKeep 2, trimming drops whole entries, oldest first, but
// never the key's last success, its last failure or the lock holder's running entry, and
// the order set and the hash always name the same runs.
func TestLedgerTrimRules(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr, func(o *Options) { o.FleetKeep = 2 })
	ctx := context.Background()
	const key = "trim"
	run := func(id, status string) lockrun.Lease {
		req := redisTestReq(key)
		req.RunID = id
		lease := redisMustAcquire(t, l, req)
		if status != "" {
			lease.SetRecord(&lockrun.RunRecord{RunID: id, Node: "host-a", Status: status, Tries: 1})
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return lease
	}
	refusal := func(id, node string) {
		if err := l.RecordRun(ctx, key, &lockrun.RunRecord{RunID: id, Node: node, Status: "error", Exit: 125, Error: "refused"}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() string {
		t.Helper()
		es, err := l.Fleet(ctx, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.RunID+":"+e.Status)
		}
		sort.Strings(out)
		order, err := redistest.Do(addr, "ZCARD", l.orderKey(key))
		if err != nil || order != strconv.Itoa(len(es)) {
			t.Fatalf("ZCARD of the order %s (%v); want %d, one per entry", order, err, len(es))
		}
		return strings.Join(out, " ")
	}
	run("run-ok", "succeeded")
	run("run-bad", "failed")
	hold := run("run-hold", "")
	refusal("x1", "n1")
	refusal("x2", "n2")
	refusal("x3", "n3")
	if got, want := ids(), "run-hold:running run-ok:succeeded x3:error"; got != want {
		t.Fatalf("entries %s; want %s (the holder's, the last success, the last failure)", got, want)
	}
	hold.SetRecord(&lockrun.RunRecord{RunID: "run-hold", Node: "host-a", Status: "succeeded", Tries: 1})
	if err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	refusal("x4", "n4")
	if got, want := ids(), "run-hold:succeeded x4:error"; got != want {
		t.Fatalf("entries %s; want %s", got, want)
	}
}
