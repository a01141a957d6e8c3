// Package check is the dead-man's-switch verdict (README, "Dead-man's switch"): from the records of a key's
// runs, a schedule (or a largest age) and now, it decides OK, WARNING, CRITICAL or
// UNKNOWN in the monitoring-plugin convention (Nagios, Icinga, Sensu, Zabbix) and writes
// the one status line with its performance data.
//
// The package is pure: it reads no clock, file or server. Its callers gather the runs
// (the local history, or the fleet's record in Redis), find the schedule and pass now;
// it does not know where the records came from, and it does not mark duplicates itself
// (the fleet reader does: Run.Duplicate).
package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"cronlock/runstatus"
	"cronlock/schedule"
)

// State is a verdict; its value is the plugin's exit code.
type State int

// The plugin convention's states, in the order of their exit codes.
const (
	OK       State = 0
	Warning  State = 1
	Critical State = 2
	Unknown  State = 3
)

func (s State) String() string {
	switch s {
	case OK:
		return "OK"
	case Warning:
		return "WARNING"
	case Critical:
		return "CRITICAL"
	}
	return "UNKNOWN"
}

// Run is one recorded run of the key, as the verdict needs it.
type Run struct {
	Status       string    // running, succeeded, failed, timeout, lock_lost, interrupted, skipped, error, abandoned, missed
	Started      time.Time // when the run started (Redis TIME in the fleet record)
	Finished     time.Time // zero while running, and for abandoned runs
	ScheduledFor time.Time // the --schedule tick of the run; zero without one
	Node         string
	Duplicate    bool // the fleet reader marked it DUPLICATE (same tick, or overlapping)
}

// tick is the tick a run was for: its scheduled_for, else its start (a run recorded
// without --schedule is taken to be for the latest tick at or before its start).
func (r Run) tick() time.Time {
	if !r.ScheduledFor.IsZero() {
		return r.ScheduledFor
	}
	return r.Started
}

// Input is what the verdict is made from. The zero Grace is no grace; callers give the
// default of 5m.
type Input struct {
	Key      string
	Runs     []Run // in any order; sorted newest first by Started
	Seen     bool  // a tick record of the key exists, even if no run is recorded
	Schedule *schedule.Schedule
	MaxAge   time.Duration // 0 = none; without a Schedule it is required
	Grace    time.Duration
	Now      time.Time
}

// Perf is one performance datum, label=value[UOM];warn;crit;min;max. An empty Value is
// written as "U", the plugin convention's "could not be determined".
type Perf struct {
	Label      string
	Value      string
	UOM        string
	Warn, Crit string
	Min, Max   string
}

func (p Perf) String() string {
	v := p.Value
	if v == "" {
		v = "U"
	} else {
		v += p.UOM
	}
	s := strings.Join([]string{p.Label + "=" + v, p.Warn, p.Crit, p.Min, p.Max}, ";")
	return strings.TrimRight(s, ";")
}

// Result is the verdict.
type Result struct {
	State       State
	Key         string
	Reasons     []string  // why, most severe first; one for OK and UNKNOWN
	Due         time.Time // the tick that must have a success (zero without a schedule)
	LastSuccess time.Time // when the newest success ended (zero: none recorded)
	Age         time.Duration
	Failures    int // runs that ended without success since the newest success
	Perf        []Perf
}

// Line is the plugin's one output line:
// "CRONLOCK CRITICAL - billing: no successful run … | age=3900s;;3600 failures=2".
func (r Result) Line() string {
	s := "CRONLOCK " + r.State.String() + " - "
	if r.Key != "" {
		s += r.Key + ": "
	}
	s += r.Summary()
	if len(r.Perf) > 0 {
		ps := make([]string, len(r.Perf))
		for i, p := range r.Perf {
			ps[i] = p.String()
		}
		s += " | " + strings.Join(ps, " ")
	}
	return s
}

// Summary is the reasons as one line of text, without "|" (which starts the perfdata)
// and without control bytes (a node name is whatever a host called itself).
func (r Result) Summary() string {
	return clean(strings.Join(r.Reasons, "; "))
}

func clean(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c == '|':
			return '/'
		case c < 0x20 || c == 0x7f:
			return '?'
		}
		return c
	}, s)
}

// UnknownResult is the verdict when nothing could be read (a backend unreachable, a bad
// flag): why says what went wrong and what to do.
func UnknownResult(key, why string) Result {
	return Result{State: Unknown, Key: key, Reasons: []string{why}}
}

