//go:build etcd

package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/internal/etcdtest"
)

// Tests of the edges of once per tick on etcd (README, "Once per tick"), the etcd
// versions of tickedge_test.go's: a data loss is said, ticks nobody claimed are recorded,
// a schedule that changes or flips is marked, and a roll-out's second run is DUPLICATE.

// etcdEdgeRows reads the fleet's record of billing as a monitoring box on srv would.
func etcdEdgeRows(t *testing.T, srv *etcdtest.Server, h *fleetHost) []edgeRow {
	t.Helper()
	m := newEtcdCLI(t, srv)
	m.env = append(m.env, "CRONLOCK_HISTORY=off", "CRONLOCK_NODE=monitor", prefixOf(h.cli))
	code, out, errs := m.run("history", "--fleet", "--json", "--limit", "0", "--key", "billing")
	if code != 0 {
		t.Fatalf("history --fleet exited %d: %s", code, errs)
	}
	return decodeEdgeRows(t, out)
}

// TestEtcdTickDataLoss: the key's records are deleted by hand (or etcd is restored from a
// snapshot older than the key) after vmA ran the tick; vmB, whose cron fires late, runs
// the tick again. etcd has no fencing counter to miss, but vmB knows the key (it was
// skipped for it) and finds neither a tick record nor an entry: it says so in one line,
// and its entry is marked.
func TestEtcdTickDataLoss(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "vmA", "vmB")
	marks := filepath.Join(t.TempDir(), "marks")
	off, tick := inMinute()
	args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--", "sh", "-c", "echo $CRONLOCK_NODE >> " + marks}
	for _, h := range hosts {
		if code, _, errs := h.at(off, args...); code != 0 || errs != "" {
			t.Fatalf("%s: exit %d, stderr %q; want 0 and silence", h.node, code, errs)
		}
	}
	checkRow(t, hosts[1], "skipped", "vmA (run ", tick)
	prefix := envOf(hosts[0].env, "CRONLOCK_PREFIX")
	if _, err := srv.Root().Delete(context.Background(), prefix+"{billing}:", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hosts[1].at(off, args...)
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "lost its data") ||
		!strings.Contains(errs, "may have run already") {
		t.Fatalf("vmB after the data loss: exit %d, stderr %q; want 0 and one line saying etcd lost its data", code, errs)
	}
	if b, _ := os.ReadFile(marks); string(b) != "vmA\nvmB\n" {
		t.Errorf("jobs ran: %q", b)
	}
	rows := etcdEdgeRows(t, srv, hosts[1])
	if len(rows) != 1 || rows[0].Node != "vmB" || !rows[0].DataLoss {
		t.Errorf("fleet's record after the data loss: %+v; want vmB's run marked data_loss", rows)
	}
	// The next run of vmB finds the records again: nothing to say; nor does a host that
	// never claimed the key, on a key it finds empty.
	if code, _, errs := hosts[1].at(off+time.Minute, args...); code != 0 || errs != "" {
		t.Fatalf("vmB next minute: exit %d, stderr %q; want 0 and silence", code, errs)
	}
	if code, _, errs := hosts[0].at(off+time.Minute, append([]string{"run", "-k", "fresh"}, args[3:]...)...); code != 0 || errs != "" {
		t.Fatalf("vmA on a new key: exit %d, stderr %q; want 0 and silence", code, errs)
	}
}

// TestEtcdTickNeverFired: a claim that finds ticks of its schedule between the last
// claimed tick and its own records them once, as never_fired; a tick that came while a
// run of an earlier tick held the lock was fired (and skipped), not never fired.
func TestEtcdTickNeverFired(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "vmA", "vmB", "vmC")
	off, tick := inMinute()
	args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--tz", "UTC", "--"}
	run := func(h *fleetHost, min int) {
		t.Helper()
		if code, _, errs := h.at(off+time.Duration(min)*time.Minute, append(args, "true")...); code != 0 || errs != "" {
			t.Fatalf("%s at +%dm: exit %d, stderr %q", h.node, min, code, errs)
		}
	}
	run(hosts[0], 0)
	run(hosts[0], 3) // nobody fired +1m and +2m
	var nf []edgeRow
	for _, r := range etcdEdgeRows(t, srv, hosts[0]) {
		if r.Status == "never_fired" {
			nf = append(nf, r)
		}
	}
	if len(nf) != 1 || nf[0].NeverFired != 2 || nf[0].NeverFiredFrom == nil || *nf[0].NeverFiredFrom != rfc(tick.Add(time.Minute)) ||
		nf[0].NeverFiredTo == nil || *nf[0].NeverFiredTo != rfc(tick.Add(2*time.Minute)) {
		t.Fatalf("never_fired entries %+v; want one for the 2 ticks %s and %s", nf, rfc(tick.Add(time.Minute)), rfc(tick.Add(2*time.Minute)))
	}

	// vmB's run of +4m lasts past +5m: vmC's cron fires for +5m and is skipped.
	saved := hosts[1].env
	hosts[1].env = append(append([]string(nil), saved...), "CRONLOCK_TEST_CLOCK_OFFSET="+(off+4*time.Minute).String())
	holder, _, release := hosts[1].startHolding(args[:len(args)-1])
	hosts[1].env = saved
	code, _, errs := hosts[2].at(off+5*time.Minute, append(args, "true")...)
	if code != 0 && code != 75 {
		t.Fatalf("vmC at +5m: exit %d, stderr %q", code, errs)
	}
	checkRow(t, hosts[2], "skipped", "vmB", tick.Add(5*time.Minute))
	release()
	if err := holder.Wait(); err != nil {
		t.Fatalf("vmB's long run: %v", err)
	}
	run(hosts[0], 6)
	n := 0
	for _, r := range etcdEdgeRows(t, srv, hosts[0]) {
		if r.Status == "never_fired" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d never_fired entries after a long run held the lock across a tick; want still 1", n)
	}
}

