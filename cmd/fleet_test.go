package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/internal/redistest"
	"cronlock/runview"
)

// Tests of the fleet's record through the built binary, against real Redis.

func prefixOf(c *cli) string {
	for i := len(c.env) - 1; i >= 0; i-- {
		if strings.HasPrefix(c.env[i], "CRONLOCK_PREFIX=") {
			return c.env[i]
		}
	}
	return ""
}

// ledgerKey is the Redis name of key's ledger (a hash by run id); its sibling names
// (":order", ":days", ":lock", ":tick") share the prefix.
func ledgerKey(c *cli, key string) string {
	return strings.TrimPrefix(prefixOf(c), "CRONLOCK_PREFIX=") + "{" + key + "}:ledger"
}

// sibling is the Redis name of key's kind ("lock", "tick", "order"…).
func sibling(c *cli, key, kind string) string {
	return strings.TrimSuffix(ledgerKey(c, key), "ledger") + kind
}

// ledgerEntries reads key's ledger: run id -> entry (the "~" fields left out).
func ledgerEntries(t *testing.T, c *cli, key string) map[string]string {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	defer rc.Close()
	m, err := rc.HGetAll(context.Background(), ledgerKey(c, key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for id := range m {
		if strings.HasPrefix(id, "~") {
			delete(m, id)
		}
	}
	return m
}

// checkEntrySizes checks every entry of key's ledger is at most 640 bytes, and the
// MEMORY USAGE of the ledger and its order at most 640 + 300 bytes an entry; it returns
// how many entries there are.
func checkEntrySizes(t *testing.T, c *cli, key string) int {
	t.Helper()
	es := ledgerEntries(t, c, key)
	longest := 0
	for id, e := range es {
		longest = max(longest, len(e))
		if len(e) > 640 {
			t.Errorf("entry %s is %d bytes; want at most 640: %s", id, len(e), e)
		}
	}
	addr := redistest.Addr(t)
	mem := 0
	for _, k := range []string{ledgerKey(c, key), sibling(c, key, "order")} {
		m, err := redistest.Do(addr, "MEMORY", "USAGE", k)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(m)
		mem += n
	}
	if count := len(es); count > 0 && mem > (640+300)*count+512 {
		t.Errorf("MEMORY USAGE of %d entries is %d bytes; want at most %d", count, mem, (640+300)*count+512)
	}
	t.Logf("%d entries, longest %d bytes, MEMORY USAGE of ledger and order %d bytes", len(es), longest, mem)
	return len(es)
}

// TestFleetRecord: three hosts' succeeded, failed, timeout, missed and error runs are in
// the record, read from a monitoring box that has only the URL; a tick skip writes no
// entry of its own and is counted in the entry of the run that took the tick; every
// entry is at most 512 bytes and the record expires in 400 days.
func TestFleetRecord(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB", "vmC")
	off, tick := inMinute()
	sched := []string{"--schedule", "* * * * *"}
	want := []struct {
		h      *fleetHost
		args   []string
		code   int
		status string
	}{
		{hosts[0], append(sched, "--", "true"), 0, "succeeded"},
		{hosts[1], append(sched, "--", "true"), 0, "skipped"}, // the tick is taken: no entry
		{hosts[2], append(sched, "--", "true"), 0, "skipped"},
		{hosts[1], []string{"--", "sh", "-c", "exit 3"}, 3, "failed"},
		{hosts[2], []string{"--timeout", "100ms", "--", "sleep", "5"}, 124, "timeout"},
		{hosts[0], []string{"--", "/nonexistent/job"}, 127, "error"},
	}
	// missed first: past --start-deadline of the last 09:00 tick that has come, a tick
	// before the others' (a later claim would make it a plain skip). Before 09:10 UTC that
	// is yesterday's: today's would be a tick in the future, which the others' ticks of
	// this minute would then come before.
	now := time.Now().UTC()
	nine := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC)
	if now.Before(nine.Add(10 * time.Minute)) {
		nine = nine.AddDate(0, 0, -1)
	}
	if code, _, errs := hosts[1].at(nine.Add(10*time.Minute).Sub(now), "run", "-k", "billing", "--schedule", "0 9 * * *",
		"--tz", "UTC", "--max-skew", "0", "--start-deadline", "5m", "--", "true"); code != 0 {
		t.Fatalf("missed run: exit %d (%s)", code, errs)
	}
	for _, w := range want {
		if code, _, errs := w.h.at(off, append([]string{"run", "-k", "billing"}, w.args...)...); code != w.code {
			t.Fatalf("%s %q: exit %d (%s); want %d", w.h.node, w.args, code, errs, w.code)
		}
	}
	// error: a clock 45 s ahead.
	if code, _, errs := hosts[2].at(45*time.Second, append([]string{"run", "-k", "billing"}, append(sched, "--", "true")...)...); code != 125 {
		t.Fatalf("skewed run: exit %d (%s); want 125", code, errs)
	}

	m := monitor(t, hosts[0])
	rows := fleetRows(t, m, "--key", "billing")
	var got []string
	for _, r := range rows {
		got = append(got, r.Node+":"+r.Status)
	}
	wantRows := "vmC:error vmA:error vmC:timeout vmB:failed vmA:succeeded vmB:missed"
	if strings.Join(got, " ") != wantRows {
		t.Fatalf("history --fleet, newest first: %s; want %s", strings.Join(got, " "), wantRows)
	}
	first := rows[len(rows)-2]
	if first.ScheduledFor == nil || *first.ScheduledFor != rfc(tick) || first.Skips != 2 || first.Tries != 1 ||
		first.FencingToken == 0 || first.FinishedAt == nil || first.Duplicate {
		t.Errorf("the ticked run's entry: %+v; want tick %s, 2 skips, a fencing token, an end, no DUPLICATE", first, rfc(tick))
	}
	if r := rows[len(rows)-1]; r.Exit == nil || *r.Exit != 0 || r.ScheduledFor == nil || *r.ScheduledFor != rfc(nine) {
		t.Errorf("missed entry: %+v; want exit 0 and the 09:00 tick", r)
	}
	if r := rows[0]; !strings.Contains(r.Error, "45s ahead of") || len(r.Error) > 200 || r.FencingToken != 0 {
		t.Errorf("error entry: %+v; want the start of the skew error (200 bytes at most) and no fencing token", r)
	}
	for _, r := range rows {
		if r.Duplicate {
			t.Errorf("%s %s marked DUPLICATE; the runs did not overlap", r.Node, r.Status)
		}
	}
	checkEntrySizes(t, m, "billing")
	for _, k := range []string{"ledger", "order", "days", "tick"} {
		ttl, err := redistest.Do(redistest.Addr(t), "PTTL", sibling(m, "billing", k))
		if d, _ := strconv.ParseInt(ttl, 10, 64); err != nil || d < 399*24*3600*1000 || d > 400*24*3600*1000 {
			t.Errorf("PTTL of %s: %s (%v); want 400 days", k, ttl, err)
		}
	}

	// The table for people, and stats in history stats' format.
	code, out, errs := m.run("history", "--fleet")
	if code != 0 || !strings.Contains(out, "vmB") || !strings.Contains(out, "2 skipped") || !strings.Contains(out, "TICK") {
		t.Errorf("history --fleet (exit %d, %s):\n%s", code, errs, out)
	}
	code, out, errs = m.run("history", "stats", "--fleet", "--json")
	var st runview.StatsJSON
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Key != "billing" || st.Runs != 6 || st.Succeeded != 1 || st.Failed != 5 {
		t.Errorf("history stats --fleet --json (exit %d, %s): %s; want 6 runs of billing, 1 succeeded", code, errs, out)
	}
}

// TestFleetBounded: CRONLOCK_FLEET_KEEP caps the record; a long error and a long node
// name still make entries of at most 512 bytes.
func TestFleetBounded(t *testing.T) {
	hosts := newFleet(t, "redis", strings.Repeat("n", 300))
	h := hosts[0]
	h.env = append(h.env, "CRONLOCK_FLEET_KEEP=3")
	for i := 0; i < 5; i++ {
		long := "/nonexistent/" + strings.Repeat("é", 200) + strconv.Itoa(i)
		if code, _, errs := h.run("run", "-k", "billing", "--", long); code != 127 {
			t.Fatalf("exit %d (%s); want 127", code, errs)
		}
	}
	if n := checkEntrySizes(t, h.cli, "billing"); n != 3 {
		t.Errorf("%d entries kept; want CRONLOCK_FLEET_KEEP=3", n)
	}
	rows := fleetRows(t, monitor(t, h), "--key", "billing")
	if len(rows) != 3 || !strings.HasSuffix(rows[0].Error, "é") && !strings.Contains(rows[0].Error, "é") {
		t.Errorf("rows %+v; want 3, with the error's start", rows)
	}
	for _, bad := range []string{"0", "-1", "many", "100001"} {
		h.env = append(h.env, "CRONLOCK_FLEET_KEEP="+bad)
		code, _, errs := h.run("run", "-k", "billing", "--", "true")
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "CRONLOCK_FLEET_KEEP") {
			t.Errorf("CRONLOCK_FLEET_KEEP=%s: exit %d, %q; want 125 and one line naming it", bad, code, errs)
		}
	}
}

