package check

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"cronlock/schedule"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func sched(t *testing.T, expr string) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(expr, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ok is a succeeded run of tick that took d.
func ok(tick string, d time.Duration) Run {
	s := at(tick)
	return Run{Status: "succeeded", Started: s.Add(time.Second), Finished: s.Add(time.Second + d), ScheduledFor: s, Node: "vmA"}
}

func ended(status, tick string) Run {
	r := ok(tick, time.Minute)
	r.Status = status
	if status == "abandoned" || status == "running" {
		r.Finished = time.Time{}
	}
	return r
}

func TestEvaluate(t *testing.T) {
	daily := sched(t, "0 9 * * *")
	history := []Run{ok("2026-11-29T09:00:00Z", time.Minute), ok("2026-11-30T09:00:00Z", 2*time.Minute)}
	plus := func(rs ...Run) []Run { return append(append([]Run(nil), history...), rs...) }
	dup := func(r Run, node string) Run { r.Duplicate, r.Node = true, node; return r }
	cases := []struct {
		name   string
		in     Input
		want   State
		reason string // a part of the line
	}{
		{"success of the due tick", Input{Runs: plus(ok("2026-12-01T09:00:00Z", time.Minute)), Schedule: daily, Now: at("2026-12-01T10:05:00Z")},
			OK, "for the 09:00 tick"},
		{"tick not yet due within grace", Input{Runs: history, Schedule: daily, Now: at("2026-12-01T09:04:00Z")},
			OK, "for the 2026-11-30 09:00 tick"},
		{"tick passed plus grace without a run", Input{Runs: history, Schedule: daily, Now: at("2026-12-01T09:05:00Z")},
			Critical, "no successful run for the 09:00 tick (due 2026-12-01T09:00Z + 5m)"},
		{"run of the tick in progress within 2x p95", Input{Runs: plus(ended("running", "2026-12-01T09:00:00Z")), Schedule: daily, Grace: time.Minute, Now: at("2026-12-01T09:03:00Z")},
			OK, "in progress on vmA"},
		{"run in progress longer than 2x p95", Input{Runs: plus(ended("running", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:06:00Z")},
			Warning, "more than twice its usual p95 (2m)"},
		{"run in progress without usual duration", Input{Runs: []Run{ended("running", "2026-12-01T09:00:00Z")}, Schedule: daily, Now: at("2026-12-01T12:00:00Z")},
			OK, "in progress"},
		{"failure of the due tick", Input{Runs: plus(ended("failed", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:03:00Z")},
			Critical, "ended failed"},
		{"timeout", Input{Runs: plus(ended("timeout", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:03:00Z")},
			Critical, "ended timeout"},
		{"lock_lost", Input{Runs: plus(ended("lock_lost", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:03:00Z")},
			Critical, "ended lock_lost"},
		{"interrupted", Input{Runs: plus(ended("interrupted", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:03:00Z")},
			Critical, "ended interrupted"},
		{"abandoned", Input{Runs: plus(ended("abandoned", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:03:00Z")},
			Critical, "ended abandoned"},
		{"failed rerun after the tick's success", Input{Runs: plus(ok("2026-12-01T09:00:00Z", time.Minute), Run{Status: "failed", Started: at("2026-12-01T09:30:00Z"), Finished: at("2026-12-01T09:31:00Z"), Node: "vmB"}), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Critical, "on vmB"},
		{"skips do not hide a failure", Input{Runs: plus(ended("failed", "2026-12-01T09:00:00Z"), Run{Status: "skipped", Started: at("2026-12-01T09:02:00Z")}), Schedule: daily, Now: at("2026-12-01T09:03:00Z")},
			Critical, "ended failed"},
		{"error newer than the last success", Input{Runs: plus(ok("2026-12-01T09:00:00Z", time.Minute), Run{Status: "error", Started: at("2026-12-01T09:30:00Z"), Node: "vmB"}), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Warning, "ended error"},
		{"missed newer than the last success", Input{Runs: plus(ok("2026-12-01T09:00:00Z", time.Minute), Run{Status: "missed", Started: at("2026-12-01T09:30:00Z"), Node: "vmB"}), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Warning, "ended missed"},
		{"error older than the last success", Input{Runs: plus(Run{Status: "error", Started: at("2026-11-30T08:00:00Z")}, ok("2026-12-01T09:00:00Z", time.Minute)), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			OK, "last success"},
		{"missed tick and no success", Input{Runs: plus(Run{Status: "missed", Started: at("2026-12-01T09:30:00Z"), ScheduledFor: at("2026-12-01T09:00:00Z")}), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Critical, "no successful run for the 09:00 tick"},
		{"duplicate within the window", Input{Runs: plus(dup(ok("2026-12-01T09:00:00Z", time.Minute), "vmA"), dup(ok("2026-12-01T09:00:00Z", time.Minute), "vmB")), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Warning, "DUPLICATE runs since 2026-12-01T09:00Z (on vmA, vmB)"},
		{"duplicate before the window", Input{Runs: append([]Run{dup(ok("2026-11-30T09:00:00Z", time.Minute), "vmB")}, plus(ok("2026-12-01T09:00:00Z", time.Minute))...), Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			OK, "last success"},
		{"never seen", Input{Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Unknown, "no run of this key was ever recorded"},
		{"seen by its tick record only", Input{Seen: true, Schedule: daily, Now: at("2026-12-01T10:00:00Z")},
			Critical, "no successful run for the 09:00 tick"},
		{"no schedule and no max-age", Input{Runs: history, Now: at("2026-12-01T10:00:00Z")},
			Unknown, "give --schedule EXPR or --max-age D"},
		{"max-age met", Input{Runs: history, MaxAge: 26 * time.Hour, Now: at("2026-12-01T10:00:00Z")},
			OK, "within --max-age 1d2h"},
		{"max-age passed", Input{Runs: history, MaxAge: time.Hour, Now: at("2026-12-01T10:00:00Z")},
			Critical, "no successful run within --max-age 1h (the last one ended 1d57m ago)"},
		{"max-age and nothing ever succeeded", Input{Runs: []Run{ended("failed", "2026-12-01T09:00:00Z")}, MaxAge: time.Hour, Now: at("2026-12-01T10:00:00Z")},
			Critical, "(none recorded)"},
		{"max-age with a run in progress", Input{Runs: plus(ended("running", "2026-12-01T09:00:00Z")), MaxAge: time.Hour, Now: at("2026-12-01T09:01:00Z")},
			OK, "in progress"},
		{"max-age and schedule: both must hold", Input{Runs: plus(ok("2026-12-01T09:00:00Z", time.Minute)), Schedule: daily, MaxAge: 30 * time.Minute, Now: at("2026-12-01T10:00:00Z")},
			Critical, "within --max-age 30m"},
		{"hourly with a run two ticks back", Input{Runs: []Run{ok("2026-12-01T08:00:00Z", time.Second)}, Schedule: sched(t, "@hourly"), Now: at("2026-12-01T09:06:00Z")},
			Critical, "for the 09:00 tick"},
		{"without scheduled_for the start counts", Input{Runs: []Run{{Status: "succeeded", Started: at("2026-12-01T09:00:02Z"), Finished: at("2026-12-01T09:00:03Z")}}, Schedule: daily, Now: at("2026-12-01T09:30:00Z")},
			OK, "last success"},
		{"node names cannot break the line", Input{Runs: plus(Run{Status: "failed", Started: at("2026-12-01T09:00:00Z"), Node: "a|b\nc"}), Schedule: daily, Now: at("2026-12-01T09:30:00Z")},
			Critical, "on a/b?c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Key = "billing"
			if c.in.Grace == 0 {
				c.in.Grace = 5 * time.Minute
			}
			r := Evaluate(c.in)
			line := r.Line()
			if r.State != c.want || !strings.Contains(line, c.reason) {
				t.Fatalf("got %v %q; want %v with %q", r.State, line, c.want, c.reason)
			}
			if strings.Count(line, "\n") != 0 || strings.Count(line, "|") > 1 {
				t.Fatalf("line %q: want one line with one |", line)
			}
			checkPerf(t, line)
		})
	}
}

// perfRE is one datum of the plugin format: 'label'=value[UOM];[warn];[crit];[min];[max].
var perfRE = regexp.MustCompile(`^([^'= ]+|'[^']+')=(U|-?[0-9.]+)(s|ms|us|%|B|KB|MB|TB|c)?(;(-?[0-9.:~@]*)){0,4}$`)

func checkPerf(t *testing.T, line string) {
	t.Helper()
	if !strings.HasPrefix(line, "CRONLOCK ") {
		t.Fatalf("line %q: want the CRONLOCK prefix", line)
	}
	_, perf, found := strings.Cut(line, " | ")
	if !found {
		return
	}
	for _, p := range strings.Fields(perf) {
		if !perfRE.MatchString(p) {
			t.Errorf("perfdata %q of %q is not in the plugin format", p, line)
		}
	}
}

// TestLineLikeTheSpec: the README's example status line, shape for shape.
func TestLineLikeTheSpec(t *testing.T) {
	r := Evaluate(Input{Key: "billing", Schedule: sched(t, "0 9 * * *"), Grace: 5 * time.Minute, Now: at("2026-12-01T10:05:00Z"),
		Runs: []Run{ok("2026-11-30T09:00:00Z", time.Minute), ended("failed", "2026-12-01T09:00:00Z"), {Status: "error", Started: at("2026-12-01T09:10:00Z"), Node: "vmB"}}})
	want := "CRONLOCK CRITICAL - billing: no successful run for the 09:00 tick (due 2026-12-01T09:00Z + 5m); the last run (on vmA, started 2026-12-01T09:00Z) ended failed; a run on vmB at 2026-12-01T09:10Z ended error | age=90239s;;86700;0 failures=2;;;0"
	if got := r.Line(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if r.State != Critical || r.Failures != 2 {
		t.Fatalf("state %v failures %d", r.State, r.Failures)
	}
}

func TestPerfNeverSucceededIsU(t *testing.T) {
	r := Evaluate(Input{Key: "k", MaxAge: time.Hour, Now: at("2026-12-01T10:00:00Z"), Runs: []Run{ended("failed", "2026-12-01T09:00:00Z")}})
	if got := r.Perf[0].String(); got != "age=U;;3600;0" {
		t.Fatalf("age perf %q", got)
	}
	checkPerf(t, r.Line())
}

func TestUnknownResult(t *testing.T) {
	r := UnknownResult("billing", "redis 127.0.0.1:1 unreachable")
	if r.State != Unknown || r.Line() != "CRONLOCK UNKNOWN - billing: redis 127.0.0.1:1 unreachable" {
		t.Fatalf("%v %q", r.State, r.Line())
	}
}

// TestDST: on both change days in Europe/Berlin the due tick of a 02:30 daily job is
// the one Debian's cron runs, and a success of it is OK.
func TestDST(t *testing.T) {
	s, err := schedule.Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ now, tick, wantTick string }{
		// Spring forward 2026-03-29: 02:30 does not exist; cron runs at 03:00 CEST (01:00Z).
		{"2026-03-29T01:10:00Z", "2026-03-29T01:00:00Z", "03:00"},
		// Fall back 2026-10-25: 02:30 happens twice; cron runs at the first (00:30Z).
		{"2026-10-25T01:40:00Z", "2026-10-25T00:30:00Z", "02:30"},
	} {
		now := at(c.now)
		r := Evaluate(Input{Key: "k", Schedule: s, Grace: 5 * time.Minute, Now: now, Runs: []Run{ok(c.tick, time.Minute)}})
		if r.State != OK || !r.Due.Equal(at(c.tick)) {
			t.Errorf("now %s: %v due %v %q; want OK due %s", c.now, r.State, r.Due, r.Line(), c.tick)
		}
		r = Evaluate(Input{Key: "k", Schedule: s, Grace: 5 * time.Minute, Now: now, Runs: []Run{ok("2026-01-01T01:30:00Z", time.Minute)}, Seen: true})
		if r.State != Critical || !strings.Contains(r.Line(), "the "+c.wantTick+" tick") {
			t.Errorf("now %s without the tick's run: %q; want CRITICAL for the %s tick", c.now, r.Line(), c.wantTick)
		}
	}
}

// TestEveryMinuteSweep walks a */5 schedule through a day minute by minute, with a
// success recorded for every tick up to a failure at 12:00: OK until 12:05 (tick +
// grace), CRITICAL from then on.
func TestEveryMinuteSweep(t *testing.T) {
	s := sched(t, "*/5 * * * *")
	var runs []Run
	start := at("2026-12-01T00:00:00Z")
	for tick := start; tick.Before(at("2026-12-01T12:00:00Z")); tick = tick.Add(5 * time.Minute) {
		runs = append(runs, ok(tick.Format(time.RFC3339), 10*time.Second))
	}
	runs = append(runs, Run{Status: "failed", Started: at("2026-12-01T12:00:01Z"), Finished: at("2026-12-01T12:00:11Z"), ScheduledFor: at("2026-12-01T12:00:00Z")})
	for now := start.Add(10 * time.Minute); now.Before(at("2026-12-01T13:00:00Z")); now = now.Add(time.Minute) {
		var visible []Run
		for _, r := range runs {
			if !r.Started.After(now) {
				visible = append(visible, r)
			}
		}
		// A failure ends before now; a run not yet finished is in progress.
		for i := range visible {
			if visible[i].Finished.After(now) {
				visible[i].Status, visible[i].Finished = "running", time.Time{}
			}
		}
		r := Evaluate(Input{Key: "k", Schedule: s, Grace: 5 * time.Minute, Now: now, Runs: visible})
		want := OK
		if !now.Before(at("2026-12-01T12:00:11Z")) {
			want = Critical
		}
		if r.State != want {
			t.Fatalf("now %s: %v %q; want %v", now.Format("15:04"), r.State, r.Line(), want)
		}
		checkPerf(t, r.Line())
	}
}
