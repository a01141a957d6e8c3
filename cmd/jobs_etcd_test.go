//go:build etcd

package cmd

import (
	"testing"

	"cronlock/internal/etcdtest"
)

// TestJobsEtcd: jobs on etcd, from a range read over cronlock's prefix; etcd keeps no
// per-day counters, so the rate comes from the entries it keeps.
func TestJobsEtcd(t *testing.T) {
	c := newEtcdCLI(t, etcdtest.Start(t, etcdtest.Options{}))
	release := jobsFleet(t, c)
	defer release()
	checkJobs(t, c, 5, 4)
	if j := readJobs(t, c, "--key", "j-plain")[0]; j.RateFrom != "entries" {
		t.Errorf("j-plain's rate from %q; want entries", j.RateFrom)
	}
}
