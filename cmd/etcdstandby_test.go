//go:build etcd

package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"cronlock/internal/etcdtest"
)

// TestEtcdStandbyTakesOverLostHost is the lost-VM story on etcd: vmA's cronlock and job
// tree are SIGKILLed, and vmB's standby takes the tick over as attempt 2 once vmA's etcd
// lease ended; a third host with --standby after vmB completed skips.
func TestEtcdStandbyTakesOverLostHost(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	off, _ := inMinute()
	hs := standbyFleet(t, "", off, "vmA", "vmB", "vmC")
	for _, h := range hs {
		h.env = append(h.env, srv.Env()...)
	}
	a, aID := hs[0].startJob(t)
	done := hs[1].startStandby(t)
	signalTree(processTree(a.Process.Pid), syscall.SIGKILL)
	a.Wait()
	end := awaitEnd(t, done, "vmB's standby")
	b, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
	if end.code != 0 || !strings.HasPrefix(string(b), "2 "+aID) {
		t.Fatalf("vmB: exit %d, job saw %q, stderr %q; want a takeover of %s", end.code, b, end.errs, aID)
	}
	es := fleetEntries(t, hs[2])
	if ea := es[aID]; ea == nil || ea["status"] != "abandoned" {
		t.Fatalf("vmA's entry %v; want abandoned", ea)
	}
	row := hs[1].lastRow(t)
	code, _, errs := hs[2].run(runArgs([]string{"--standby"}, "echo C ran")...)
	if r := hs[2].lastRow(t); code != 0 || r.Status != "skipped" || !strings.Contains(r.Error, row.ID) {
		t.Fatalf("vmC: exit %d, row %+v, stderr %q; want skipped naming %s", code, r, errs, row.ID)
	}
}
