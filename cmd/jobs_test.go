package cmd

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cronlock/fleetview"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// jobKeys are the keys of jobsFleet.
var jobKeys = []string{"j-min", "j-long", "j-hour", "j-year", "j-plain"}

// jobsFleet runs the keys of one fleet on c: a key every minute that succeeded, one
// every hour that failed (exit 3), a yearly one, one without a schedule that ran five
// times (one failure, four successes), and one every 5 minutes still running (the
// returned function lets it end, once).
func jobsFleet(t *testing.T, c *cli) (release func()) {
	t.Helper()
	for _, r := range []struct {
		key, sched string
		cmd        []string
		want       int
	}{
		{"j-min", "* * * * *", []string{"true"}, 0},
		{"j-hour", "0 * * * *", []string{"sh", "-c", "exit 3"}, 3},
		{"j-year", "0 0 1 1 *", []string{"true"}, 0},
		{"j-plain", "", []string{"false"}, 1},
		{"j-plain", "", []string{"true"}, 0},
		{"j-plain", "", []string{"true"}, 0},
		{"j-plain", "", []string{"true"}, 0},
		{"j-plain", "", []string{"true"}, 0},
	} {
		args := []string{"run", "-k", r.key}
		if r.sched != "" {
			args = append(args, "--schedule", r.sched, "--tz", "UTC")
		}
		if code, _, errs := c.run(append(append(args, "--"), r.cmd...)...); code != r.want {
			t.Fatalf("%s: exit %d (%s); want %d", r.key, code, errs, r.want)
		}
	}
	run, _, let := c.startHolding([]string{"run", "-k", "j-long", "--schedule", "*/5 * * * *", "--tz", "UTC"})
	var once sync.Once
	return func() { once.Do(func() { let(); run.Wait() }) }
}