// TestEtcdTickScheduleFlip: claims of one key compare schedules in canonical form with
// the zone; a change is marked in the claim's entry, a change back within 24 hours is a
// flip: one line at each such claim, and the entry says so.
func TestEtcdTickScheduleFlip(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "utc", "berlin")
	off, _ := inMinute()
	for i, s := range []struct {
		h        *fleetHost
		expr, tz string
		flip     bool
	}{
		{hosts[0], "* * * * *", "UTC", false},
		{hosts[0], "*/1 * * * *", "UTC", false},         // the same schedule
		{hosts[1], "* * * * *", "Europe/Berlin", false}, // a change, not yet a flip
		{hosts[0], "* * * * *", "UTC", true},
		{hosts[1], "* * * * *", "Europe/Berlin", true},
	} {
		code, _, errs := s.h.at(off+time.Duration(i)*time.Minute, "run", "-k", "billing", "--schedule", s.expr, "--tz", s.tz, "--", "true")
		if code != 0 {
			t.Fatalf("claim %d: exit %d, stderr %q", i, code, errs)
		}
		if !s.flip && errs != "" {
			t.Fatalf("claim %d (%s %s): stderr %q; want silence", i, s.expr, s.tz, errs)
		}
		if s.flip && (strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "flipped back") || !strings.Contains(errs, "Europe/Berlin")) {
			t.Fatalf("claim %d (%s %s): stderr %q; want one line saying the schedule flipped back", i, s.expr, s.tz, errs)
		}
	}
	rows := etcdEdgeRows(t, srv, hosts[0])
	if len(rows) != 5 {
		t.Fatalf("%d entries; want 5: %+v", len(rows), rows)
	}
	want := []struct { // newest first
		was  string
		flip bool
	}{{"* * * * * UTC", true}, {"* * * * * Europe/Berlin", true}, {"* * * * * UTC", false}, {"", false}, {"", false}}
	for i, w := range want {
		if rows[i].ScheduleWas != w.was || rows[i].ScheduleFlip != w.flip {
			t.Errorf("entry %d (%s): schedule_was %q, flip %v; want %q, %v", i, rows[i].Node, rows[i].ScheduleWas, rows[i].ScheduleFlip, w.was, w.flip)
		}
	}
}

// TestEtcdRolloutDuplicate: during a roll-out one host runs the line with --schedule and
// another still without it; both run the job between two ticks: DUPLICATE. A run of
// another command in that minute is not.
func TestEtcdRolloutDuplicate(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	hosts := etcdHosts(t, srv, "new", "old", "other")
	// Real time (the record's) well inside a minute, for the runs to fall in it.
	switch s := time.Since(time.Now().Truncate(time.Minute)); {
	case s < 2*time.Second:
		time.Sleep(2*time.Second - s)
	case s > 45*time.Second:
		time.Sleep(time.Minute + 2*time.Second - s)
	}
	job := []string{"--", "sh", "-c", "true"}
	if code, _, errs := hosts[0].run(append([]string{"run", "-k", "billing", "--schedule", "* * * * *", "--tz", "UTC"}, job...)...); code != 0 {
		t.Fatalf("new: exit %d, %s", code, errs)
	}
	if code, _, errs := hosts[1].run(append([]string{"run", "-k", "billing"}, job...)...); code != 0 {
		t.Fatalf("old: exit %d, %s", code, errs)
	}
	if code, _, errs := hosts[2].run("run", "-k", "billing", "--", "sh", "-c", "exit 0"); code != 0 {
		t.Fatalf("other: exit %d, %s", code, errs)
	}
	rows := etcdEdgeRows(t, srv, hosts[0])
	if len(rows) != 3 {
		t.Fatalf("%d entries; want 3: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if want := r.Node != "other"; r.Duplicate != want {
			t.Errorf("%s: duplicate %v; want %v", r.Node, r.Duplicate, want)
		}
	}
}