// TestFleetDuplicate: a real overlap. vmA's lock is deleted under its run, which goes on
// (--on-lock-lost continue); vmB then takes the free lock and runs too. Both entries
// are marked DUPLICATE, from a monitoring box; earlier runs are not.
func TestFleetDuplicate(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB")
	if code, _, errs := hosts[0].run("run", "-k", "billing", "--", "true"); code != 0 {
		t.Fatalf("first run: exit %d (%s)", code, errs)
	}
	lock := sibling(hosts[0].cli, "billing", "lock")
	dir := t.TempDir()
	a := hosts[0].command("run", "-k", "billing", "--ttl", "3s", "--on-lock-lost", "continue", "--",
		"sh", "-c", "touch "+dir+"/a; sleep 2")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(dir + "/a"); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("vmA's job did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := redistest.Do(redistest.Addr(t), "DEL", lock); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := hosts[1].run("run", "-k", "billing", "--", "sleep", "0.2"); code != 0 {
		t.Fatalf("vmB: exit %d (%s); want 0: the lock was free", code, errs)
	}
	a.Wait()
	rows := fleetRows(t, monitor(t, hosts[0]), "--key", "billing")
	if len(rows) != 3 {
		t.Fatalf("rows %+v; want 3", rows)
	}
	dup := map[string]bool{}
	for _, r := range rows {
		if r.Duplicate {
			dup[r.Node+":"+r.ID] = true
		}
	}
	if !rows[0].Duplicate || !rows[1].Duplicate || rows[2].Duplicate {
		t.Errorf("DUPLICATE marks %+v; want the two overlapping runs marked, not the first", rows)
	}
	code, out, _ := monitor(t, hosts[0]).run("history", "--fleet", "--key", "billing")
	if code != 0 || strings.Count(out, "DUPLICATE") != 2 {
		t.Errorf("history --fleet table (exit %d):\n%s", code, out)
	}
}

