package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// Tests of once per tick (`--schedule`) through the built binary. Each simulated host has its
// own --node, history and clock (the test build's CRONLOCK_TEST_CLOCK_OFFSET); the hosts
// of one test share the Redis prefix, or the lock folder on the local backend.

// checkRow checks the only row of a host's history.
func checkRow(t *testing.T, h *fleetHost, status, holder string, tick time.Time) tickRow {
	t.Helper()
	rows := h.rows("billing")
	if len(rows) == 0 {
		t.Fatalf("%s: no row", h.node)
	}
	r := rows[0]
	if r.Status != status || !strings.Contains(r.Holder, holder) || r.ScheduledFor == nil || *r.ScheduledFor != rfc(tick) {
		sf := "null"
		if r.ScheduledFor != nil {
			sf = *r.ScheduledFor
		}
		t.Fatalf("%s: newest row %s, holder %q, scheduled_for %s, error %q; want %s, holder %q, %s",
			h.node, r.Status, r.Holder, sf, r.Error, status, holder, rfc(tick))
	}
	return r
}

// TestTickOncePerFleet is the README's story: three hosts whose cron fires 0 s, 1 s and
// 2.5 s apart run a 300 ms job for the same minute; one runs it, the others are skipped
// and their rows name the first host. The next minute runs once again, and a host that
// starts the previous tick after the fleet ran the current one is skipped.
func TestTickOncePerFleet(t *testing.T) {
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			hosts := newFleet(t, backend, "vmA", "vmB", "vmC")
			marks := filepath.Join(t.TempDir(), "marks")
			job := []string{"--", "sh", "-c", `echo "$CRONLOCK_NODE $CRONLOCK_SCHEDULED_FOR" >> ` + marks + `; sleep 0.3`}
			args := func(extra ...string) []string {
				return append(append([]string{"run", "-k", "billing", "--schedule", "* * * * *", "--tz", "UTC"}, extra...), job...)
			}
			off, tick := inMinute()
			start := time.Now()
			for i, delay := range []time.Duration{0, time.Second, 2500 * time.Millisecond} {
				time.Sleep(time.Until(start.Add(delay)))
				code, _, errs := hosts[i].at(off, args()...)
				if code != 0 || errs != "" {
					t.Fatalf("%s: exit %d, stderr %q; want 0 and silence", hosts[i].node, code, errs)
				}
			}
			checkRow(t, hosts[0], "succeeded", "", tick)
			for _, h := range hosts[1:] {
				r := checkRow(t, h, "skipped", "vmA (run ", tick)
				if !strings.Contains(r.Error, "already run by vmA") {
					t.Errorf("%s: skip row error %q does not say vmA ran the tick", h.node, r.Error)
				}
			}

			// The next minute: the clock moved by 60 s (far from Redis's, so no skew check).
			next := tick.Add(time.Minute)
			for i, h := range []*fleetHost{hosts[1], hosts[2]} {
				code, _, errs := h.at(off+time.Minute, args("--max-skew", "0")...)
				if code != 0 || errs != "" {
					t.Fatalf("%s next minute: exit %d, stderr %q", h.node, code, errs)
				}
				if i == 0 {
					checkRow(t, h, "succeeded", "", next)
				} else {
					checkRow(t, h, "skipped", "vmB (run ", next)
				}
			}
			// A host whose cron is a minute behind: its tick is older than the one run.
			if code, _, errs := hosts[0].at(off, args()...); code != 0 || errs != "" {
				t.Fatalf("late host: exit %d, stderr %q", code, errs)
			}
			r := checkRow(t, hosts[0], "skipped", "vmB (run ", tick)
			if !strings.Contains(r.Error, "later tick") {
				t.Errorf("late host's row error %q does not say a later tick was run", r.Error)
			}

			b, _ := os.ReadFile(marks)
			want := "vmA " + rfc(tick) + "\nvmB " + rfc(next) + "\n"
			if string(b) != want {
				t.Errorf("jobs ran:\n%s\nwant:\n%s", b, want)
			}
		})
	}
}

// TestTickSkew: a host whose clock is 45 s off Redis's refuses to run (125, one line
// naming the skew and NTP, an error row) and claims nothing: a host with a good clock
// then runs the tick.
func TestTickSkew(t *testing.T) {
	hosts := newFleet(t, "redis", "fast", "slow", "good")
	args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--", "true"}
	for _, c := range []struct {
		h   *fleetHost
		off time.Duration
		dir string
	}{{hosts[0], 45 * time.Second, "ahead of"}, {hosts[1], -45 * time.Second, "behind"}} {
		code, _, errs := c.h.at(c.off, args...)
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.dir) ||
			!strings.Contains(errs, "NTP") || !strings.Contains(errs, "45") {
			t.Fatalf("%s: exit %d, stderr %q; want 125 and one line naming the skew and NTP", c.h.node, code, errs)
		}
		if r := c.h.rows("billing"); len(r) != 1 || r[0].Status != "error" || !strings.Contains(r[0].Error, "NTP") {
			t.Fatalf("%s: rows %+v; want one error row", c.h.node, r)
		}
	}
	off, tick := inMinute()
	if code, _, errs := hosts[2].at(off, args...); code != 0 {
		t.Fatalf("good clock after the skewed ones: exit %d, %s", code, errs)
	}
	checkRow(t, hosts[2], "succeeded", "", tick)
}