// readJobs runs `jobs --json ARGS` and returns its lines.
func readJobs(t *testing.T, c *cli, args ...string) []fleetview.Job {
	t.Helper()
	code, out, errs := c.run(append([]string{"jobs", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("jobs --json %q: exit %d: %s", args, code, errs)
	}
	var jobs []fleetview.Job
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var j fleetview.Job
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("jobs --json line %q: %v", line, err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// checkJobs checks what jobs says of jobsFleet on c: every key once, sorted by next
// tick, schedules and zones, the failed last run, the running one, the rate's counts
// (runs and successes of j-plain over 7 days), the table, --key and an unknown key.
func checkJobs(t *testing.T, c *cli, plainRuns, plainOK int) {
	t.Helper()
	jobs := readJobs(t, c)
	var keys []string
	by := map[string]fleetview.Job{}
	for i, j := range jobs {
		keys = append(keys, j.Key)
		by[j.Key] = j
		if i == 0 {
			continue
		}
		p := jobs[i-1]
		switch {
		case p.Next == nil && j.Next != nil,
			p.Next != nil && j.Next != nil && (j.Next.Before(*p.Next) || j.Next.Equal(*p.Next) && j.Key < p.Key),
			p.Next == nil && j.Next == nil && j.Key < p.Key:
			t.Errorf("jobs not sorted by next tick, then key: %s (%v) after %s (%v)", j.Key, j.Next, p.Key, p.Next)
		}
	}
	sorted := append([]string(nil), keys...)
	slices.Sort(sorted)
	want := append([]string(nil), jobKeys...)
	slices.Sort(want)
	if !slices.Equal(sorted, want) || keys[len(keys)-1] != "j-plain" {
		t.Errorf("jobs lists %s; want each of %s once, j-plain (no schedule) last", strings.Join(keys, " "), strings.Join(jobKeys, " "))
	}
	now := time.Now()
	for _, k := range jobKeys[:4] {
		j := by[k]
		if j.Zone != "UTC" || j.Schedule == "" || j.Next == nil || !j.Next.After(now.Add(-time.Second)) || j.NextInMS == nil {
			t.Errorf("%s: schedule %q zone %q next %v; want its schedule in UTC and a next tick to come", k, j.Schedule, j.Zone, j.Next)
		}
	}
	if j := by["j-hour"]; j.Last == nil || j.Last.Status != "failed" || j.Last.Exit == nil || *j.Last.Exit != 3 || j.Last.Node != "clinode" ||
		j.Last.ScheduledFor == nil || j.Last.ScheduledFor.Minute() != 0 || j.Last.FinishedAt == nil || j.Now != "idle" {
		t.Errorf("j-hour: %+v last %+v; want its failed run (exit 3 on clinode, for a full hour), idle now", j, j.Last)
	}
	if j := by["j-long"]; j.Now != "running" || j.Running == nil || j.Running.Node != "clinode" || j.Running.RunID == "" || j.Last != nil {
		t.Errorf("j-long: now %q running %+v last %+v; want running on clinode, no finished run", j.Now, j.Running, j.Last)
	}
	if j := by["j-min"]; j.Last == nil || j.Last.Status != "succeeded" || j.Running != nil || j.Rate == nil || *j.Rate != 1 {
		t.Errorf("j-min: %+v; want its success, idle, 100%%", j)
	}
	if j := by["j-plain"]; j.Schedule != "" || j.Next != nil || j.Runs7d != plainRuns || j.Succeeded7d != plainOK || j.Rate == nil ||
		*j.Rate != float64(plainOK)/float64(plainRuns) || j.Last == nil || j.Last.Status != "succeeded" {
		t.Errorf("j-plain: %+v; want no schedule, %d of %d runs succeeded in 7 days", j, plainOK, plainRuns)
	}

	code, out, errs := c.run("jobs")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 6 || !strings.HasPrefix(lines[0], "KEY") || !strings.Contains(out, "running on clinode") ||
		!strings.Contains(out, "failed") {
		t.Errorf("jobs (exit %d, %s):\n%s", code, errs, out)
	}
	for i, k := range keys {
		if i+1 < len(lines) && !strings.HasPrefix(lines[i+1], k+" ") {
			t.Errorf("table line %d is %q; want %s as in --json", i+1, lines[i+1], k)
		}
	}
	if one := readJobs(t, c, "--key", "j-long"); len(one) != 1 || one[0].Key != "j-long" || one[0].Now != "running" {
		t.Errorf("jobs --key j-long: %+v", one)
	}
	code, out, errs = c.run("jobs", "--key", "nope")
	if code != ExitUnknownKey || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no key nope is known") {
		t.Errorf("jobs --key nope: exit %d, stdout %q, stderr %q; want %d and one line", code, out, errs, ExitUnknownKey)
	}
}

// TestJobsRedis: jobs on one Redis server, with CRONLOCK_FLEET_KEEP 2, so the rate can
// only come from the per-day counters (an older day outside the 7 is not counted); the
// keys come from the acquire script's index (a name taken out of it is gone from jobs,
// and --scan finds it again).
func TestJobsRedis(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr+"/0")
	c.env = append(c.env, "CRONLOCK_FLEET_KEEP=2")
	p := c.prefix()
	t.Cleanup(func() {
		redistest.Do(addr, "DEL", p+"keys")
		for _, k := range jobKeys {
			for _, kind := range []string{"lock", "tick", "fence", "ledger", "order", "days", "standby"} {
				redistest.Do(addr, "DEL", p+"{"+k+"}:"+kind)
			}
		}
	})
	release := jobsFleet(t, c)
	defer release()
	// A standby of j-long's tick: NOW counts it.
	sb := c.command("run", "-k", "j-long", "--schedule", "*/5 * * * *", "--tz", "UTC", "--standby", "--", "true")
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	defer sb.Wait()
	defer release() // before the standby's Wait: it ends once j-long's run has
	waitUntil(t, 10*time.Second, "jobs to count the standby of j-long", func() bool {
		return readJobs(t, c, "--key", "j-long")[0].Standbys == 1
	})
	day := time.Now().UTC().Unix() / 86400
	mustDo(t, addr, "HSET", p+"{j-plain}:days", strconv.FormatInt(day-1, 10), "2,2,0,0,0,0,0", strconv.FormatInt(day-10, 10), "50,0,50,0,0,0,0")
	checkJobs(t, c, 7, 6)
	if got := readJobs(t, c, "--key", "j-plain")[0].RateFrom; got != "counters" {
		t.Errorf("j-plain's rate from %q; want counters", got)
	}

	// A name in the index whose records are gone (a retired job's expired) is no line.
	mustDo(t, addr, "ZREM", p+"keys", "j-year")
	mustDo(t, addr, "ZADD", p+"keys", "1", "j-gone")
	if code, out, errs := c.run("jobs"); code != 0 || strings.Contains(out, "j-year") || strings.Contains(out, "j-gone") || errs != "" {
		t.Errorf("jobs after j-year left the index (exit %d, %s):\n%s; want neither j-year (jobs reads the index, not the keyspace) nor j-gone (nothing known of it)", code, errs, out)
	}
	if code, out, errs := c.run("jobs", "--scan"); code != 0 || !strings.Contains(out, "j-year") {
		t.Errorf("jobs --scan (exit %d, %s):\n%s; want j-year found by the walk", code, errs, out)
	}
}

// TestJobsCluster: jobs on a Redis Cluster reads every slot's index set.
func TestJobsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	c := newCLI(t, cl.URL())
	release := jobsFleet(t, c)
	defer release()
	checkJobs(t, c, 5, 4)
	if code, _, errs := c.run("jobs"); code != 0 || errs != "" {
		t.Errorf("jobs: exit %d, stderr %q; want the index read, no walk", code, errs)
	}
}

// TestJobsLocal: jobs on the local backend, from the lock files and the history.
func TestJobsLocal(t *testing.T) {
	c := newCLI(t, "")
	release := jobsFleet(t, c)
	defer release()
	checkJobs(t, c, 5, 4)
}

// TestJobsSentinel: jobs through Sentinel reads the master's index.
func TestJobsSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis with Sentinels")
	}
	c := newCLI(t, redistest.StartSentinel(t).URL())
	release := jobsFleet(t, c)
	defer release()
	checkJobs(t, c, 5, 4)
}

