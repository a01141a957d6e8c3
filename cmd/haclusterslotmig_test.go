package cmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// TestClusterSlotMigrationRunsGoOn: the lock's slot is migrated back and forth between
// two masters of a Cluster (CLUSTER SETSLOT … IMPORTING/MIGRATING, MIGRATE of its keys
// in batches of ten, then SETSLOT … NODE), the way redis-cli --cluster reshard moves a
// slot, while hosts keep running the job through the built binary: short runs, runs
// whose renewals meet the migration, runs with --min-replicas (the script and WAIT sent
// to the slot's master by cronlock itself) and runs with --schedule (the four-key
// acquire).
// While the slot is half-way the source answers ASK for a key it no longer has and
// TRYAGAIN for a script whose keys it has only some of, and the target TRYAGAIN for
// one whose keys are not all there yet: every run must follow or wait that out within
// --redis-timeout and end succeeded or skipped, never error; and a referee (a kernel
// flock taken by every job) must see no two jobs at once.
func TestClusterSlotMigrationRunsGoOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterReplicas(t, 1) // for the --min-replicas host
	c := newCLI(t, cl.URL())
	const key = "slotmig"
	prefix := strings.ReplaceAll(t.Name(), "/", "-") + strconv.Itoa(os.Getpid()) + ":" // newCLI's
	lock := prefix + "{" + key + "}:lock"
	src := cl.MasterOf(lock)
	if src == nil {
		t.Fatal("no node serves the lock's slot")
	}
	slot := do(t, src, "CLUSTER", "KEYSLOT", lock)
	// Keys of other owners in the same slot, so that a migration takes several batches
	// and the lock's own keys leave at different moments.
	for i := range 40 {
		do(t, src, "SET", fmt.Sprintf("{%s}filler:%d", key, i), "x")
	}

	var cycles atomic.Int64
	stop := make(chan struct{})
	migrated := make(chan error, 1)
	var ended atomic.Int64    // runs that ended, however
	var migrating atomic.Bool // until the nemesis gave up (an error)
	migrating.Store(true)
	go func() {
		err := migrateBackAndForth(cl, src, slot, stop, &cycles, &ended)
		migrating.Store(false)
		migrated <- err
	}()

	// The referee: every job takes the flock at once or writes an overlap.
	referee, overlaps := filepath.Join(c.dir, "referee"), filepath.Join(c.dir, "overlaps")
	// Each run's command is its own ($0 names it): runs of one command with and without
	// --schedule in one tick are a roll-out, DUPLICATE in the fleet's record.
	job := func(sleep, name string) []string {
		return []string{"sh", "-c", "exec 9>>" + referee + "; flock -n 9 || echo overlap >>" + overlaps + "; sleep " + sleep, name}
	}
	const workers, perWorker = 3, 25
	var mu sync.Mutex
	var bad []string
	var ran, skipped, lagged atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker || (cycles.Load() < 10 && migrating.Load()); i++ {
				args := []string{"run", "-k", key, "--ttl", "3s", "--redis-timeout", "2s", "--grace", "300ms", "--conflict-exit-code", "99"}
				sleep := "0.02"
				switch {
				case w == 0 && i%4 == 3:
					sleep = "1.5" // renewals every second meet the migration
				case w == 1:
					// The script and WAIT go straight to the slot's master, and follow ASK.
					args = append(args, "--min-replicas", "1")
					if i%4 == 3 {
						sleep = "1.5"
					}
				case w == 2:
					args = append(args, "--schedule", "* * * * *")
				}
				cmd := c.command(append(append(args, "--"), job(sleep, fmt.Sprintf("job-%d-%d", w, i))...)...)
				var errb strings.Builder
				cmd.Stderr = &errb
				// Not c.exitCode: it may end the test, which only the test's goroutine can.
				code := 0
				if err := cmd.Run(); err != nil {
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						code = ee.ExitCode()
					} else {
						code = -1
						errb.WriteString(err.Error())
					}
				}
				ended.Add(1)
				switch {
				case code == 0 && errb.Len() == 0:
					ran.Add(1)
				case code == 99 && errb.Len() == 0:
					skipped.Add(1)
				case w == 1 && strings.Contains(errb.String(), "replicas acknowledged"):
					// A replica that lags on a loaded machine: --min-replicas doing its
					// job, not the migration's doing (the replica is not migrated).
					lagged.Add(1)
				default: // a failed release too, which leaves the lock to its TTL
					mu.Lock()
					bad = append(bad, fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(errb.String())))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-migrated; err != nil {
		t.Fatalf("migrating the slot: %v", err)
	}
	// What the masters answered meanwhile (TRYAGAIN, NOSCRIPT on a target new to the
	// scripts…), for the log: the paths the runs met.
	var stats []string
	for _, m := range cl.Nodes[:3] {
		info, _ := m.Do("INFO", "errorstats")
		for _, l := range strings.Fields(info) {
			if strings.HasPrefix(l, "errorstat_") {
				stats = append(stats, m.Addr+" "+strings.TrimPrefix(l, "errorstat_"))
			}
		}
	}
	t.Logf("%d runs ran, %d skipped, %d refused for a lagging replica, over %d migrations of slot %s; errors answered: %s",
		ran.Load(), skipped.Load(), lagged.Load(), cycles.Load(), slot, strings.Join(stats, ", "))
	if b, err := os.ReadFile(overlaps); err == nil {
		t.Errorf("the referee saw %d overlaps", strings.Count(string(b), "overlap"))
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d runs failed while the lock's slot migrated, e.g.:\n%s", len(bad), ran.Load()+skipped.Load()+int64(len(bad)), strings.Join(bad[:min(len(bad), 8)], "\n"))
	}
	if ran.Load() == 0 {
		t.Fatal("no run ran")
	}
	m := newCLI(t, cl.URL())
	m.env = append(m.env, "CRONLOCK_HISTORY=off", prefixOf(c))
	settleLedger(t, []*cli{c}, m, []string{key}, ledgerExpect{settle: []string{"--redis-timeout", "2s"}})
}

