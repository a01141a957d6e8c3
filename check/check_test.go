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

// five are successes of the five ticks before 2026-12-01 09:00 of a daily schedule,
// lasting 1 to 2 minutes: enough to know the key's usual duration (p95 2m).
func five() []Run {
	var rs []Run
	for i, d := range []time.Duration{time.Minute, 90 * time.Second, 2 * time.Minute, time.Minute, 80 * time.Second} {
		rs = append(rs, ok(at("2026-11-26T09:00:00Z").AddDate(0, 0, i).Format(time.RFC3339), d))
	}
	return rs
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
		{"run in progress longer than 2x p95", Input{Runs: append(five(), ended("running", "2026-12-01T09:00:00Z")), Schedule: daily, Now: at("2026-12-01T09:06:00Z")},
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
			// Nagios turns ";" into ":": none may stand in the text, only in the perfdata.
			if strings.Contains(r.Summary(), ";") || strings.Contains(line, "the last run") {
				t.Fatalf("line %q: a ; in the text, or an older run called the last one", line)
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
	want := "CRONLOCK CRITICAL - billing: no successful run for the 09:00 tick (due 2026-12-01T09:00Z + 5m) -- the newest run of the job (for the 09:00 tick, on vmA, started 2026-12-01T09:00Z) ended failed -- a run on vmB at 2026-12-01T09:10Z ended error | age=90239s;;86700;0 failures=2;;;0 duration=60s;;;0 lateness=1s"
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

// TestInProgressAfterAFailure: while the due tick's run is in
// progress, the failure of the run before it does not make the check CRITICAL, and no
// older run is called "the last run". The bound of "in progress" is twice the usual p95
// with five successes or more, else the next tick; past it the check warns, and a run in
// progress for an older tick than the due one answers for nothing.
func TestInProgressAfterAFailure(t *testing.T) {
	daily, hourly := sched(t, "0 9 * * *"), sched(t, "0 * * * *")
	failed := ended("failed", "2026-11-30T09:00:00Z")
	running := ended("running", "2026-12-01T09:00:00Z")
	running.Node = "vmB"
	cases := []struct {
		name   string
		in     Input
		want   State
		has    string
		hasNot string
	}{
		{"no success known, before the next tick", Input{Runs: []Run{failed, running}, Schedule: daily, Grace: time.Minute, Now: at("2026-12-01T15:00:00Z")},
			OK, "the run of the 09:00 tick is in progress on vmB for 5h59m", "failed"},
		{"one success known, before the next tick", Input{Runs: []Run{ok("2026-11-29T09:00:00Z", time.Minute), failed, running}, Schedule: daily, Grace: time.Minute, Now: at("2026-12-01T09:30:00Z")},
			OK, "in progress on vmB", "failed"},
		{"five successes, within twice the p95", Input{Runs: append(append(five(), failed), running), Schedule: daily, Grace: time.Minute, Now: at("2026-12-01T09:04:00Z")},
			OK, "in progress on vmB for 3m59s", "failed"},
		{"five successes, past twice the p95", Input{Runs: append(append(five(), failed), running), Schedule: daily, Grace: time.Minute, Now: at("2026-12-01T09:05:00Z")},
			Warning, "more than twice its usual p95 (2m)", "failed"},
		{"few successes, past the next tick", Input{Runs: []Run{ended("failed", "2026-12-01T08:00:00Z"), {Status: "running", Started: at("2026-12-01T09:00:01Z"), ScheduledFor: at("2026-12-01T09:00:00Z"), Node: "vmB"}},
			Schedule: hourly, Grace: 5 * time.Minute, Now: at("2026-12-01T10:02:00Z")},
			Warning, "past the next tick (10:00)", "ended failed"},
		{"in progress for an older tick than the due one", Input{Runs: []Run{ended("failed", "2026-11-29T09:00:00Z"), ended("running", "2026-11-30T09:00:00Z")}, Schedule: daily, Grace: time.Minute, Now: at("2026-12-01T09:30:00Z")},
			Critical, "the newest run of the job (for the 2026-11-29 09:00 tick, on vmA, started 2026-11-29T09:00Z) ended failed", "is in progress on"},
		{"max-age: a run in progress shadows the failure before it", Input{Runs: []Run{failed, running}, MaxAge: 2 * time.Hour, Now: at("2026-12-01T09:30:00Z")},
			OK, "a run is in progress on vmB", "failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Key = "billing"
			r := Evaluate(c.in)
			line := r.Line()
			if r.State != c.want || !strings.Contains(line, c.has) || strings.Contains(line, c.hasNot) || strings.Contains(line, "the last run") {
				t.Fatalf("got %v %q\nwant %v with %q, without %q", r.State, line, c.want, c.has, c.hasNot)
			}
			checkPerf(t, line)
		})
	}
}

// TestOKNamesTheSuccessTick: during the grace the due tick is the one
// before, but the line names the tick the success (or the run in progress) was for,
// judged by scheduled_for and not by when the run ended.
func TestOKNamesTheSuccessTick(t *testing.T) {
	daily := sched(t, "54 18 * * *")
	today := ok("2026-12-01T18:54:00Z", 50*time.Millisecond)
	for _, c := range []struct {
		name string
		runs []Run
		now  string
		want string
	}{
		{"success of today's tick within the grace", []Run{ok("2026-11-30T18:54:00Z", time.Second), today}, "2026-12-01T18:54:01.113Z",
			"last success 63ms ago, for the 18:54 tick"},
		{"success of today's tick after the grace", []Run{today}, "2026-12-01T19:30:00Z", "for the 18:54 tick"},
		{"success of yesterday's tick within the grace", []Run{ok("2026-11-30T18:54:00Z", time.Second)}, "2026-12-01T18:55:00Z",
			"for the 2026-11-30 18:54 tick"},
		{"a late success, ended after the next tick", []Run{{Status: "succeeded", Started: at("2026-11-30T18:54:01Z"), Finished: at("2026-12-01T18:56:00Z"), ScheduledFor: at("2026-11-30T18:54:00Z")}},
			"2026-12-01T18:57:00Z", "for the 2026-11-30 18:54 tick"},
		{"today's run in progress within the grace", []Run{ok("2026-11-30T18:54:00Z", time.Second), ended("running", "2026-12-01T18:54:00Z")}, "2026-12-01T18:56:00Z",
			"last success 1d1m ago, for the 2026-11-30 18:54 tick, and the run of the 18:54 tick is in progress on vmA for 1m59s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now, err := time.Parse(time.RFC3339Nano, c.now)
			if err != nil {
				t.Fatal(err)
			}
			r := Evaluate(Input{Key: "k", Schedule: daily, Grace: 5 * time.Minute, Now: now, Runs: c.runs})
			if r.State != OK || !strings.Contains(r.Line(), c.want) {
				t.Fatalf("got %v %q; want OK with %q", r.State, r.Line(), c.want)
			}
		})
	}
}

// TestLedgerMarks: a never_fired entry, a schedule flip and a data-loss mark since the
// due tick are a WARNING with one reason each; older ones are history.
func TestLedgerMarks(t *testing.T) {
	daily := sched(t, "0 9 * * *")
	now := at("2026-12-01T10:00:00Z")
	good := ok("2026-12-01T09:00:00Z", time.Minute)
	never := Run{Status: NeverFiredStatus, Started: at("2026-12-01T09:00:00.5Z"), NeverFired: 2, Node: "vmB",
		NeverFiredFrom: at("2026-11-29T09:00:00Z"), NeverFiredTo: at("2026-11-30T09:00:00Z")}
	flip := good
	flip.Flip, flip.ScheduleWas, flip.Node = true, "0 9 * * * Europe/Berlin", "vmC"
	loss := good
	loss.DataLoss, loss.Node = true, "vmD"
	old := func(r Run) Run {
		r.Started, r.Finished = r.Started.AddDate(0, 0, -1), r.Finished.AddDate(0, 0, -1)
		if !r.ScheduledFor.IsZero() {
			r.ScheduledFor = r.ScheduledFor.AddDate(0, 0, -1)
		}
		return r
	}
	cases := []struct {
		name string
		runs []Run
		want State
		has  []string
	}{
		{"never fired", []Run{good, never}, Warning, []string{"2 ticks (the 2026-11-29 09:00 to the 2026-11-30 09:00 tick) never fired on any host", "recorded by vmB"}},
		{"never fired, one tick, no range", []Run{good, {Status: NeverFiredStatus, Started: at("2026-12-01T09:00:01Z"), NeverFired: 1}}, Warning, []string{"1 tick never fired"}},
		{"never fired, as the acquire script writes it", []Run{good, {Status: NeverFiredStatus, Started: at("2026-12-01T09:00:00.5Z"), ScheduledFor: at("2026-11-30T09:00:00Z"),
			NeverFiredFrom: at("2026-11-27T09:00:00.000001Z"), NeverFiredTo: at("2026-11-30T09:00:00Z"), Node: "vmB"}},
			Warning, []string{"3 ticks (the 2026-11-28 09:00 to the 2026-11-30 09:00 tick) never fired on any host"}},
		{"flip", []Run{flip}, Warning, []string{"the schedule flipped back and forth since 2026-12-01T09:00Z (claims on vmC, away from 0 9 * * * Europe/Berlin)"}},
		{"data loss", []Run{loss}, Warning, []string{"the backend had lost the key's data", "(on vmD): a tick may have run twice"}},
		{"all three, one reason each", []Run{loss, flip, never}, Warning, []string{"never fired", "flipped", "lost the key's data"}},
		{"before the due tick", []Run{old(never), old(flip), old(loss), good}, OK, []string{"last success"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate(Input{Key: "k", Schedule: daily, Grace: 5 * time.Minute, Now: now, Runs: c.runs})
			line := r.Line()
			if r.State != c.want {
				t.Fatalf("got %v %q; want %v", r.State, line, c.want)
			}
			for _, h := range c.has {
				if !strings.Contains(line, h) {
					t.Fatalf("line %q lacks %q", line, h)
				}
			}
			if c.want == Warning && len(r.Reasons) != len(c.has) && c.name == "all three, one reason each" {
				t.Fatalf("reasons %q: want one each", r.Reasons)
			}
			if r.Failures != 0 {
				t.Fatalf("failures %d: a never_fired entry is not a failed run", r.Failures)
			}
			checkPerf(t, line)
		})
	}
}

// TestPerfDurationLateness: duration is the job's run time in the newest finished run
// that ran it (the recorded duration when there is one), lateness its start − tick (of
// the newest run that started its job, in progress included); U when unknown.
func TestPerfDurationLateness(t *testing.T) {
	daily := sched(t, "0 9 * * *")
	recorded := ok("2026-12-01T09:00:00Z", time.Minute)
	recorded.Duration = 59500 * time.Millisecond
	late := ended("running", "2026-12-01T09:00:00Z")
	late.Started = at("2026-12-01T09:00:12.25Z")
	for _, c := range []struct {
		name string
		runs []Run
		want string
	}{
		{"a success", []Run{ok("2026-12-01T09:00:00Z", 90*time.Second)}, "duration=90s;;;0 lateness=1s"},
		{"recorded duration", []Run{recorded}, "duration=59.5s;;;0 lateness=1s"},
		{"in progress, late", []Run{ok("2026-11-30T09:00:00Z", time.Minute), late}, "duration=60s;;;0 lateness=12.25s"},
		{"without a tick", []Run{{Status: "succeeded", Started: at("2026-12-01T09:00:02Z"), Finished: at("2026-12-01T09:00:02.5Z")}}, "duration=0.5s;;;0 lateness=U"},
		{"nothing ran", []Run{{Status: "missed", Started: at("2026-12-01T09:30:00Z"), ScheduledFor: at("2026-12-01T09:00:00Z")}}, "duration=U;;;0 lateness=U"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate(Input{Key: "k", Schedule: daily, Grace: 5 * time.Minute, Now: at("2026-12-01T09:10:00Z"), Runs: c.runs})
			if !strings.HasSuffix(r.Line(), c.want) {
				t.Fatalf("line %q; want perfdata ending %q", r.Line(), c.want)
			}
			checkPerf(t, r.Line())
		})
	}
}

