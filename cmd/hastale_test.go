package cmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// A URL that leads to a replica: the Sentinels still name a master that was made a
// replica by hand, or redis:// names a replica.

// TestReplicaRefusesTheLock: the replica's READONLY is one line that says what to
// check, exit 125, status error, the job not run.
func TestReplicaRefusesTheLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	if _, err := d.Replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Master.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(d.Replica.Port)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, url, want string }{
		{"sentinel", d.URL(), "the server the Sentinels name as the master mymaster is a read-only replica"},
		{"plain", "redis://" + d.Master.Addr, "redis " + d.Master.Addr + " is a read-only replica"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, tc.url)
			ran := filepath.Join(c.dir, "ran")
			code, _, errs := c.run("run", "-k", "ro", "--redis-timeout", "300ms", "--", "touch", ran)
			if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "script:") {
				t.Fatalf("exit %d, stderr %q: want 125 and one line with %q", code, errs, tc.want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Fatal("the job ran without a lock")
			}
			if rows := c.history("ro"); len(rows) != 1 || rows[0].Status != runstatus.Error {
				t.Fatalf("rows %+v, want one error", rows)
			}
		})
	}
}

// TestSentinelsFrozen: Sentinels that accept connections but never answer (SIGSTOP, a
// hung host) are one line naming each and what it did, exit 125, for run and status.
func TestSentinelsFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	for _, s := range d.Sentinels {
		s.Stop()
		t.Cleanup(s.Cont)
	}
	c := newCLI(t, d.URL())
	for _, args := range [][]string{{"run", "-k", "fz", "--", "true"}, {"status"}} {
		code, _, errs := c.run(append(args, "--redis-timeout", "2s")...)
		if code != 125 || strings.Count(errs, "\n") != 1 || strings.Count(errs, "i/o timeout") != 3 {
			t.Errorf("%s: exit %d, stderr %q: want 125 and one line naming each Sentinel", args[0], code, errs)
		}
	}
}

// TestWrongKindOfServer: a URL whose scheme does not fit the server (a data server
// named as a Sentinel or a Cluster node, a Sentinel as a data server or a Cluster node)
// is one line that says which kind it takes, exit 125, without the lock's token.
func TestWrongKindOfServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	data := redistest.Addr(t)
	sentinel := redistest.StartSentinel(t).Sentinels[0].Addr
	for _, tc := range []struct{ url, want string }{
		{"redis-sentinel://" + data + "/mymaster", "it is not a Sentinel"},
		{"redis-cluster://" + data, "it is not a Cluster node"},
		{"redis-cluster://" + sentinel, "is it a Sentinel?"},
		{"redis://" + sentinel, "is it a Sentinel?"},
	} {
		c := newCLI(t, tc.url)
		code, _, errs := c.run("run", "-k", "kind", "--", "true")
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "args beginning") {
			t.Errorf("%s: exit %d, stderr %q: want 125 and one line with %q", tc.url, code, errs, tc.want)
		}
	}
}
