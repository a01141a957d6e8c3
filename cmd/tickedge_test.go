package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// Tests of the edges of once per tick: the backend's clock decides the tick
// and the start deadline, a data loss is said, ticks nobody claimed are recorded, and a
// schedule that changes or flips is marked. Hosts are simulated as in tick_test.go.

// dailyAt is a daily schedule (UTC) whose tick is t's minute: its ticks are a day apart,
// so a skew of minutes passes a --max-skew of minutes.
func dailyAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d * * *", t.Minute(), t.Hour())
}

// TestTickBackendClockEarly: a host whose clock is ahead (within --max-skew) and past
// tick + --start-deadline on its own clock, before the tick has come on Redis's clock,
// must not call the tick missed (leaving it to nobody): it waits for the tick on Redis's
// clock and runs the job then; the on-time host is skipped.
func TestTickBackendClockEarly(t *testing.T) {
	hosts := newFleet(t, "redis", "fast", "ontime")
	marks := filepath.Join(t.TempDir(), "marks")
	now := time.Now()
	tick := now.Truncate(time.Minute).Add(time.Minute)
	if tick.Sub(now) < 2*time.Second {
		tick = tick.Add(time.Minute)
	}
	args := []string{"run", "-k", "billing", "--schedule", dailyAt(tick), "--tz", "UTC", "--max-skew", "2m",
		"--start-deadline", "20s", "--", "sh", "-c", "date +%s.%N >> " + marks}
	// The fast host's clock says tick + 21 s: past its deadline, while Redis's is before
	// the tick.
	off := tick.Add(21 * time.Second).Sub(time.Now())
	code, _, errs := hosts[0].at(off, args...)
	if code != 0 || errs != "" {
		t.Fatalf("fast host: exit %d, stderr %q; want 0 and silence", code, errs)
	}
	checkRow(t, hosts[0], "succeeded", "", tick)
	b, _ := os.ReadFile(marks)
	ran, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("the job did not run once (marks %q)", b)
	}
	if at := time.Unix(0, int64(ran*1e9)); at.Before(tick) {
		t.Errorf("the job ran at %v, %v before its tick %v", at, tick.Sub(at), tick)
	}
	// Cron on the host with a good clock fires now, just after the tick.
	if code, _, errs := hosts[1].at(0, args...); code != 0 || errs != "" {
		t.Fatalf("on-time host: exit %d, stderr %q", code, errs)
	}
	checkRow(t, hosts[1], "skipped", "fast (run ", tick)
	if b, _ := os.ReadFile(marks); strings.Count(string(b), "\n") != 1 {
		t.Errorf("the job ran %d times; want once", strings.Count(string(b), "\n"))
	}
}

// TestTickBackendClockMissed: a host whose clock is behind judges itself within its
// --start-deadline; Redis's clock says the tick is past it: the run is missed, and the
// job does not run.
func TestTickBackendClockMissed(t *testing.T) {
	hosts := newFleet(t, "redis", "slow")
	marks := filepath.Join(t.TempDir(), "marks")
	now := time.Now()
	tick := now.Truncate(time.Minute)
	if now.Sub(tick) < 30*time.Second {
		tick = tick.Add(-time.Minute)
	}
	off := tick.Add(5 * time.Second).Sub(time.Now()) // the host's clock: 5 s after the tick
	code, _, errs := hosts[0].at(off, "run", "-k", "billing", "--schedule", dailyAt(tick), "--tz", "UTC", "--max-skew", "2m",
		"--start-deadline", "20s", "--", "sh", "-c", "echo ran >> "+marks)
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "missed the") {
		t.Fatalf("slow host: exit %d, stderr %q; want 0 and one line saying the tick was missed", code, errs)
	}
	checkRow(t, hosts[0], "missed", "", tick)
	if _, err := os.Stat(marks); err == nil {
		t.Error("a run past its deadline on Redis's clock ran its job")
	}
}

// edgeRow is the part of `history --fleet --json` the tests of this file read.
type edgeRow struct {
	ID             string  `json:"id"`
	Node           string  `json:"node"`
	Status         string  `json:"status"`
	ScheduledFor   *string `json:"scheduled_for"`
	Duplicate      bool    `json:"duplicate"`
	DataLoss       bool    `json:"data_loss"`
	ScheduleWas    string  `json:"schedule_was"`
	ScheduleFlip   bool    `json:"schedule_flip"`
	NeverFiredFrom *string `json:"never_fired_from"`
	NeverFiredTo   *string `json:"never_fired_to"`
	NeverFired     int     `json:"never_fired"`
}

// edgeRows reads the fleet's record of billing as a monitoring box on url would.
func edgeRows(t *testing.T, h *fleetHost, url string) []edgeRow {
	t.Helper()
	m := newCLI(t, url)
	m.env = append(m.env, "CRONLOCK_HISTORY=off", "CRONLOCK_NODE=monitor", prefixOf(h.cli))
	code, out, errs := m.run("history", "--fleet", "--json", "--limit", "0", "--key", "billing")
	if code != 0 {
		t.Fatalf("history --fleet exited %d: %s", code, errs)
	}
	return decodeEdgeRows(t, out)
}