// TestLong: the long output of -v has every reason on its own line and the facts, with
// nothing that Nagios would cut (|) or change (;).
func TestLong(t *testing.T) {
	r := Evaluate(Input{Key: "billing", Schedule: sched(t, "0 9 * * *"), Grace: 5 * time.Minute, Now: at("2026-12-01T10:05:00Z"),
		Runs: []Run{ok("2026-11-30T09:00:00Z", time.Minute), ended("failed", "2026-12-01T09:00:00Z"), {Status: "error", Started: at("2026-12-01T09:10:00Z"), Node: "vm|B;x", Finished: at("2026-12-01T09:10:00Z")}}})
	long := r.Long()
	want := []string{
		"- no successful run for the 09:00 tick (due 2026-12-01T09:00Z + 5m)",
		"- the newest run of the job (for the 09:00 tick, on vmA, started 2026-12-01T09:00Z) ended failed",
		"- a run on vm/B,x at 2026-12-01T09:10Z ended error",
		"schedule: 0 9 * * * in UTC, due tick 09:00 (2026-12-01T09:00Z, grace 5m)",
		"last success: ended 2026-11-30T09:01:01Z on vmA, for the 2026-11-30 09:00 tick",
		"usual duration: not judged, fewer than 5 successes recorded (1): a run in progress may take until the next tick",
		"newest runs:",
		"  2026-12-01T09:10:00Z on vm/B,x error after 0s",
		"  2026-12-01T09:00:01Z on vmA failed after 1m, for the 09:00 tick",
		"  2026-11-30T09:00:01Z on vmA succeeded after 1m, for the 2026-11-30 09:00 tick",
	}
	if strings.Join(long, "\n") != strings.Join(want, "\n") {
		t.Fatalf("long output:\n%s\nwant:\n%s", strings.Join(long, "\n"), strings.Join(want, "\n"))
	}
}