// TestFleetRoundTrips: a short run writes its entry with the claim and completes it with
// the release: at most 3 round trips in all, and the entry is there, completed.
func TestFleetRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	// A first run loads the scripts (a new server answers NOSCRIPT once per script).
	if code, _, errs := c.run("run", "-k", "warm", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c.run("run", "-k", "rt", "--schedule", "* * * * *", "--", "sh", "-c", "echo out; echo err >&2"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	n, evals, claims := 0, 0, 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		k, _ := strconv.Atoi(calls)
		switch name {
		case "cmdstat_eval", "cmdstat_evalsha":
			evals += k
		case "cmdstat_hsetnx":
			claims = k
		}
		if !ok || !strings.HasPrefix(name, "cmdstat_") || scriptCommands[strings.Split(strings.TrimPrefix(name, "cmdstat_"), "|")[0]] {
			continue
		}
		n += k
	}
	// The entry's HSETNX ran inside the acquire's EVAL: two scripts in all, acquire and
	// release.
	if n > 3 || evals != 2 || claims != 1 {
		t.Errorf("%d round trips, %d EVAL, %d HSETNX for a short run; want at most 3, 2 and 1", n, evals, claims)
	}
	if l, _ := srv.Do("HLEN", ledgerKey(c, "rt")); l != "2" { // the entry and the last success's id
		t.Errorf("HLEN of the ledger: %s; want 2", l)
	}
	if l, _ := srv.Do("ZCARD", sibling(c, "rt", "order")); l != "1" {
		t.Errorf("ZCARD of the ledger's order: %s; want 1", l)
	}
}

