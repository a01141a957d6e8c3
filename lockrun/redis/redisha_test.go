package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
)

// haLocker is a locker on a Sentinel or Cluster URL with a prefix of its own.
func haLocker(t *testing.T, url string, edit ...func(*Options)) *Locker {
	t.Helper()
	return newRedisTestLocker(t, "", append([]func(*Options){func(o *Options) { o.URL = url }}, edit...)...)
}

// exerciseLockPaths runs every lock path on l: exclusion among concurrent acquirers,
// renewal, a --wait hand-off woken by the release, a tick claim, the fleet's record,
// status's List and unlock.
func exerciseLockPaths(t *testing.T, l *Locker) {
	ctx := context.Background()
	// Exclusion: of eight concurrent acquirers of one key, exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []lockrun.Lease
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctx, redisTestReq("excl"))
			var held *lockrun.HeldError
			if err != nil && !errors.As(err, &held) {
				t.Errorf("Acquire: %v", err)
			}
			if err == nil {
				mu.Lock()
				won = append(won, lease)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of 8 concurrent acquirers took the lock, want 1", len(won))
	}
	if err := won[0].Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}

	// The hand-off: a waiter polls only every 10s here, so a prompt wake-up is the
	// release's message.
	l.poll = 10 * time.Second
	got := make(chan error, 1)
	go func() {
		req := redisTestReq("excl")
		req.Wait, req.RunID = 8*time.Second, "run-w"
		lease, err := l.Acquire(ctx, req)
		if err == nil {
			lease.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if err := won[0].Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if d := time.Since(released); d > 5*time.Second {
		t.Fatalf("the waiter took %s after the release: it was not woken by it", d)
	}

	// A tick is claimed once, and the run's release writes the fleet's record.
	tick := time.Now().Truncate(time.Minute)
	req := redisTestReq("ticked")
	req.Tick, req.Schedule, req.Zone = tick, "* * * * *", "UTC"
	lease := redisMustAcquire(t, l, req)
	lease.(*redisLease).SetRecord(&lockrun.RunRecord{RunID: "run-a", Node: "host-a", Status: "succeeded"})
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	req.RunID = "run-b"
	var te *lockrun.TickError
	if _, err := l.Acquire(ctx, req); !errors.As(err, &te) || te.RunID != "run-a" {
		t.Fatalf("second claim of one tick: %v, want a TickError naming run-a", err)
	}
	es, err := l.Fleet(ctx, "ticked", 10)
	if err != nil || len(es) != 1 || es[0].RunID != "run-a" {
		t.Fatalf("Fleet = %+v, %v; want run-a's entry", es, err)
	}

	// status and unlock see locks on every node (Cluster keys spread over all masters).
	keys := []string{"s-a", "s-b", "s-c", "s-d", "s-e", "s-f"}
	for _, k := range keys {
		redisMustAcquire(t, l, redisTestReq(k))
	}
	held, err := l.List(ctx)
	if err != nil || len(held) != len(keys) {
		t.Fatalf("List = %d locks, %v; want %d", len(held), err, len(keys))
	}
	names, err := l.FleetKeys(ctx)
	// Every key with a lock, a tick or a ledger .
	if err != nil || strings.Join(names, " ") != "excl s-a s-b s-c s-d s-e s-f ticked" {
		t.Fatalf("FleetKeys = %v, %v; want every key with a lock, a tick or a ledger", names, err)
	}
	for _, k := range keys {
		if h, err := l.Unlock(ctx, k, true); err != nil || h == nil || h.RunID != "run-a" {
			t.Fatalf("Unlock(%s) = %+v, %v", k, h, err)
		}
	}
}

func TestSentinelLockPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	l := haLocker(t, d.URL())
	exerciseLockPaths(t, l)
	if got := l.Describe(); !strings.HasPrefix(got, "redis-sentinel 127.0.0.1:") || !strings.HasSuffix(got, "/mymaster/0") {
		t.Fatalf("Describe = %q", got)
	}
}

func TestClusterLockPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t)
	l := haLocker(t, c.URL())
	exerciseLockPaths(t, l)

	// WAIT reaches the master of the lock's slot (go-redis would send a keyless command
	// anywhere) and counts its replicas: none here, for keys on every master.
	l = haLocker(t, c.URL(), func(o *Options) { o.MinReplicas = 1; o.Timeout = 300 * time.Millisecond })
	for _, k := range []string{"w-a", "w-b", "w-c", "w-d"} {
		_, err := l.Acquire(context.Background(), redisTestReq(k))
		var re *ReplicaError
		if !errors.As(err, &re) || re.Got != 0 {
			t.Fatalf("Acquire(%s) on a cluster without replicas, --min-replicas 1: %v", k, err)
		}
	}
}

