//go:build !etcd

package cmd

import (
	"strings"
	"testing"
)

// etcdBuildTag makes the binary under test an etcd build when the tests are one.
const etcdBuildTag = ""

// TestEtcdNotInDefaultBuild: the default build has no etcd client (it would slow every
// run), and asking it for etcd says in one line how to get a build that has it.
func TestEtcdNotInDefaultBuild(t *testing.T) {
	c := newCLI(t, "")
	for _, args := range [][]string{
		{"run", "--backend", "etcd", "--etcd", "http://127.0.0.1:1", "-k", "x", "--", "true"},
		{"status", "--etcd", "http://127.0.0.1:1"},
	} {
		code, _, errs := c.run(args...)
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "-tags etcd") {
			t.Fatalf("%v: exit %d, stderr %q; want 125 and one line saying how to build with etcd", args, code, errs)
		}
	}
}