// badStatus reports whether a run whose child started ended in a way that needs a
// person: the newest such run makes the check CRITICAL.
func badStatus(s string) bool {
	switch s {
	case runstatus.Failed, runstatus.Timeout, runstatus.LockLost, runstatus.Interrupted, runstatus.Abandoned:
		return true
	}
	return false
}

// childStarted reports whether a run with status s ran its job (or may have: an
// abandoned run's cronlock died, perhaps with the job running).
func childStarted(s string) bool {
	return s == runstatus.Succeeded || badStatus(s)
}

// Evaluate returns the verdict of in.
func Evaluate(in Input) Result {
	res := Result{Key: in.Key}
	runs := slices.Clone(in.Runs)
	slices.SortStableFunc(runs, func(a, b Run) int { return b.Started.Compare(a.Started) })
	if len(runs) == 0 && !in.Seen {
		return UnknownResult(in.Key, "no run of this key was ever recorded here; check --key (and --history or the backend), or wait for its first run")
	}
	if in.Schedule == nil && in.MaxAge <= 0 {
		return UnknownResult(in.Key, "no schedule known for this key (no run with --schedule recorded one); give --schedule EXPR or --max-age D")
	}
	now := in.Now

	lastOK := -1
	for i, r := range runs {
		if r.Status == runstatus.Succeeded {
			lastOK = i
			break
		}
	}
	newer := runs // the runs newer than the last success
	if lastOK >= 0 {
		newer = runs[:lastOK]
		res.LastSuccess = runs[lastOK].Finished
		if res.LastSuccess.IsZero() {
			res.LastSuccess = runs[lastOK].Started
		}
		res.Age = max(now.Sub(res.LastSuccess), 0)
	}
	for _, r := range newer {
		if r.Status != runstatus.Succeeded && r.Status != runstatus.Running && r.Status != runstatus.Skipped {
			res.Failures++
		}
	}
	p95 := usualP95(runs)

	var crit, warn []string
	var okWhy string
	var ageCrit string

	// The newest run still in progress: it may be the one that answers for the due tick.
	running := -1
	for i, r := range runs {
		if r.Status == runstatus.Running {
			running = i
			break
		}
	}
	tooLong := false
	var runningFor time.Duration
	if running >= 0 {
		runningFor = max(now.Sub(runs[running].Started), 0)
		if p95 > 0 && runningFor > 2*p95 {
			tooLong = true
			warn = append(warn, fmt.Sprintf("the run%s has been in progress for %s, more than twice its usual p95 (%s)",
				onNode(runs[running].Node), human(runningFor), human(p95)))
		}
	}

	var windowStart time.Time
	if in.Schedule != nil {
		res.Due = in.Schedule.Prev(now.Add(-in.Grace))
		windowStart = res.Due
		tick := tickName(res.Due, now, in.Schedule.Location())
		interval := res.Due.Sub(in.Schedule.Prev(res.Due.Add(-time.Second)))
		ageCrit = strconv.FormatInt(int64((interval + in.Grace).Seconds()), 10)
		switch {
		case res.Due.IsZero():
			return UnknownResult(in.Key, fmt.Sprintf("the schedule %q has no tick in the last 100 years", in.Schedule.String()))
		case lastOK >= 0 && !runs[lastOK].tick().Before(res.Due):
			okWhy = fmt.Sprintf("last success %s ago, for the %s tick", human(res.Age), tick)
		case running >= 0 && !runs[running].tick().Before(res.Due):
			if !tooLong {
				okWhy = fmt.Sprintf("the run of the %s tick is in progress%s for %s", tick, onNode(runs[running].Node), human(runningFor))
			}
		default:
			crit = append(crit, fmt.Sprintf("no successful run for the %s tick (due %s + %s)", tick, res.Due.UTC().Format("2006-01-02T15:04Z"), human(in.Grace)))
		}
	}
	if in.MaxAge > 0 {
		ageCrit = strconv.FormatInt(int64(in.MaxAge.Seconds()), 10)
		if windowStart.IsZero() {
			windowStart = now.Add(-in.MaxAge)
		}
		switch {
		case lastOK >= 0 && res.Age <= in.MaxAge:
			if okWhy == "" && len(crit) == 0 {
				okWhy = fmt.Sprintf("last success %s ago, within --max-age %s", human(res.Age), human(in.MaxAge))
			}
		case running >= 0 && runs[running].Started.After(now.Add(-in.MaxAge)) && in.Schedule == nil:
			// A run in progress within --max-age answers for it, as a run of the due tick
			// does for a schedule; one running too long is already a warning.
			if okWhy == "" && !tooLong {
				okWhy = fmt.Sprintf("a run is in progress%s for %s", onNode(runs[running].Node), human(runningFor))
			}
		case lastOK >= 0:
			crit = append(crit, fmt.Sprintf("no successful run within --max-age %s (the last one ended %s ago)", human(in.MaxAge), human(res.Age)))
		default:
			crit = append(crit, fmt.Sprintf("no successful run within --max-age %s (none recorded)", human(in.MaxAge)))
		}
	}

	// The newest run whose job started decides whether the job is broken now, whatever
	// the schedule says: a manual rerun that failed after the tick's success is news.
	for _, r := range runs {
		if !childStarted(r.Status) {
			continue
		}
		if badStatus(r.Status) {
			where := ""
			if r.Node != "" {
				where = "on " + r.Node + ", "
			}
			crit = append(crit, fmt.Sprintf("the last run (%sstarted %s) ended %s", where, r.Started.UTC().Format("2006-01-02T15:04Z"), r.Status))
		}
		break
	}

	// Duplicates in the window: once per tick was broken, though the job did run.
	var dupNodes []string
	for _, r := range runs {
		if r.Duplicate && !r.tick().Before(windowStart) && !slices.Contains(dupNodes, r.Node) {
			dupNodes = append(dupNodes, r.Node)
		}
	}
	if len(dupNodes) > 0 {
		warn = append(warn, fmt.Sprintf("DUPLICATE runs since %s (on %s)", windowStart.UTC().Format("2006-01-02T15:04Z"), strings.Join(dupNodes, ", ")))
	}
	// An error or a missed tick newer than the last success: the job did not run when
	// it should have, though no run of it failed.
	for _, r := range newer {
		if r.Status == runstatus.Error || r.Status == runstatus.Missed {
			warn = append(warn, fmt.Sprintf("a run%s at %s ended %s", onNode(r.Node), r.Started.UTC().Format("2006-01-02T15:04Z"), r.Status))
			break
		}
	}

	switch {
	case len(crit) > 0:
		res.State = Critical
	case len(warn) > 0:
		res.State = Warning
	default:
		res.State = OK
	}
	res.Reasons = append(crit, warn...)
	if res.State == OK {
		res.Reasons = []string{okWhy}
	}
	age := Perf{Label: "age", UOM: "s", Crit: ageCrit, Min: "0"}
	if lastOK >= 0 {
		age.Value = strconv.FormatInt(int64(res.Age.Seconds()), 10)
	}
	res.Perf = []Perf{age, {Label: "failures", Value: strconv.Itoa(res.Failures), Min: "0"}}
	return res
}