// TestStartDeadline: a host starting 10 minutes after its 09:00 tick with
// --start-deadline 5m does not run the job: status missed, the conflict code, one line.
// It claims the tick, so a second such host is a plain skip naming it.
func TestStartDeadline(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB")
	now := time.Now().UTC()
	tick := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC)
	off := tick.Add(10*time.Minute + 30*time.Second).Sub(now)
	marks := filepath.Join(t.TempDir(), "marks")
	metrics := t.TempDir()
	// The clock is moved hours away from Redis's: the skew check is TestTickSkew's.
	args := []string{"run", "-k", "billing", "--metrics-dir", metrics, "--schedule", "0 9 * * *", "--tz", "UTC", "--max-skew", "0",
		"--start-deadline", "5m", "--conflict-exit-code", "3", "--", "sh", "-c", "echo ran >> " + marks}
	code, _, errs := hosts[0].at(off, args...)
	if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "missed the 09:00 UTC tick") ||
		!strings.Contains(errs, "--start-deadline 5m") {
		t.Fatalf("vmA: exit %d, stderr %q; want 3 and one line saying the tick was missed", code, errs)
	}
	r := checkRow(t, hosts[0], "missed", "", tick)
	if r.Exit == nil || *r.Exit != 3 {
		t.Errorf("missed row: exit %v; want 3", r.Exit)
	}
	if code, out, _ := hosts[0].run("history", "show", r.ID, "--utc"); code != 0 ||
		!strings.Contains(out, "scheduled for:  "+rfc(tick)+"\n") || !strings.Contains(out, "status:         missed\n") {
		t.Errorf("history show of the missed run (exit %d):\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(metrics, "cronlock_billing.prom")); !strings.Contains(string(b),
		`cronlock_last_status{key="billing",node="vmA",status="missed"} 1`) {
		t.Errorf("metrics file after a missed run:\n%s", b)
	}
	code, _, errs = hosts[1].at(off, args...)
	if code != 3 {
		t.Fatalf("vmB: exit %d, stderr %q; want 3", code, errs)
	}
	checkRow(t, hosts[1], "skipped", "vmA (run ", tick)
	if _, err := os.Stat(marks); err == nil {
		t.Error("a missed run ran its job")
	}
}

// TestStartDeadlineEndsWait: a --wait for a held lock ends at tick + --start-deadline,
// as missed, not at --wait (after which the job would have run).
func TestStartDeadlineEndsWait(t *testing.T) {
	hosts := newFleet(t, "local", "vmA")
	h := hosts[0]
	holder, _, release := h.startHolding([]string{"run", "-k", "billing"})
	defer func() { release(); holder.Wait() }()
	now := time.Now()
	off := now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now) // 1 s after a tick
	code, _, errs := h.at(off, "run", "-k", "billing", "--schedule", "* * * * *", "--wait", "1m",
		"--start-deadline", "2s", "--", "true")
	if code != 0 || !strings.Contains(errs, "missed the") {
		t.Fatalf("exit %d, stderr %q; want 0 and the missed line", code, errs)
	}
	if r := h.rows("billing"); r[0].Status != "missed" {
		t.Fatalf("newest row %+v; want missed", r[0])
	}
}

// TestTickGiveBack: a run whose command does not exist (127) never started its job, so
// it gives the tick back: the next host runs the same tick.
func TestTickGiveBack(t *testing.T) {
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			hosts := newFleet(t, backend, "vmA", "vmB", "vmC")
			off, tick := inMinute()
			args := []string{"run", "-k", "billing", "--schedule", "* * * * *", "--"}
			if backend == "redis" {
				// A run that gives its tick back lets its lock go at once, --min-hold or
				// not (a local lock would hold vmB's release for the whole hold).
				args = []string{"run", "-k", "billing", "--schedule", "* * * * *", "--min-hold", "30s", "--"}
			}
			if code, _, _ := hosts[0].at(off, append(args, "/nonexistent/job")...); code != 127 {
				t.Fatalf("missing command: exit %d, want 127", code)
			}
			checkRow(t, hosts[0], "error", "", tick)
			if code, _, errs := hosts[1].at(off, append(args, "true")...); code != 0 {
				t.Fatalf("vmB: exit %d, %s", code, errs)
			}
			checkRow(t, hosts[1], "succeeded", "", tick)
			hosts[2].at(off, append(args, "true")...)
			checkRow(t, hosts[2], "skipped", "vmB (run ", tick)
		})
	}
}