// TestJobsSuspended: jobs shows a suspended key as such in NOW, with who and why, and
// neither its LAST nor its 7-day rate counts the runs the suspension stopped; after
// resume the key is idle again. Local and Redis.
func TestJobsSuspended(t *testing.T) {
	for _, backend := range []string{"local", "redis"} {
		t.Run(backend, func(t *testing.T) {
			url := ""
			if backend == "redis" {
				url = "redis://" + redistest.Addr(t) + "/0"
			}
			c := newCLI(t, url)
			if code, _, errs := c.run("run", "-k", "j-susp", "--", "true"); code != 0 {
				t.Fatalf("run: exit %d: %s", code, errs)
			}
			if code, _, errs := c.run("suspend", "-k", "j-susp", "--reason", "maintenance window"); code != 0 {
				t.Fatalf("suspend: exit %d: %s", code, errs)
			}
			if code, _, errs := c.run("run", "-k", "j-susp", "--", "true"); code != 0 {
				t.Fatalf("a run while suspended: exit %d: %s", code, errs)
			}
			j := readJobs(t, c, "-k", "j-susp")[0]
			switch {
			case j.Now != "suspended" || j.Suspended == nil:
				t.Errorf("NOW %q, suspension %+v; want suspended", j.Now, j.Suspended)
			case !strings.Contains(j.Suspended.By, "@") || j.Suspended.Reason != "maintenance window":
				t.Errorf("suspension %+v; want who (user@host) and the reason", j.Suspended)
			}
			if j.Last == nil || j.Last.Status != runstatus.Succeeded || j.Runs7d != 1 || j.Succeeded7d != 1 {
				t.Errorf("LAST %+v, 7 days %d of %d; want the run before the suspension, 1 of 1", j.Last, j.Succeeded7d, j.Runs7d)
			}
			if code, _, errs := c.run("resume", "-k", "j-susp"); code != 0 {
				t.Fatalf("resume: exit %d: %s", code, errs)
			}
			if j := readJobs(t, c, "-k", "j-susp")[0]; j.Now != "idle" || j.Suspended != nil {
				t.Errorf("after resume: NOW %q, suspension %+v; want idle", j.Now, j.Suspended)
			}
		})
	}
}
