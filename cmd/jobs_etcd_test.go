//go:build etcd

package cmd

import (
	"testing"
	"time"

	"cronlock/internal/etcdtest"
)

// TestJobsEtcd: jobs on etcd, from a range read over cronlock's prefix; etcd keeps no
// per-day counters, so the rate comes from the entries it keeps. A standby waiting on
// j-long's tick is counted from its slot.
func TestJobsEtcd(t *testing.T) {
	c := newEtcdCLI(t, etcdtest.Start(t, etcdtest.Options{}))
	release := jobsFleet(t, c)
	defer release()
	sb := c.command("run", "-k", "j-long", "--schedule", "*/5 * * * *", "--tz", "UTC", "--standby", "--", "true")
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	defer sb.Wait()
	defer release() // before the standby's Wait: it ends once j-long's run has
	waitUntil(t, 10*time.Second, "jobs to count the standby of j-long", func() bool {
		return readJobs(t, c, "--key", "j-long")[0].Standbys == 1
	})
	checkJobs(t, c, 5, 4)
	if j := readJobs(t, c, "--key", "j-plain")[0]; j.RateFrom != "entries" {
		t.Errorf("j-plain's rate from %q; want entries", j.RateFrom)
	}
}
