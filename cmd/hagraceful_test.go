package cmd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// A graceful failover (SENTINEL FAILOVER) leaves the old master running and writable,
// with no replica, until the Sentinels reconfigure it seconds later: a holder that kept
// writing to it would renew a lock nobody else sees.

// refereeExit is what a second job exits with when it finds the first one's job alive.
const refereeExit = 42

// TestSentinelGracefulFailoverOneHolder: a holder's renewals follow the master the
// Sentinels name after a SENTINEL FAILOVER, so a run started after the old lease would
// have run out there is still skipped. A kernel lock that each job holds for its whole
// life is the referee: the second job exits 42 when it runs beside the first.
func TestSentinelGracefulFailoverOneHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover")
	}
	d := redistest.StartSentinel(t)
	d.WaitFailoverReady()
	c := newCLI(t, d.URL())
	referee := filepath.Join(c.dir, "referee")
	holder, errb, release := c.startHolding([]string{"run", "-k", "gf", "--ttl", "3s", "--redis-timeout", "1s", "--grace", "300ms"},
		"flock", "-n", referee)
	old := d.MasterAddr()
	if _, err := d.Sentinels[0].Do("SENTINEL", "FAILOVER", d.Name); err != nil {
		t.Fatal(err)
	}
	d.WaitPromoted(old)
	// Past the whole lease as the promoted master last saw it renewed.
	time.Sleep(4 * time.Second)
	code, _, errs := c.run("run", "-k", "gf", "--conflict-exit-code", "99", "--",
		"sh", "-c", "flock -n "+referee+" true || exit 42")
	release()
	hcode := c.exitCode(holder.Wait())
	if code == refereeExit {
		t.Fatalf("a second run took the lock while the first one's job ran (holder: exit %d, %q)", hcode, errb.String())
	}
	// The holder either kept its lock (the second run skipped) or was stopped fail-closed
	// before the second one ran.
	var status string
	for _, r := range c.history("gf") {
		if len(r.Command) > 0 && r.Command[0] == "flock" {
			status = r.Status
		}
	}
	keptOrStopped(t, hcode, status, errb.String())
	if hcode == 0 && code != 99 {
		t.Fatalf("second run: exit %d (%s), want 99 (skipped) while the first held the lock", code, errs)
	}
}

// TestSentinelGracefulFailoverShortJobReleases: a job that ends before its first
// renewal, after a SENTINEL FAILOVER, lets go of its lock on the promoted master (not on
// the old one, still writable for seconds): the next run does not wait for the lease,
// and the fleet's record, read from the new master, has the run.
func TestSentinelGracefulFailoverShortJobReleases(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover")
	}
	d := redistest.StartSentinel(t)
	d.WaitFailoverReady()
	c := newCLI(t, d.URL())
	holder, _, release := c.startHolding([]string{"run", "-k", "gs", "--ttl", "60s"})
	// A release trusts a Sentinels' answer younger than a second: this one is older.
	time.Sleep(1500 * time.Millisecond)
	old := d.MasterAddr()
	if _, err := d.Sentinels[0].Do("SENTINEL", "FAILOVER", d.Name); err != nil {
		t.Fatal(err)
	}
	d.WaitPromoted(old)
	release()
	if code := c.exitCode(holder.Wait()); code != 0 {
		t.Fatalf("holder: exit %d", code)
	}
	if code, _, errs := c.run("run", "-k", "gs", "--conflict-exit-code", "99", "--", "true"); code != 0 {
		t.Fatalf("the next run: exit %d (%s), want 0: the lock was let go on the old master", code, errs)
	}
	if code, out, errs := c.run("history", "--fleet", "-k", "gs", "--json"); code != 0 || strings.Count(out, `"status":"succeeded"`) != 2 {
		t.Fatalf("history --fleet: exit %d (%s): %s, want both runs", code, errs, out)
	}
}