// migrateBackAndForth moves slot between the masters, from the one that serves it now
// to the next, until stop is closed, counting the moves in cycles. Between two batches
// of keys it lets the runs go on for a moment, so that they meet every stage of a move;
// between two moves it waits for two more runs to end, so that runs also find the slot
// settled (a reshard moves each slot once, in well under --redis-timeout).
func migrateBackAndForth(cl *redistest.Cluster, owner *redistest.Server, slot string, stop <-chan struct{}, cycles, ended *atomic.Int64) error {
	n, err := strconv.Atoi(slot)
	if err != nil {
		return err
	}
	masters := cl.Nodes[:3]
	for i := 0; ; i++ {
		for seen := ended.Load(); ended.Load() < seen+2; {
			select {
			case <-stop:
				return nil
			case <-time.After(5 * time.Millisecond):
			}
		}
		to := masters[i%2]
		if to == owner {
			to = masters[(i+1)%2]
		}
		between := func(int) bool { time.Sleep(20 * time.Millisecond); return true } // the nemesis's pace, not a wait for a state
		if err := cl.MigrateSlot(n, owner, to, 10, between); err != nil {
			return err
		}
		owner = to
		cycles.Add(1)
		// A reshard moves a slot once, not back and forth without pause: the clients'
		// slot maps (go-redis reloads them lazily after a MOVED) get the nemesis's pace
		// to catch up, else a run can chase the slot for all of --redis-timeout.
		select {
		case <-stop:
			return nil
		case <-time.After(400 * time.Millisecond):
		}
	}
}

// TestClusterSlotLeftHalfWay: a slot left half-way (a reshard that died between MIGRATING
// and NODE) answers every script whose keys are not all on one node with TRYAGAIN; the
// run waits that out for --redis-timeout, then fails with one line that says what is
// going on and what to do. Once the move is finished, runs go on.
func TestClusterSlotLeftHalfWay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	c := newCLI(t, cl.URL())
	const key = "halfway"
	if code, _, errs := c.run("run", "-k", key, "--", "true"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	prefix := strings.ReplaceAll(t.Name(), "/", "-") + strconv.Itoa(os.Getpid()) + ":" // newCLI's
	src := cl.MasterOf(prefix + "{" + key + "}:lock")
	dst := cl.Nodes[0]
	if dst == src {
		dst = cl.Nodes[1]
	}
	slot, _ := strconv.Atoi(do(t, src, "CLUSTER", "KEYSLOT", "{"+key+"}"))
	// Stop after one key has moved: the lock's keys are split between the two nodes.
	if err := cl.MigrateSlot(slot, src, dst, 1, func(moved int) bool { return moved < 1 }); err != nil {
		t.Fatal(err)
	}
	code, _, errs := c.run("run", "-k", key, "--redis-timeout", "500ms", "--", "true")
	if code != 125 || !strings.Contains(errs, "being moved between Cluster nodes") || !strings.Contains(errs, "--redis-timeout") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("a run while the slot is half-way: exit %d, stderr %q; want 125 and one line about the move", code, errs)
	}
	if err := cl.MigrateSlot(slot, src, dst, 10, nil); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c.run("run", "-k", key, "--redis-timeout", "500ms", "--", "true"); code != 0 {
		t.Fatalf("a run once the move is finished: exit %d, stderr %q", code, errs)
	}
}
