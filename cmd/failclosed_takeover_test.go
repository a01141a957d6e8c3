package cmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// TestStandbyTakesOverFailClosedHolder: a holder frozen past its lease wakes, stops its
// job fail-closed and records lock_lost before the standby asks again. It did not complete
// the tick, so the standby takes it over (attempt 2) rather than skipping a tick nobody
// completed. The standby is frozen meanwhile, so that the holder's record is always
// there first.
func TestStandbyTakesOverFailClosedHolder(t *testing.T) {
	srv := redistest.Start(t)
	off, _ := inMinute()
	hs := standbyFleet(t, "redis://"+srv.Addr+"/0", off, "vmA", "vmB")
	a, aID := hs[0].startJob(t)
	done := hs[1].startStandby(t)
	b := cronlockIn(t, hs[1].dir)
	bTree := freezeTree(b)
	aTree := freezeTree(a.Process.Pid)
	lock := hs[0].prefix() + "{bill}:lock"
	waitUntil(t, 20*time.Second, "vmA's lock expired in Redis", func() bool {
		return mustDo(t, srv.Addr, "EXISTS", lock) == "0"
	})
	signalTree(aTree, syscall.SIGCONT)
	a.Wait()
	if r := hs[0].lastRow(t); r.Status != "lock_lost" {
		t.Fatalf("vmA woken: row %+v; want lock_lost", r)
	}
	signalTree(bTree, syscall.SIGCONT)
	end := awaitEnd(t, done, "vmB's standby")
	j, _ := os.ReadFile(filepath.Join(hs[1].dir, "job"))
	if end.code != 0 || !strings.HasPrefix(string(j), "2 "+aID) {
		t.Fatalf("vmB: exit %d, job saw %q, stderr %q; want a takeover of %s, whose run ended lock_lost", end.code, j, end.errs, aID)
	}
}

// cronlockIn is the pid of the one cronlock process working in dir (a cli's folder).
func cronlockIn(t *testing.T, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink("/proc/" + e.Name() + "/exe")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if exe == cronlockBin && cwd == dir {
			return pid
		}
	}
	t.Fatalf("no cronlock runs in %s", dir)
	return 0
}
