package fleetview

import (
	"strings"
	"testing"
	"time"

	"cronlock/lockrun"
)

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 42 * time.Second: "42s", 12*time.Minute + 5*time.Second: "12m",
		3*time.Hour + 5*time.Minute: "3h05m", 51 * time.Hour: "2d3h",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%v) = %q; want %q", d, got, want)
		}
	}
}

// TestRateFromCounters: the rate counts the day counters of today and the 6 days
// before (UTC), not older ones, and a run still running has no outcome yet.
func TestRateFromCounters(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	day := func(n int) time.Time { return now.Truncate(24*time.Hour).AddDate(0, 0, -n) }
	st := lockrun.KeyState{
		Days:   []lockrun.DayCount{{Day: day(7), Runs: 50}, {Day: day(6), Runs: 4, Succeeded: 3}, {Day: day(0), Runs: 2, Succeeded: 1}},
		Recent: []lockrun.FleetEntry{{Status: "running", StartUS: now.UnixMicro()}},
	}
	if runs, ok, from := rateOf(st, now); runs != 5 || ok != 4 || from != "counters" {
		t.Errorf("rateOf = %d runs, %d ok, from %s; want 5, 4, counters", runs, ok, from)
	}
	st.Days = nil
	st.Recent = append(st.Recent, lockrun.FleetEntry{Status: "succeeded", StartUS: now.Add(-time.Hour).UnixMicro()},
		lockrun.FleetEntry{Status: "failed", StartUS: now.Add(-8 * 24 * time.Hour).UnixMicro()})
	if runs, ok, from := rateOf(st, now); runs != 1 || ok != 1 || from != "entries" {
		t.Errorf("rateOf without counters = %d runs, %d ok, from %s; want 1, 1, entries", runs, ok, from)
	}
}

// TestBuildAndSort: the schedule's next tick, the newest finished run as LAST (not a
// running or never_fired entry), the running one as NOW, and the order by next tick
// with unscheduled keys last.
func TestBuildAndSort(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 30, 0, time.UTC)
	us := func(d time.Duration) int64 { return now.Add(d).UnixMicro() }
	x := 1
	hourly := build(state{KeyState: lockrun.KeyState{Key: "b", Tick: &lockrun.TickRecord{Expr: "0 * * * *", TZ: "UTC"},
		Standbys: 2, Recent: []lockrun.FleetEntry{
			{RunID: "r3", Node: "vmC", Status: "running", StartUS: us(-30 * time.Second)},
			{RunID: "nf", Status: lockrun.NeverFiredStatus, StartUS: us(-time.Minute)},
			{RunID: "r2", Node: "vmB", Status: "failed", Exit: &x, StartUS: us(-time.Hour), EndUS: us(-time.Hour + time.Minute)},
		}}}, now)
	if hourly.Next == nil || !hourly.Next.Equal(time.Date(2026, 3, 10, 13, 0, 0, 0, time.UTC)) || hourly.Now != "running" ||
		hourly.Running.Node != "vmC" || hourly.Standbys != 2 || hourly.Last.RunID != "r2" || hourly.Last.AgoMS != 59*60*1000 {
		t.Errorf("hourly: %+v running %+v last %+v", hourly, hourly.Running, hourly.Last)
	}
	minutely := build(state{KeyState: lockrun.KeyState{Key: "c", Tick: &lockrun.TickRecord{Expr: "* * * * *", TZ: "UTC"}, Standbys: 1}}, now)
	if minutely.Standbys != 0 || minutely.Now != "idle" || minutely.Last != nil || minutely.Rate != nil {
		t.Errorf("minutely: %+v; want idle, no standbys without a run, no last, no rate", minutely)
	}
	plain := build(state{KeyState: lockrun.KeyState{Key: "a"}}, now)
	until := now.Add(2 * time.Hour)
	plain.Suspend(Suspension{By: "ops@vm1", Since: now, Until: &until, Reason: "billing freeze"})
	jobs := []Job{plain, hourly, minutely}
	Sort(jobs)
	var keys []string
	for _, j := range jobs {
		keys = append(keys, j.Key)
	}
	if got := strings.Join(keys, " "); got != "c b a" {
		t.Errorf("sorted %s; want c b a", got)
	}
	var b strings.Builder
	if err := WriteTable(&b, jobs, View{Now: now, UTC: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "running on vmC since 12:00 (30s), 2 standbys") || !strings.Contains(b.String(), "11:00 vmB failed, 59m ago") ||
		!strings.Contains(b.String(), "suspended by ops@vm1 until 14:00: billing freeze") {
		t.Errorf("table:\n%s", b.String())
	}
}
