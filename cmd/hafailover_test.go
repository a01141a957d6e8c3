package cmd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// What a Sentinel failover does to running jobs: the master is SIGKILLed under them and
// the Sentinels promote a replica.

// failoverRun runs one long job, kills the master killAfter after the job started, and
// returns the run's exit code and history row once it ended.
func failoverRun(t *testing.T, d *redistest.Sentinel, killAfter time.Duration, extra ...string) (int, historyRow, string) {
	c := newCLI(t, d.URL())
	// A lease of 15s: after the master dies, the Sentinels take seconds to promote a
	// replica and to point the other at it, which must sync and acknowledge before a
	// --min-replicas renewal is confirmed; under the whole suite's load, 9s ran out.
	args := append([]string{"run", "-k", "long", "--ttl", "15s", "--redis-timeout", "1s", "--grace", "300ms"}, extra...)
	// The job outlives the lease: it ends well only if a renewal after the failover
	// reached the promoted replica.
	started := filepath.Join(c.dir, "started")
	run := c.command(append(args, "--", "sh", "-c", "touch "+started+"; exec sleep 17")...)
	var errb strings.Builder
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// The job has started: the acquire, its WAIT included, is over. (The lock shows in
	// status as soon as the script ran, while a --min-replicas WAIT may still be
	// waiting: a master killed then fails the acquire itself.)
	proctest.WaitFile(t, started)
	time.Sleep(killAfter)
	old := d.MasterAddr()
	d.Master.Kill()
	d.WaitPromoted(old)
	code := c.exitCode(run.Wait())
	rows := c.history("long")
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want one", rows)
	}
	return code, rows[0], errb.String()
}

// TestSentinelFailoverUnderRun: without --min-replicas the run either keeps its lock on
// the new master or is stopped fail-closed, and its row says which.
func TestSentinelFailoverUnderRun(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover")
	}
	d := redistest.StartSentinel(t)
	d.WaitFailoverReady()
	code, row, errs := failoverRun(t, d, afterRenewal)
	keptOrStopped(t, code, row.Status, errs)
}

// afterRenewal is a kill once a renewal (at ttl/3 = 5s) was confirmed, as a run in its
// stride would see one.
const afterRenewal = 6 * time.Second

// TestSentinelFailoverKeepsAckedLock: with --min-replicas 1 and two replicas, the
// promoted replica has the lock and the other one acknowledges the renewals on the new
// master: the run keeps its lock, whether the master dies before the first renewal
// (the acquire's write is the only one acknowledged) or after one.
func TestSentinelFailoverKeepsAckedLock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover")
	}
	for _, kill := range []struct {
		name  string
		after time.Duration
	}{{"before the first renewal", 500 * time.Millisecond}, {"after a renewal", afterRenewal}} {
		t.Run(kill.name, func(t *testing.T) {
			d := redistest.StartSentinelReplicas(t, 2)
			d.WaitFailoverReady()
			code, row, errs := failoverRun(t, d, kill.after, "--min-replicas", "1")
			if code != 0 || row.Status != runstatus.Succeeded {
				t.Fatalf("exit %d, status %s, stderr %q: want the lock kept through the failover", code, row.Status, errs)
			}
		})
	}
}

// TestSentinelFailoverTorture: three hosts run a short job in a loop on one key with
// --min-replicas 1 while the master is SIGKILLed, with the torture's job and referee
// (a flock per key that the kernel holds for the job's whole life): no two jobs may
// overlap, and runs succeed again after the failover.
func TestSentinelFailoverTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover")
	}
	d := redistest.StartSentinelReplicas(t, 2)
	d.WaitFailoverReady()
	c := newCLI(t, d.URL())
	job := filepath.Join(c.dir, "job.sh")
	if err := os.WriteFile(job, []byte(tortureJob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	var promoted atomic.Int64 // wall ns of the promotion, 0 before
	var after atomic.Int32    // runs that succeeded after it
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int32
	for h := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				inv := fmt.Sprintf("h%d-%d", h, n.Add(1))
				code, _, errs := c.run("run", "-k", "fk", "--node", fmt.Sprintf("host%d", h), "--ttl", "3s",
					"--min-replicas", "1", "--redis-timeout", "1s", "--grace", "300ms", "--conflict-exit-code", "99",
					"--", "sh", job, "0.3", "0", "0", "0", c.dir, inv)
				if code == 0 && promoted.Load() != 0 {
					after.Add(1)
				}
				if code != 0 && code != 99 && code != 125 {
					t.Errorf("run %s: exit %d: %s", inv, code, errs)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	time.Sleep(2 * time.Second)
	old := d.MasterAddr()
	d.Master.Kill()
	d.WaitPromoted(old)
	promoted.Store(time.Now().UnixNano())
	deadline := time.Now().Add(15 * time.Second)
	for after.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if after.Load() < 3 {
		t.Errorf("only %d runs succeeded in the 15s after the promotion", after.Load())
	}
	f, err := os.Open(filepath.Join(c.dir, "referee.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	acq := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		switch strings.Fields(sc.Text())[0] {
		case "ovl":
			t.Errorf("overlap: %s", sc.Text())
		case "acq":
			acq++
		}
	}
	if acq < 5 {
		t.Fatalf("only %d jobs ran: the referee saw too little", acq)
	}
	t.Logf("%d jobs, %d after the promotion, %d invocations", acq, after.Load(), n.Load())
	m := newCLI(t, d.URL())
	m.env = append(m.env, "CRONLOCK_HISTORY=off", prefixOf(c))
	settleLedger(t, []*cli{c}, m, []string{"fk"}, ledgerExpect{settle: []string{"--redis-timeout", "1s", "--min-replicas", "1"}})
}
