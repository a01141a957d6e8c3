package cmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// A Sentinel partition: the master and one holder are cut
// off from the Sentinels, the replicas and the other hosts, for real (internal/faultproxy
// black-holes every connection to the master but the holder's, and the holder's to the
// Sentinels). The Sentinels promote a replica, another host takes the lock there once it
// expires, while the old master, still writable, accepts the holder's renewals. A kernel
// flock that each job holds for its whole life is the referee: the other host's job
// measures how long it had to wait for the holder's job to die.

// partitionLength is how long the partition lasts: long enough for a promotion and the
// lock's expiry on the promoted replica (about 3.5s here), with room for a loaded machine.
const partitionLength = 9 * time.Second

// partitionOutcome is what one partition did.
type partitionOutcome struct {
	overlap    time.Duration // the other host's job waited this long for the holder's; 0 = none
	otherAfter time.Duration // the other host's job started this long after the partition began
	holderEnd  time.Duration // the holder's cronlock ended this long after it began
	code       int           // the holder's exit
	status     string        // the holder's row
	stderr     string        // the holder's
}

// sentinelPartition runs a holder (its job as long as the partition) on a SentinelNet of
// replicas, cuts it off with the master and the replicas numbered with, and has another
// host run the job in a loop until it runs once.
func sentinelPartition(t *testing.T, replicas int, with []int, extra ...string) partitionOutcome {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover under a partition")
	}
	d := redistest.StartSentinelNet(t, replicas)
	d.WaitFailoverReady()
	urlA, cutA := d.ProxiedURL()
	a := newCLI(t, urlA)
	a.env = append(a.env, "CRONLOCK_NODE=hostA")
	b := newCLI(t, d.URL())
	b.env = append(b.env, "CRONLOCK_NODE=hostB")
	referee := filepath.Join(t.TempDir(), "referee")
	lockArgs := []string{"run", "-k", "part", "--ttl", "3s", "--redis-timeout", "500ms", "--grace", "300ms"}
	holder, errb, release := a.startHolding(append(append([]string{}, lockArgs...), extra...), "flock", "-n", referee)
	defer release()

	old := d.MasterAddr()
	cut := time.Now()
	var cutOff []*redistest.Server
	for _, i := range with {
		cutOff = append(cutOff, d.Replicas[i])
	}
	d.Partition(func() []int { return []int{holder.Process.Pid} }, cutOff...)
	var werr error
	var ended time.Time
	exited := make(chan struct{})
	go func() {
		werr = holder.Wait()
		ended = time.Now()
		close(exited)
	}()
	cutA(faultproxy.Blackhole)
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		time.Sleep(time.Until(cut.Add(partitionLength)))
		d.Heal()
		cutA(faultproxy.Pass)
	}()
	d.WaitPromoted(old)
	t.Logf("promoted %s after %v", d.MasterAddr(), time.Since(cut).Round(time.Millisecond))

	// The other host: skipped (99) while the lock lives on the promoted replica, an error
	// (125) while it cannot reach a master, until its job runs once. The job exits 42
	// when it finds the holder's job alive, after waiting for its end.
	ovl := filepath.Join(b.dir, "overlap-ms")
	job := "if flock -n " + referee + " true; then exit 0; fi; t0=$(date +%s%N); flock -w 60 " + referee +
		" true; echo $(( ($(date +%s%N) - t0) / 1000000 )) > " + ovl + "; exit 42"
	var out partitionOutcome
	for deadline := cut.Add(partitionLength); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the other host's job never ran during the %v partition", partitionLength)
		}
		start := time.Now()
		code, _, errs := b.run(append(append([]string{}, lockArgs...), "--conflict-exit-code", "99", "--", "sh", "-c", job)...)
		if code == 0 || code == refereeExit {
			out.otherAfter = start.Sub(cut)
			if code == refereeExit {
				raw, _ := os.ReadFile(ovl)
				ms, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
				out.overlap = time.Duration(ms) * time.Millisecond
			}
			break
		}
		if code != 99 && code != 125 {
			t.Fatalf("the other host: exit %d: %s", code, errs)
		}
	}
	<-healed
	release()
	<-exited
	out.holderEnd = ended.Sub(cut)
	out.code = a.exitCode(werr)
	out.stderr = errb.String()
	for _, r := range a.history("part") {
		out.status = r.Status
	}
	t.Logf("the other host's job ran %v after the partition began; overlap %v; holder ended %v after it began: exit %d (%s) %q",
		out.otherAfter.Round(time.Millisecond), out.overlap, out.holderEnd.Round(time.Millisecond), out.code, out.status, out.stderr)
	// The holder's end was written on the cut-off master only, which the healed
	// deployment discards: its host keeps it, and its next run sends it.
	waitUntil(t, 20*time.Second, "the deployment to settle after the partition", d.Settled)
	m := newCLI(t, d.URL())
	m.env = append(m.env, "CRONLOCK_HISTORY=off", prefixOf(a))
	settleLedger(t, []*cli{a, b}, m, []string{"part"}, ledgerExpect{settle: append([]string{"--redis-timeout", "1s"}, extra...)})
	return out
}

// checkPartition: no overlap at all, and the holder was stopped fail-closed, saying why.
func checkPartition(t *testing.T, o partitionOutcome) {
	t.Helper()
	if o.overlap > 0 {
		t.Fatalf("the two jobs overlapped for %v: the cut-off holder's renewals on the old master counted as confirmed (holder: exit %d, %q)", o.overlap, o.code, o.stderr)
	}
	if o.code != 125 || o.status != runstatus.LockLost || !strings.Contains(o.stderr, "Sentinels") {
		t.Fatalf("holder: exit %d, status %s, stderr %q; want 125, lock_lost and a line naming the Sentinels", o.code, o.status, o.stderr)
	}
}

// TestSentinelPartitionHolderCutOff: the old master and one holder on one side; the
// Sentinels, the replica and the other host on the other. The holder reaches no
// Sentinel, so its renewals are unconfirmed and it stops within its lease.
func TestSentinelPartitionHolderCutOff(t *testing.T) {
	checkPartition(t, sentinelPartition(t, 1, nil))
}

// TestSentinelPartitionMinReplicasMinority: 1 master and 3 replicas, one replica cut off
// with the old master and the holder, which uses --min-replicas 1: that replica
// acknowledges every renewal, so WAIT alone would confirm them. The acquire warns that 1
// is not a majority of the 3 replicas.
func TestSentinelPartitionMinReplicasMinority(t *testing.T) {
	o := sentinelPartition(t, 3, []int{2}, "--min-replicas", "1")
	checkPartition(t, o)
	if !strings.Contains(o.stderr, "--min-replicas 1 is not a majority of the 3 replicas") {
		t.Fatalf("holder's stderr %q: want the warning that 1 is not a majority of 3", o.stderr)
	}
}