// TestNeverFiredCountBounded: a never_fired entry over a year of a per-minute schedule
// is counted to a bound, and the line says "at least".
func TestNeverFiredCountBounded(t *testing.T) {
	now := at("2026-12-01T10:00:30Z")
	r := Evaluate(Input{Key: "k", Schedule: sched(t, "* * * * *"), Grace: 5 * time.Minute, Now: now, Runs: []Run{
		ok("2026-12-01T09:55:00Z", time.Second),
		{Status: NeverFiredStatus, Started: at("2026-12-01T09:55:00.5Z"), NeverFiredFrom: at("2025-12-01T00:00:00.000001Z"), NeverFiredTo: at("2026-12-01T09:54:00Z")},
	}})
	if r.State != Warning || !strings.Contains(r.Line(), "at least 100000 ticks") {
		t.Fatalf("%v %q; want WARNING with at least 100000 ticks", r.State, r.Line())
	}
}

// TestDefaultGrace: 5m at least, else the largest --jitter + --start-deadline a claim
// recorded.
func TestDefaultGrace(t *testing.T) {
	for _, c := range []struct {
		graces []time.Duration
		want   time.Duration
	}{
		{nil, 5 * time.Minute},
		{[]time.Duration{0, time.Minute}, 5 * time.Minute},
		{[]time.Duration{20 * time.Minute, 0, 50 * time.Minute}, 50 * time.Minute},
	} {
		var runs []Run
		for _, g := range c.graces {
			runs = append(runs, Run{Status: "succeeded", Grace: g})
		}
		if got := DefaultGrace(runs); got != c.want {
			t.Errorf("DefaultGrace(%v) = %s; want %s", c.graces, got, c.want)
		}
	}
}