// TestTickLateSkip: a skip of a tick more than a minute old says so in one line (a
// --schedule that does not match the crontab line); one within the minute is silent.
func TestTickLateSkip(t *testing.T) {
	hosts := newFleet(t, "local", "vmA", "vmB", "vmC")
	now := time.Now().UTC()
	hour := now.Truncate(time.Hour)
	at := func(d time.Duration) time.Duration { return hour.Add(d).Sub(now) }
	args := []string{"run", "-k", "billing", "--schedule", "0 * * * *", "--tz", "UTC", "--", "true"}
	if code, _, errs := hosts[0].at(at(20*time.Second), args...); code != 0 || errs != "" {
		t.Fatalf("vmA: exit %d, %q", code, errs)
	}
	if code, _, errs := hosts[1].at(at(40*time.Second), args...); code != 0 || errs != "" {
		t.Fatalf("vmB within the minute: exit %d, stderr %q; want a silent skip", code, errs)
	}
	code, _, errs := hosts[2].at(at(5*time.Minute), args...)
	want := "cronlock: billing: tick " + hour.Format("15:04") + " UTC already run by vmA (run "
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, want) ||
		!strings.HasSuffix(errs, "; does --schedule match the crontab line?\n") {
		t.Fatalf("vmC 5 minutes late: exit %d, stderr %q; want 0 and one line %q…", code, errs, want)
	}
}

// scriptCommands are the commands the Lua scripts call (and the test's own CONFIG and
// INFO): INFO commandstats counts them apart from the EVAL that ran them.
var scriptCommands = map[string]bool{"get": true, "set": true, "del": true, "pttl": true, "time": true,
	"publish": true, "info": true, "pexpire": true, "config": true,
	"lpush": true, "ltrim": true, "lindex": true, "lset": true, // the record before the ledger
	"hset": true, "hsetnx": true, "hget": true, "hmget": true, "hdel": true, "hexists": true, "hincrby": true,
	"hkeys": true, "zadd": true, "zcard": true, "zrange": true, "zrem": true} // the fleet's ledger

// TestTickRoundTrips: a run with --schedule costs Redis exactly the commands of a run
// without it (the tick travels in the acquire script), at most 3 for a short run.
func TestTickRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	count := func(args ...string) int {
		t.Helper()
		if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		if code, _, errs := c.run(append([]string{"run", "-k", "rt"}, args...)...); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		info, err := srv.Do("INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			// Commands the scripts run inside Redis are counted too; a round trip is a
			// command the client sent.
			if !ok || !strings.HasPrefix(name, "cmdstat_") || scriptCommands[strings.Split(strings.TrimPrefix(name, "cmdstat_"), "|")[0]] {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			k, _ := strconv.Atoi(calls)
			n += k
		}
		return n
	}
	// A first run loads the scripts (a new server answers NOSCRIPT once per script).
	if code, _, errs := c.run("run", "-k", "warm", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	plain := count("--", "true")
	ticked := count("--schedule", "* * * * *", "--", "true")
	if plain != ticked || ticked > 3 {
		t.Fatalf("commands: %d without --schedule, %d with; want the same, at most 3", plain, ticked)
	}
	t.Logf("%d round trips per short run, with or without --schedule", ticked)
}

// TestTickBadInput: a schedule or zone that cannot be used, and tick flags without
// --schedule, exit 125 with one line.
func TestTickBadInput(t *testing.T) {
	c := newCLI(t, "")
	for _, args := range [][]string{
		{"--schedule", "@reboot"},
		{"--schedule", "61 * * * *"},
		{"--schedule", "* * * *"},
		{"--schedule", "0 9 * * *", "--tz", "Mars/Olympus"},
		{"--start-deadline", "5m"},
		{"--tz", "UTC"},
		{"--schedule", "* * * * *", "--max-skew", "soon"},
	} {
		code, _, errs := c.run(append(append([]string{"run", "--backend", "local", "-k", "bad"}, args...), "--", "true")...)
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "cronlock: ") {
			t.Errorf("%q: exit %d, stderr %q; want 125 and one line", args, code, errs)
		}
	}
}

// TestTestClockOnlyInTestBuilds: CRONLOCK_TEST_CLOCK_OFFSET moves the clock of the
// tests' binary only; a build without the cronlock_testclock tag ignores it.
func TestTestClockOnlyInTestBuilds(t *testing.T) {
	release := filepath.Join(t.TempDir(), "cronlock")
	build := exec.Command("go", "build", "-o", release, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build without the test tag: %v\n%s", err, out)
	}
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_TEST_CLOCK_OFFSET=3h")
	tickOf := func(bin string) time.Time {
		t.Helper()
		cmd := exec.Command(bin, "run", "--backend", "local", "-k", "clock", "--schedule", "* * * * *", "--tz", "UTC",
			"--", "sh", "-c", "echo $CRONLOCK_SCHEDULED_FOR")
		cmd.Env = c.env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		tk, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%s: CRONLOCK_SCHEDULED_FOR %q: %v", bin, out, err)
		}
		return tk
	}
	before := time.Now().Truncate(time.Minute)
	got := tickOf(release)
	if got.Before(before) || got.After(time.Now()) {
		t.Errorf("release build: tick %v; want the current minute (%v): it must ignore CRONLOCK_TEST_CLOCK_OFFSET", got, before)
	}
	if got := tickOf(cronlockBin); got.Sub(before) < 3*time.Hour-time.Minute {
		t.Errorf("test build: tick %v; want 3h after %v", got, before)
	}
}