// decodeEdgeRows reads the lines of `history --fleet --json`.
func decodeEdgeRows(t *testing.T, out string) []edgeRow {
	t.Helper()
	var rows []edgeRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r edgeRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("history --fleet line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestTickDataLoss: Redis restarts without persistence after vmA ran the tick; vmB,
// whose cron fires late, runs the tick again. That cannot be prevented (the record of
// the claim is gone), but it is never silent: vmB knows the key (it was skipped for it
// before), finds its fencing counter gone, says so in one line, and its entry in the
// fleet's record is marked.
func TestTickDataLoss(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr + "/0"
	hosts := newFleet(t, "redis", "vmA", "vmB")
	for _, h := range hosts {
		h.env = append(h.env, "CRONLOCK_REDIS_URL="+url)
	}
	marks := filepath.Join(t.TempDir(), "marks")
	off, tick := inMinute()
	args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--", "sh", "-c", "echo $CRONLOCK_NODE >> " + marks}
	for _, h := range hosts {
		if code, _, errs := h.at(off, args...); code != 0 || errs != "" {
			t.Fatalf("%s: exit %d, stderr %q; want 0 and silence", h.node, code, errs)
		}
	}
	checkRow(t, hosts[1], "skipped", "vmA (run ", tick)
	srv.Restart() // no AOF, no RDB: every key is gone
	code, _, errs := hosts[1].at(off, args...)
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "lost its data") ||
		!strings.Contains(errs, "may have run already") {
		t.Fatalf("vmB after the data loss: exit %d, stderr %q; want 0 and one line saying Redis lost its data", code, errs)
	}
	if b, _ := os.ReadFile(marks); string(b) != "vmA\nvmB\n" {
		t.Errorf("jobs ran: %q", b)
	}
	rows := edgeRows(t, hosts[1], url)
	if len(rows) != 1 || rows[0].Node != "vmB" || !rows[0].DataLoss {
		t.Errorf("fleet's record after the data loss: %+v; want vmB's run marked data_loss", rows)
	}
	// The next run of vmB finds the counter again: nothing to say.
	if code, _, errs := hosts[1].at(off+time.Minute, append([]string{"run", "-k", "billing", "--max-skew", "0"}, args[3:]...)...); code != 0 || errs != "" {
		t.Fatalf("vmB next minute: exit %d, stderr %q; want 0 and silence", code, errs)
	}
}

// TestTickNeverFired: a claim that finds ticks of its schedule between the last claimed
// tick and its own records them once, as never_fired (which and how many); a tick that
// came while a run of an earlier tick held the lock was fired (and skipped), not never
// fired.
func TestTickNeverFired(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB", "vmC")
	off, tick := inMinute()
	args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--tz", "UTC", "--max-skew", "0", "--"}
	run := func(h *fleetHost, min int) {
		t.Helper()
		if code, _, errs := h.at(off+time.Duration(min)*time.Minute, append(args, "true")...); code != 0 || errs != "" {
			t.Fatalf("%s at +%dm: exit %d, stderr %q", h.node, min, code, errs)
		}
	}
	run(hosts[0], 0)
	run(hosts[0], 3) // nobody fired +1m and +2m
	url := "redis://" + redistest.Addr(t) + "/0"
	var nf []edgeRow
	for _, r := range edgeRows(t, hosts[0], url) {
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
	run(hosts[2], 5)
	checkRow(t, hosts[2], "skipped", "vmB", tick.Add(5*time.Minute))
	release()
	if err := holder.Wait(); err != nil {
		t.Fatalf("vmB's long run: %v", err)
	}
	run(hosts[0], 6)
	n := 0
	for _, r := range edgeRows(t, hosts[0], url) {
		if r.Status == "never_fired" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d never_fired entries after a long run held the lock across a tick; want still 1", n)
	}
}

// TestTickScheduleFlip: claims of one key compare schedules in canonical form (*/1 and *
// are one schedule) with the zone. A change is marked in the claim's entry; a change
// back within 24 hours (hosts that disagree on the zone run the job twice a day) is a
// flip: one line at each such claim, and the entry says so.
func TestTickScheduleFlip(t *testing.T) {
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) { testScheduleFlip(t, backend) })
	}
}