func TestMinReplicasAcksAcquireAndRenew(t *testing.T) {
	d := redistest.StartSentinel(t)
	l := haLocker(t, d.URL(), func(o *Options) { o.MinReplicas = 1 })
	ctx := context.Background()
	lease := redisMustAcquire(t, l, redisTestReq("acked"))
	// The replica has the lock at once: WAIT returned after it acknowledged.
	if v, err := d.Replica.Do("GET", l.lockKey("acked")); err != nil || !strings.Contains(v, lease.(*redisLease).token) {
		t.Fatalf("replica's copy of the lock = %q, %v", v, err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}

	// With the replica gone, acquire is refused and the lock let go; a renewal is
	// unconfirmed, not lost.
	d.Replica.Kill()
	_, err := l.Acquire(ctx, redisTestReq("unacked"))
	var re *ReplicaError
	if !errors.As(err, &re) || re.Got != 0 || re.Want != 1 {
		t.Fatalf("Acquire without a replica: %v, want a ReplicaError", err)
	}
	if !strings.HasPrefix(err.Error(), "only 0 of 1 replicas acknowledged the lock unacked within ") {
		t.Fatalf("message: %q", err)
	}
	if v, _ := d.Master.Do("EXISTS", l.lockKey("unacked")); v != "0" {
		t.Fatalf("the unacknowledged lock was kept (EXISTS = %s)", v)
	}
	err = lease.Renew(ctx)
	if err == nil || errors.Is(err, lockrun.ErrLockLost) || !strings.Contains(err.Error(), "unconfirmed") {
		t.Fatalf("Renew without a replica: %v, want an unconfirmed renewal", err)
	}
}

// TestMinReplicasLatency prints the median time of an acquire and of a renewal on one
// master with one replica, with and without --min-replicas 1. A measurement, run by
// hand for BENCHMARKS.md:
//
//	CRONLOCK_BENCH_HA=1 go test -count=1 -run TestMinReplicasLatency -v ./lockrun/redis
func TestMinReplicasLatency(t *testing.T) {
	if os.Getenv("CRONLOCK_BENCH_HA") == "" {
		t.Skip("a measurement: set CRONLOCK_BENCH_HA=1")
	}
	d := redistest.StartSentinel(t)
	ctx := context.Background()
	median := func(f func()) time.Duration {
		var ds []time.Duration
		for range 300 {
			start := time.Now()
			f()
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	for _, n := range []int{0, 1} {
		l := haLocker(t, d.URL(), func(o *Options) { o.MinReplicas = n })
		redisMustAcquire(t, l, redisTestReq("warm")).Release(ctx)
		acq := median(func() {
			lease := redisMustAcquire(t, l, redisTestReq("lat"))
			lease.Release(ctx)
		})
		lease := redisMustAcquire(t, l, redisTestReq("lat"))
		renew := median(func() {
			if err := lease.Renew(ctx); err != nil {
				t.Fatal(err)
			}
		})
		lease.Release(ctx)
		fmt.Printf("| %d | %.0f | %.0f |\n", n, float64(acq.Microseconds()), float64(renew.Microseconds()))
	}
}

// TestSentinelRenewNeedsMajority: a renewal through Sentinel is confirmed only when a
// majority of the URL's Sentinels name the server it went to. With one of three frozen
// (SIGSTOP) the other two decide; with two frozen it is unconfirmed, not lost, and once
// they are back it is confirmed again.
func TestSentinelRenewNeedsMajority(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	l := haLocker(t, d.URL(), func(o *Options) { o.Timeout = 300 * time.Millisecond })
	ctx := context.Background()
	lease := redisMustAcquire(t, l, redisTestReq("vote"))
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	d.Sentinels[0].Stop()
	t.Cleanup(d.Sentinels[0].Cont)
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew with one of three Sentinels frozen: %v, want it confirmed by the other two", err)
	}
	d.Sentinels[1].Stop()
	t.Cleanup(d.Sentinels[1].Cont)
	err := lease.Renew(ctx)
	var ve *conn.MasterVoteError
	if !errors.As(err, &ve) || errors.Is(err, lockrun.ErrLockLost) || len(ve.Errs) != 2 || ve.Named[d.Master.Addr] != 1 {
		t.Fatalf("Renew with two of three Sentinels frozen: %v, want a MasterVoteError (unconfirmed, 1 naming %s)", err, d.Master.Addr)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "2 of the 3 Sentinels") {
		t.Fatalf("message %q: want one line that says 2 of the 3 Sentinels must agree", err)
	}
	d.Sentinels[0].Cont()
	d.Sentinels[1].Cont()
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew with the Sentinels back: %v", err)
	}
}

// TestMinReplicasMajorityWarning: an acquire with --min-replicas warns when N is not a
// majority of the master's replicas (connected_slaves, read in the acquire's round trip),
// and says nothing when it is; the lock is taken either way.
func TestMinReplicasMajorityWarning(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	for range 2 {
		redistest.Start(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port), "--repl-diskless-sync-delay", "0")
	}
	// Online and acknowledging: after a diskless sync a replica counts in WAIT only once
	// its first once-a-second acknowledgement came in (its offset is 0 until then, and
	// stays 0 until the master has written something).
	if _, err := master.Do("SET", "warm", "1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := master.Do("INFO", "replication")
		if err == nil && strings.Count(info, "state=online") == 2 && !strings.Contains(info, ",offset=0,") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the master's two replicas do not acknowledge: %q, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, tc := range []struct {
		n    int
		warn string
	}{
		{1, "--min-replicas 1 is not a majority of the 2 replicas of redis 127.0.0.1:"},
		{2, ""},
	} {
		l := newRedisTestLocker(t, master.Addr, func(o *Options) { o.MinReplicas = tc.n })
		var warned []string
		req := redisTestReq(fmt.Sprintf("maj%d", tc.n))
		req.Warn = func(err error) { warned = append(warned, err.Error()) }
		redisMustAcquire(t, l, req)
		switch {
		case tc.warn == "" && len(warned) != 0:
			t.Errorf("--min-replicas %d of 2: warned %q, want nothing", tc.n, warned)
		case tc.warn != "" && (len(warned) != 1 || !strings.HasPrefix(warned[0], tc.warn) || !strings.Contains(warned[0], "to 2 or more")):
			t.Errorf("--min-replicas %d of 2: warned %q, want one line starting %q", tc.n, warned, tc.warn)
		}
	}
}
