//go:build etcd

package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cronlock/internal/etcdtest"
)

// TestEtcdSuspend: suspend and resume on etcd, for two hosts of one --schedule key: the
// suspended tick's runs end suspended without their job, once in the fleet's record, check
// is OK with the reason, and the tick after resume runs.
func TestEtcdSuspend(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	var hosts []*fleetHost
	for _, n := range []string{"vmA", "vmB"} {
		c := newEtcdCLI(t, srv)
		c.env = append(c.env, "CRONLOCK_NODE="+n)
		hosts = append(hosts, &fleetHost{cli: c, node: n})
	}
	_, offs := dayTicks()
	ran := filepath.Join(t.TempDir(), "ran")
	job := func(h *fleetHost, tick int) (int, string) {
		t.Helper()
		code, _, errs := h.at(offs[tick], "run", "-k", "billing", "--schedule", "0 9 * * *", "--tz", "UTC", "-v",
			"--", "sh", "-c", "echo "+h.node+" >> "+ran)
		return code, errs
	}
	ranLines := func() string { b, _ := os.ReadFile(ran); return strings.TrimSpace(string(b)) }

	if code, errs := job(hosts[0], 0); code != 0 || ranLines() != "vmA" {
		t.Fatalf("first tick: exit %d (%s), ran %q", code, errs, ranLines())
	}
	if code, out, errs := hosts[1].run("suspend", "-k", "billing", "--reason", "etcd window"); code != 0 {
		t.Fatalf("suspend: exit %d, %q (%s)", code, out, errs)
	}
	// status without --key finds the suspension by itself.
	if code, out, errs := hosts[0].run("status"); code != 0 || !strings.Contains(out, "billing is suspended by ") || !strings.Contains(out, "etcd window") {
		t.Errorf("status: exit %d, %q (%s); want billing's suspension", code, out, errs)
	}
	for _, h := range hosts {
		if code, errs := job(h, 1); code != 0 || !strings.Contains(errs, "etcd window") || h.rows("billing")[0].Status != "suspended" {
			t.Fatalf("%s while suspended: exit %d, stderr %q, status %s", h.node, code, errs, h.rows("billing")[0].Status)
		}
	}
	if ranLines() != "vmA" {
		t.Fatalf("jobs that ran: %q; want only the first tick's", ranLines())
	}
	n := 0
	for _, r := range fleetRows(t, hosts[0].cli, "--key", "billing") {
		if r.Status == "suspended" {
			n++
		}
		if r.Status == "never_fired" {
			t.Errorf("a never_fired entry: %+v", r)
		}
	}
	if n != 1 {
		t.Errorf("%d suspended entries in the fleet's record; want one for the tick", n)
	}
	if code, out := hosts[0].check(0, "-k", "billing"); code != 0 || !strings.Contains(out, "etcd window") {
		t.Errorf("check while suspended: exit %d, %q; want OK with the reason", code, out)
	}
	if code, _, errs := hosts[0].run("resume", "-k", "billing"); code != 0 {
		t.Fatalf("resume: exit %d (%s)", code, errs)
	}
	if code, errs := job(hosts[1], 2); code != 0 || ranLines() != "vmA\nvmB" {
		t.Fatalf("the tick after resume: exit %d (%s), ran %q", code, errs, ranLines())
	}
}