func testScheduleFlip(t *testing.T, backend string) {
	hosts := newFleet(t, backend, "utc", "berlin")
	off, _ := inMinute()
	run := func(h *fleetHost, min int, expr, tz string) string {
		t.Helper()
		code, _, errs := h.at(off+time.Duration(min)*time.Minute, "run", "-k", "billing", "--schedule", expr, "--tz", tz,
			"--max-skew", "0", "--", "true")
		if code != 0 {
			t.Fatalf("%s at +%dm: exit %d, stderr %q", h.node, min, code, errs)
		}
		return errs
	}
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
		errs := run(s.h, i, s.expr, s.tz)
		if !s.flip && errs != "" {
			t.Fatalf("claim %d (%s %s): stderr %q; want silence", i, s.expr, s.tz, errs)
		}
		if s.flip && (strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "flipped back") || !strings.Contains(errs, "Europe/Berlin")) {
			t.Fatalf("claim %d (%s %s): stderr %q; want one line saying the schedule flipped back", i, s.expr, s.tz, errs)
		}
	}
	if backend != "redis" {
		return // no fleet's record: the lines are what the local backend says
	}
	rows := edgeRows(t, hosts[0], "redis://"+redistest.Addr(t)+"/0")
	if len(rows) != 5 {
		t.Fatalf("%d entries; want 5: %+v", len(rows), rows)
	}
	// Newest first.
	want := []struct {
		was  string
		flip bool
	}{{"* * * * * UTC", true}, {"* * * * * Europe/Berlin", true}, {"* * * * * UTC", false}, {"", false}, {"", false}}
	for i, w := range want {
		if rows[i].ScheduleWas != w.was || rows[i].ScheduleFlip != w.flip {
			t.Errorf("entry %d (%s): schedule_was %q, flip %v; want %q, %v", i, rows[i].Node, rows[i].ScheduleWas, rows[i].ScheduleFlip, w.was, w.flip)
		}
	}
}

// TestRolloutDuplicate: during a roll-out one host runs the line with --schedule and
// another still without it; both run the job between two ticks: DUPLICATE, as two claims
// of one tick are. A run of another command in that minute is not.
func TestRolloutDuplicate(t *testing.T) {
	hosts := newFleet(t, "redis", "new", "old", "other")
	// Real time (the record's) well inside a minute, for both runs to fall in it.
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
	for _, r := range edgeRows(t, hosts[0], "redis://"+redistest.Addr(t)+"/0") {
		if want := r.Node != "other"; r.Duplicate != want {
			t.Errorf("%s: duplicate %v; want %v", r.Node, r.Duplicate, want)
		}
	}
}

// TestTickDataLossLocal: on the local backend the lock file is the key's record. Deleted
// since this host's last claim in this boot (by hand, or a cleaner of old files in /tmp),
// its tick record is gone and the tick runs again: one line says so. (A lock folder in
// /run emptied by a reboot is no news: only claims since this boot count.)
func TestTickDataLossLocal(t *testing.T) {
	h := newFleet(t, "local", "vmA")[0]
	marks := filepath.Join(t.TempDir(), "marks")
	off, _ := inMinute()
	args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--", "sh", "-c", "echo ran >> " + marks}
	if code, _, errs := h.at(off, args...); code != 0 || errs != "" {
		t.Fatalf("first run: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := h.at(off, args...); code != 0 || errs != "" {
		t.Fatalf("second run of the tick: exit %d, stderr %q; want a silent skip", code, errs)
	}
	var dir string
	for _, kv := range h.env { // the last setting wins
		if v, ok := strings.CutPrefix(kv, "CRONLOCK_LOCK_DIR="); ok {
			dir = v
		}
	}
	lock := filepath.Join(dir, "billing.lock")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	code, _, errs := h.at(off, args...)
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "lost its data") || !strings.Contains(errs, lock) {
		t.Fatalf("after the lock file was deleted: exit %d, stderr %q; want 0 and one line naming the lost file", code, errs)
	}
	if b, _ := os.ReadFile(marks); string(b) != "ran\nran\n" {
		t.Errorf("jobs ran: %q", b)
	}
}

// TestTickBackendClockEarlyInterrupted: a stop signal during the sleep for a tick that
// has not come on Redis's clock ends the run as interrupted; the job never starts and the
// tick stays unclaimed, for the hosts whose cron fires at it.
func TestTickBackendClockEarlyInterrupted(t *testing.T) {
	h := newFleet(t, "redis", "fast")[0]
	marker := filepath.Join(t.TempDir(), "ran")
	now := time.Now()
	tick := now.Truncate(time.Minute).Add(time.Minute)
	if tick.Sub(now) < 5*time.Second {
		tick = tick.Add(time.Minute)
	}
	saved := h.env
	h.env = append(append([]string(nil), saved...), "CRONLOCK_TEST_CLOCK_OFFSET="+tick.Add(time.Second).Sub(now).String())
	cmd, sc := h.startUntil(lineHas("has not come yet"), "run", "-v", "-k", "billing", "--schedule", dailyAt(tick), "--tz", "UTC",
		"--max-skew", "2m", "--", "touch", marker)
	h.env = saved
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	if code := h.exitCode(cmd.Wait()); code != 128+15 {
		t.Fatalf("exit %d, want 143", code)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the job ran although the run was stopped while it waited for its tick")
	}
	checkRow(t, h, "interrupted", "", tick)
	if v, _ := redistest.Do(redistest.Addr(t), "GET", strings.TrimPrefix(prefixOf(h.cli), "CRONLOCK_PREFIX=")+"{billing}:tick"); v != "" {
		t.Errorf("the tick record after the interrupted run: %s; want none", v)
	}
}