// usualP95 is the 95th percentile of the durations of the newest (up to 100) succeeded
// runs; 0 when none is recorded, and then no run in progress counts as too long.
func usualP95(runs []Run) time.Duration {
	var d []time.Duration
	for _, r := range runs {
		if r.Status == runstatus.Succeeded && !r.Finished.IsZero() && !r.Finished.Before(r.Started) {
			d = append(d, r.Finished.Sub(r.Started))
			if len(d) == 100 {
				break
			}
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	// Nearest rank: the smallest duration with at least 95% of the runs at or below it.
	i := (95*len(d)+99)/100 - 1
	return d[i]
}

// tickName is a tick as people read it in the schedule's zone: the time of day when it
// is on now's day, else with its date.
func tickName(t, now time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	t, now = t.In(loc), now.In(loc)
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// human writes d as people read it: 5m, 1h30m, 2d3h, 45s, 300ms.
func human(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	d = d.Round(time.Second)
	days, h, m, sec := d/(24*time.Hour), d/time.Hour%24, d/time.Minute%60, d/time.Second%60
	var b strings.Builder
	for _, p := range []struct {
		n    time.Duration
		unit string
	}{{days, "d"}, {h, "h"}, {m, "m"}, {sec, "s"}} {
		// Seconds are noise beside days.
		if p.n > 0 && !(p.unit == "s" && days > 0) {
			fmt.Fprintf(&b, "%d%s", p.n, p.unit)
		}
	}
	return b.String()
}

// onNode is " on NODE", or nothing when the record names no node.
func onNode(node string) string {
	if node == "" {
		return ""
	}
	return " on " + node
}

// ExitCode is the plugin exit code of s: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
func ExitCode(s State) int {
	if s < OK || s > Unknown {
		return int(Unknown)
	}
	return int(s)
}
