package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestClusterSlotHalfWayIsWaitedOut: the lock's slot is held half-way through a
// migration, its one existing key (the fencing counter) already moved: the source
// answers ASK (it has none of the script's keys), the target TRYAGAIN (not all of them
// are there), over and over, until go-redis's redirections run out on an ASK. Acquire,
// and the fleet's record (fleet.lua), keep asking within the operation time-out and
// succeed once the move is finished; before the fix they failed with that ASK at once.
func TestClusterSlotHalfWayIsWaitedOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t)
	l := haLocker(t, c.URL(), func(o *Options) { o.Timeout = 20 * time.Second })
	ctx := context.Background()
	const key = "halfway"
	lease := redisMustAcquire(t, l, redisTestReq(key))
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	src := c.MasterOf(l.fenceKey(key))
	dst := c.Nodes[0]
	if dst == src {
		dst = c.Nodes[1]
	}
	slot := redisDo(t, src.Addr, "CLUSTER", "KEYSLOT", l.fenceKey(key))
	srcID, dstID := redisDo(t, src.Addr, "CLUSTER", "MYID"), redisDo(t, dst.Addr, "CLUSTER", "MYID")
	redisDo(t, dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	redisDo(t, src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port, _ := strings.Cut(dst.Addr, ":")
	redisDo(t, src.Addr, "MIGRATE", host, port, l.fenceKey(key), "0", "5000")
	n, _ := strconv.Atoi(slot)

	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"acquire", func() error {
			lease, err := l.Acquire(ctx, redisTestReq(key))
			if err == nil {
				err = lease.Release(ctx)
			}
			return err
		}},
		{"fleet record", func() error {
			return l.RecordRun(ctx, key, &lockrun.RunRecord{RunID: "run-hw", Node: "n", Status: "error", Exit: 125})
		}},
	} {
		before := redirections(t, src, dst)
		done := make(chan error, 1)
		go func() { done <- op.do() }()
		// Wait until a whole round of go-redis's redirections (eight) has run out on the
		// half-way slot: the call is then in the locker's own retries.
		deadline := time.Now().Add(10 * time.Second)
		for redirections(t, src, dst) < before+12 {
			select {
			case err := <-done:
				t.Fatalf("%s while the slot is half-way: %v; want it to wait for the slot to settle", op.name, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the nodes answered no ASK or TRYAGAIN", op.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case err := <-done:
			t.Fatalf("%s while the slot is half-way: %v; want it to wait for the slot to settle", op.name, err)
		default:
		}
		// Finish the move (the rest of the slot's keys, then NODE everywhere).
		if err := c.MigrateSlot(n, src, dst, 10, nil); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s once the slot settled: %v", op.name, err)
		}
		if op.name == "acquire" {
			// Half-way again, back the other way, for the next operation: nothing of the
			// fleet's record exists yet, so the source has none of its keys.
			src, dst = dst, src
			srcID, dstID = dstID, srcID
			redisDo(t, dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
			redisDo(t, src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
		}
	}
}

// redirections counts the ASK and TRYAGAIN replies the nodes have sent.
func redirections(t *testing.T, nodes ...*redistest.Server) int {
	t.Helper()
	total := 0
	for _, s := range nodes {
		info := redisDo(t, s.Addr, "INFO", "errorstats")
		for _, l := range strings.Fields(info) {
			for _, p := range []string{"errorstat_ASK:count=", "errorstat_TRYAGAIN:count="} {
				if v, ok := strings.CutPrefix(l, p); ok {
					n, _ := strconv.Atoi(v)
					total += n
				}
			}
		}
	}
	return total
}