// TestFleetRunningThenAbandoned: a run that holds the lock shows as running; once its
// cronlock is SIGKILLed and the lock expires, its claimed tick has no entry and shows as
// abandoned.
func TestFleetRunningThenAbandoned(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA")
	off, tick := inMinute()
	dir := t.TempDir()
	h := hosts[0]
	h.env = append(h.env, "CRONLOCK_TEST_CLOCK_OFFSET="+off.String())
	a := h.command("run", "-k", "billing", "--ttl", "1s", "--schedule", "* * * * *", "--",
		"sh", "-c", "touch "+dir+"/a; sleep 30")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	for i := 0; ; i++ {
		if _, err := os.Stat(dir + "/a"); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("the job did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := monitor(t, h)
	if rows := fleetRows(t, m, "--key", "billing"); len(rows) != 1 || rows[0].Status != "running" ||
		rows[0].ScheduledFor == nil || *rows[0].ScheduledFor != rfc(tick) || rows[0].Node != "vmA" {
		t.Fatalf("while the run holds the lock: %+v; want one running entry of vmA for %s", rows, rfc(tick))
	}
	a.Process.Kill()
	a.Wait()
	// The lease (1 s) runs out on the Redis clock.
	lock := sibling(h.cli, "billing", "lock")
	for i := 0; ; i++ {
		if v, _ := redistest.Do(redistest.Addr(t), "EXISTS", lock); v == "0" {
			break
		}
		if i > 300 {
			t.Fatal("the lock did not expire")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows := fleetRows(t, m, "--key", "billing")
	if len(rows) != 1 || rows[0].Status != "abandoned" || rows[0].ScheduledFor == nil || *rows[0].ScheduledFor != rfc(tick) {
		t.Fatalf("after the kill and the expiry: %+v; want one abandoned entry for %s", rows, rfc(tick))
	}
}

// TestFleetSlowReader: when cronlock's stdout is a pipe nobody reads yet, the lock goes
// as soon as the job ends, and the entry follows once the output is through, with the
// final outcome.
func TestFleetSlowReader(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA")
	h := hosts[0]
	dir := t.TempDir()
	// 1.5 MiB: more than the pipe to the reader holds (cronlock grows it to 1 MiB), less
	// than both pipes on the way: the job ends while cronlock still has output to pass on.
	const size = 3 << 19
	c := h.command("run", "-k", "billing", "--", "sh", "-c", "head -c "+strconv.Itoa(size)+" /dev/zero; touch "+dir+"/done")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout = w
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	lock := sibling(h.cli, "billing", "lock")
	for i := 0; ; i++ {
		if _, err := os.Stat(dir + "/done"); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("the job did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The lock goes although the reader has not read a byte; the entry waits.
	for i := 0; ; i++ {
		if held, _ := redistest.Do(redistest.Addr(t), "EXISTS", lock); held == "0" {
			break
		}
		if i > 500 {
			t.Fatal("the lock was kept while the output waited for its reader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if es := ledgerEntries(t, h.cli, "billing"); len(es) != 1 || !strings.Contains(fmt.Sprint(es), `"s":"running"`) {
		t.Errorf("entries before the output was through: %v; want the claim's entry, still running (its outcome was not final)", es)
	}
	b := make([]byte, 64<<10)
	total := 0
	for {
		n, err := r.Read(b)
		total += n
		if err != nil {
			break
		}
	}
	if err := c.Wait(); err != nil || total != size {
		t.Fatalf("cronlock: %v (read %d bytes)", err, total)
	}
	rows := fleetRows(t, monitor(t, h), "--key", "billing")
	if len(rows) != 1 || rows[0].Status != "succeeded" || rows[0].FinishedAt == nil {
		t.Fatalf("entries %+v; want one succeeded run", rows)
	}
}

// TestFleetWriteRefused: a server that refuses the entry (an ACL without list rights)
// changes neither the run's status nor its exit code, and the lock is released; the
// warning says so once, then not again within the hour, and never names the password.
func TestFleetWriteRefused(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "cronlock", "on", ">fleet-pass-7731", "resetkeys", "~*", "resetchannels", "&*",
		"-@all", "+eval", "+get", "+set", "+del", "+pexpire", "+pttl", "+time", "+publish", "+info", "+lrange", "+exists"); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, "redis://cronlock:fleet-pass-7731@"+srv.Addr+"/0")
	for i, wantWarn := range []bool{true, false} {
		code, out, errs := c.run("run", "-k", "acl", "--", "echo", "ran")
		if code != 0 || out != "ran\n" || strings.Contains(errs, "fleet-pass") ||
			(strings.Count(errs, "\n") == 1 && strings.Contains(errs, "fleet's record")) != wantWarn || (!wantWarn && errs != "") {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want 0, ran, and a warning %v", i+1, code, out, errs, wantWarn)
		}
		if rows := c.history("acl"); rows[0].Status != "succeeded" {
			t.Fatalf("run %d: status %s; want succeeded", i+1, rows[0].Status)
		}
	}
	if v, _ := srv.Do("EXISTS", strings.TrimPrefix(prefixOf(c), "CRONLOCK_PREFIX=")+"{acl}:lock"); v != "0" {
		t.Error("the lock was kept after the refused write")
	}
	// A tick claimed with its entry refused: the reader does not know how the run ended,
	// and must not make it up as abandoned (which check reads as CRITICAL).
	if code, _, errs := c.run("run", "-k", "acl-tick", "--schedule", "* * * * *", "--", "true"); code != 0 {
		t.Fatalf("scheduled run: exit %d, %s", code, errs)
	}
	admin := newCLI(t, "redis://"+srv.Addr+"/0")
	admin.env = append(admin.env, prefixOf(c))
	for _, r := range fleetRows(t, admin) {
		if r.Status == "abandoned" {
			t.Errorf("entry %+v: a run whose entry the server refused is not abandoned", r)
		}
	}
}
