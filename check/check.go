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

// NeverFiredStatus is the status of a Run that stands for a ledger entry recording ticks
// no host claimed (the caller maps the backend's name to it: this package imports no
// backend package).
const NeverFiredStatus = "never_fired"

// minKnown is how many recorded successes make a usual duration (their p95) worth
// judging a run in progress by; with fewer, a run may take until the next tick.
const minKnown = 5

// Run is one recorded run of the key, as the verdict needs it: a row of the local
// history or an entry of the fleet's ledger (which also records ticks no host fired).
type Run struct {
	Status       string        // running, succeeded, failed, timeout, lock_lost, interrupted, skipped, error, abandoned, missed, or NeverFiredStatus
	Started      time.Time     // when the run started (the backend's clock in the fleet's ledger); when a never_fired entry was written
	Finished     time.Time     // zero while running, and for abandoned runs
	ScheduledFor time.Time     // the --schedule tick of the run; zero without one
	Duration     time.Duration // the job's run time; 0 = not recorded, Finished − Started stands in
	Node         string
	Duplicate    bool          // the fleet reader marked it DUPLICATE (same tick, or overlapping)
	Grace        time.Duration // --jitter + --start-deadline recorded at its claim (fleet's ledger)

	// Marks of the fleet's ledger; the local history has none of them.
	NeverFired                   int       // a NeverFiredStatus entry: how many ticks no host claimed
	NeverFiredFrom, NeverFiredTo time.Time // the first and the last of those ticks
	Flip                         bool      // the claim went back to a schedule or zone the key had within 24 h
	ScheduleWas                  string    // "EXPR ZONE" of the claim before, when this claim's differed
	DataLoss                     bool      // the claim found that the backend had lost the key's data
}

// MinGrace is the least default grace: cron, a busy host and the lock's wait together
// start a run within minutes of its tick.
const MinGrace = 5 * time.Minute

// DefaultGrace is the grace when none is given: the larger of MinGrace and the --jitter +
// --start-deadline that the runs recorded at their claims, since such a run starts that
// late after its tick by design and must not read as missing meanwhile.
func DefaultGrace(runs []Run) time.Duration {
	g := MinGrace
	for _, r := range runs {
		g = max(g, r.Grace)
	}
	return g
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
	// Suspension is the key's suspension in force now (cronlock suspend); nil = none.
	// Suspended, the key is OK with the suspension in the line (no run is due while it
	// is paused), or WARNING once it has lasted longer than MaxSuspend (0 = never).
	Suspension *Suspension
	MaxSuspend time.Duration
}

// Suspension is who paused the key, since when, until when (zero: until resumed) and why.
type Suspension struct {
	By           string
	Since, Until time.Time
	Reason       string
}

// line is s for the status line: "suspended by alice@vm1 since 2026-12-02 06:00 UTC
// until 2026-12-02 08:00 UTC (db upgrade)".
func (s *Suspension) line() string {
	out := "suspended by " + s.By + " since " + utcMinute(s.Since)
	if s.Until.IsZero() {
		out += " until resumed"
	} else {
		out += " until " + utcMinute(s.Until)
	}
	if s.Reason != "" {
		out += " (" + s.Reason + ")"
	}
	return out
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
	Failures    int            // runs that ended without success since the newest success
	Duration    *time.Duration // the job's run time in the newest finished run that ran it; nil: none
	Lateness    *time.Duration // start − tick of the newest run that ran the job for a tick; nil: none
	Details     []string       // what the verdict saw, one fact a line, for -v
	Perf        []Perf
}

// Separator stands between the reasons of the status line. Not "; ": Nagios 4 turns every
// ";" of a plugin's output into ":", so "A; B" would reach the operator as "A: B", as if
// B explained A. Not "|", which starts the perfdata, nor ", ", which reasons use inside
// themselves. " -- " passes Nagios, Icinga, Sensu and Zabbix as it is, and is in none of
// Nagios's default illegal_macro_output_chars (which notifications strip).
const Separator = " -- "

// Line is the plugin's one output line: "CRONLOCK CRITICAL - billing: no successful run
// … -- … | age=3900s;;3600 failures=2 duration=…s lateness=…s".
func (r Result) Line() string {
	s := "CRONLOCK " + r.State.String() + " - "
	if r.Key != "" {
		s += r.Key + ": "
	}
	s += r.Summary()
	if len(r.Perf) > 0 {
		s += " | " + r.PerfData()
	}
	return s
}

// PerfData is the performance data of the line, after its "|".
func (r Result) PerfData() string {
	ps := make([]string, len(r.Perf))
	for i, p := range r.Perf {
		ps[i] = p.String()
	}
	return strings.Join(ps, " ")
}

// Summary is the reasons as one line of text, joined by Separator, without "|" (which
// starts the perfdata), ";" (which Nagios would turn into ":") and control bytes (a node
// name is whatever a host called itself).
func (r Result) Summary() string {
	cleaned := make([]string, len(r.Reasons))
	for i, s := range r.Reasons {
		cleaned[i] = clean(s)
	}
	return strings.Join(cleaned, Separator)
}

// Long is the plugin's long output (-v): every reason on a line of its own, then the
// details, cleaned as the summary is. Nagios shows these lines below the status line.
func (r Result) Long() []string {
	var out []string
	if len(r.Reasons) > 1 {
		for _, s := range r.Reasons {
			out = append(out, "- "+clean(s))
		}
	}
	for _, s := range r.Details {
		out = append(out, clean(s))
	}
	return out
}

func clean(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c == '|':
			return '/'
		case c == ';':
			return ','
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
	if len(runs) == 0 && !in.Seen && in.Suspension == nil {
		return UnknownResult(in.Key, "no run of this key was ever recorded here: check --key (and --history or the backend), or wait for its first run")
	}
	if in.Schedule == nil && in.MaxAge <= 0 {
		return UnknownResult(in.Key, "no schedule known for this key (no run with --schedule recorded one): give --schedule EXPR or --max-age D")
	}
	now := in.Now
	var loc *time.Location
	if in.Schedule != nil {
		loc = in.Schedule.Location()
	}
	// tickOf is the tick of the schedule a run was for: the latest at or before its
	// scheduled_for (which is that tick itself when the run had this schedule), else, for
	// a run recorded without --schedule, at or before its start.
	tickOf := func(r Run) time.Time {
		t := r.ScheduledFor
		if t.IsZero() {
			t = r.Started
		}
		if in.Schedule != nil {
			if p := in.Schedule.Prev(t); !p.IsZero() {
				return p
			}
		}
		return t
	}
	name := func(t time.Time) string { return tickName(t, now, loc) }

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
		res.LastSuccess = endOf(runs[lastOK])
		res.Age = max(now.Sub(res.LastSuccess), 0)
	}
	for _, r := range newer {
		switch r.Status {
		case runstatus.Succeeded, runstatus.Running, runstatus.Skipped, runstatus.Suspended, NeverFiredStatus:
		default:
			res.Failures++
		}
	}
	p95, known := usualP95(runs)

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
	// How long a run may be in progress before it is news: twice the usual p95 once
	// minKnown successes say what usual is; with fewer, until the tick after its own (a
	// run still going then holds up that tick); without a schedule, as long as it likes.
	tooLong := false
	var runningFor time.Duration
	if running >= 0 {
		r := runs[running]
		runningFor = max(now.Sub(r.Started), 0)
		switch {
		case known >= minKnown:
			if runningFor > 2*p95 {
				tooLong = true
				warn = append(warn, fmt.Sprintf("the run%s (started %s) has been in progress for %s, more than twice its usual p95 (%s)",
					onNode(r.Node), utcMinute(r.Started), human(runningFor), human(p95)))
			}
		case in.Schedule != nil:
			if next := in.Schedule.Next(tickOf(r)); !next.IsZero() && !now.Before(next) {
				tooLong = true
				warn = append(warn, fmt.Sprintf("the run%s of the %s tick has been in progress for %s, past the next tick (%s), and too few successes are recorded to tell its usual duration",
					onNode(r.Node), name(tickOf(r)), human(runningFor), name(next)))
			}
		}
	}

	// inProgress: the run in progress is the one that answers for the due tick (or for
	// --max-age). Then what ended before it is history: it does not make the check
	// CRITICAL while that run may still succeed.
	inProgress := false
	var windowStart time.Time
	if in.Schedule != nil {
		res.Due = in.Schedule.Prev(now.Add(-in.Grace))
		if res.Due.IsZero() {
			return UnknownResult(in.Key, fmt.Sprintf("the schedule %q has no tick in the last 100 years", in.Schedule.String()))
		}
		windowStart = res.Due
		interval := res.Due.Sub(in.Schedule.Prev(res.Due.Add(-time.Second)))
		ageCrit = strconv.FormatInt(int64((interval + in.Grace).Seconds()), 10)
		// A success for the due tick or a later one, judged by the tick it was for (not
		// by when it ended); the line names that tick, which during the grace is a later
		// one than the due tick.
		okRun := -1
		for i, r := range runs {
			if r.Status == runstatus.Succeeded && !tickOf(r).Before(res.Due) {
				okRun = i
				break
			}
		}
		// A tick that came while the key was suspended needs no success: its runs were
		// suspended on purpose, and resume does not run it.
		suspRun := -1
		for i, r := range runs {
			if r.Status == runstatus.Suspended && !tickOf(r).Before(res.Due) {
				suspRun = i
				break
			}
		}
		switch {
		case okRun >= 0:
			okWhy = fmt.Sprintf("last success %s ago, for the %s tick", human(max(now.Sub(endOf(runs[okRun])), 0)), name(tickOf(runs[okRun])))
			if running >= 0 && !tooLong && tickOf(runs[running]).After(tickOf(runs[okRun])) {
				okWhy += fmt.Sprintf(", and the run of the %s tick is in progress%s for %s", name(tickOf(runs[running])), onNode(runs[running].Node), human(runningFor))
			}
		case running >= 0 && !tickOf(runs[running]).Before(res.Due):
			inProgress = true
			if !tooLong {
				okWhy = fmt.Sprintf("the run of the %s tick is in progress%s for %s", name(tickOf(runs[running])), onNode(runs[running].Node), human(runningFor))
			}
		case suspRun >= 0:
			okWhy = fmt.Sprintf("the %s tick came while the key was suspended (its runs did not start)", name(tickOf(runs[suspRun])))
		default:
			crit = append(crit, fmt.Sprintf("no successful run for the %s tick (due %s + %s)", name(res.Due), utcMinute(res.Due), human(in.Grace)))
		}
	}
	if in.MaxAge > 0 {
		ageCrit = strconv.FormatInt(int64(in.MaxAge.Seconds()), 10)
		if windowStart.IsZero() {
			windowStart = now.Add(-in.MaxAge)
		}
		switch {
		case lastOK >= 0 && res.Age <= in.MaxAge:
			if okWhy == "" && len(crit) == 0 && !inProgress {
				okWhy = fmt.Sprintf("last success %s ago, within --max-age %s", human(res.Age), human(in.MaxAge))
			}
		case in.Schedule == nil && suspendedWithin(runs, now.Add(-in.MaxAge)):
			// Without a schedule, a run suspended within --max-age stands for the runs
			// the suspension kept from starting.
			if okWhy == "" {
				okWhy = fmt.Sprintf("runs within --max-age %s were suspended", human(in.MaxAge))
			}
		case running >= 0 && runs[running].Started.After(now.Add(-in.MaxAge)) && in.Schedule == nil:
			// A run in progress within --max-age answers for it, as a run of the due tick
			// does for a schedule; one running too long is already a warning.
			inProgress = true
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
	// Runs that ended before the run in progress that answers for the due tick do not:
	// that run is the job's newest, and it has not failed.
	for i, r := range runs {
		if inProgress && i == running {
			break
		}
		if !childStarted(r.Status) {
			continue
		}
		if badStatus(r.Status) {
			var about []string
			if !r.ScheduledFor.IsZero() {
				about = append(about, "for the "+name(r.ScheduledFor)+" tick")
			}
			if r.Node != "" {
				about = append(about, "on "+r.Node)
			}
			about = append(about, "started "+utcMinute(r.Started))
			crit = append(crit, fmt.Sprintf("the newest run of the job (%s) ended %s", strings.Join(about, ", "), r.Status))
		}
		break
	}

	// Marks of the ledger since the due tick (or within --max-age): once per tick was
	// broken, or may have been, though the job did run.
	recent := func(r Run) bool {
		return !r.Started.Before(windowStart) || !r.ScheduledFor.IsZero() && !r.ScheduledFor.Before(windowStart)
	}
	var dupNodes, flipNodes, lossNodes []string
	var flipWas string
	var neverN int
	var neverFrom, neverTo time.Time
	var neverBy []string
	for _, r := range runs {
		if r.Duplicate && !tickOf(r).Before(windowStart) {
			dupNodes = addNode(dupNodes, r.Node)
		}
		if !recent(r) {
			continue
		}
		if r.Status == NeverFiredStatus {
			n, from, to := r.NeverFired, r.NeverFiredFrom, r.NeverFiredTo
			if n <= 0 && in.Schedule != nil && !to.IsZero() {
				n, from = ticksIn(in.Schedule, from, to)
			}
			neverN += max(n, 1)
			if from.IsZero() {
				from = to
			}
			if to.IsZero() {
				to = from
			}
			if !from.IsZero() && (neverFrom.IsZero() || from.Before(neverFrom)) {
				neverFrom = from
			}
			if to.After(neverTo) {
				neverTo = to
			}
			neverBy = addNode(neverBy, r.Node)
		}
		if r.Flip {
			flipNodes = addNode(flipNodes, r.Node)
			if flipWas == "" {
				flipWas = r.ScheduleWas
			}
		}
		if r.DataLoss {
			lossNodes = addNode(lossNodes, r.Node)
		}
	}
	since := utcMinute(windowStart)
	if len(dupNodes) > 0 {
		warn = append(warn, fmt.Sprintf("DUPLICATE runs since %s (on %s)", since, strings.Join(dupNodes, ", ")))
	}
	if neverN > 0 {
		which := ""
		switch {
		case neverFrom.IsZero():
		case neverFrom.Equal(neverTo):
			which = " (the " + name(neverFrom) + " tick)"
		default:
			which = " (the " + name(neverFrom) + " to the " + name(neverTo) + " tick)"
		}
		ticks := "tick"
		if neverN > 1 {
			ticks = "ticks"
		}
		count := strconv.Itoa(neverN)
		if neverN >= maxCounted {
			count = "at least " + count
		}
		warn = append(warn, fmt.Sprintf("%s %s%s never fired on any host, found since %s%s: is cron running on the hosts, and does --schedule match their crontab lines?",
			count, ticks, which, since, byNodes(neverBy)))
	}
	if len(flipNodes) > 0 {
		was := ""
		if flipWas != "" {
			was = ", away from " + flipWas
		}
		warn = append(warn, fmt.Sprintf("the schedule flipped back and forth since %s (claims on %s%s): hosts disagree on the schedule or the zone and may run the job twice a day, compare --schedule, --tz and /etc/localtime across them",
			since, strings.Join(flipNodes, ", "), was))
	}
	if len(lossNodes) > 0 {
		warn = append(warn, fmt.Sprintf("the backend had lost the key's data (a restart without persistence, FLUSHALL or an eviction) when a run claimed since %s (on %s): a tick may have run twice",
			since, strings.Join(lossNodes, ", ")))
	}
	// An error or a missed tick newer than the last success: the job did not run when
	// it should have, though no run of it failed.
	for _, r := range newer {
		if r.Status == runstatus.Error || r.Status == runstatus.Missed {
			warn = append(warn, fmt.Sprintf("a run%s at %s ended %s", onNode(r.Node), utcMinute(r.Started), r.Status))
			break
		}
	}

	// Suspended now: no run is due, so what is missing or failed is not news until it is
	// resumed; only a suspension older than --max-suspend is (a maintenance window that
	// nobody closed). The marks of the ledger (DUPLICATE, never fired…) still count.
	if s := in.Suspension; s != nil {
		crit = nil
		lasted := max(now.Sub(s.Since), 0)
		line := s.line()
		switch {
		case in.MaxSuspend > 0 && lasted > in.MaxSuspend:
			warn = append([]string{fmt.Sprintf("%s, for %s, longer than --max-suspend %s: resume it (cronlock resume --key %s) or suspend it again with --for or --until",
				line, human(lasted), human(in.MaxSuspend), in.Key)}, warn...)
		case okWhy != "":
			okWhy = line + ", " + okWhy
		default:
			okWhy = line
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

	// The newest finished run that ran the job: how long it took. The newest run that
	// started its job for a tick: how late after the tick it started.
	for _, r := range runs {
		if childStarted(r.Status) && !r.Finished.IsZero() {
			d := r.Duration
			if d <= 0 {
				d = max(r.Finished.Sub(r.Started), 0)
			}
			res.Duration = &d
			break
		}
	}
	for _, r := range runs {
		if (childStarted(r.Status) || r.Status == runstatus.Running) && !r.ScheduledFor.IsZero() {
			l := r.Started.Sub(r.ScheduledFor)
			res.Lateness = &l
			break
		}
	}
	age := Perf{Label: "age", UOM: "s", Crit: ageCrit, Min: "0"}
	if lastOK >= 0 {
		age.Value = strconv.FormatInt(int64(res.Age.Seconds()), 10)
	}
	res.Perf = []Perf{age, {Label: "failures", Value: strconv.Itoa(res.Failures), Min: "0"},
		{Label: "duration", Value: seconds(res.Duration), UOM: "s", Min: "0"},
		{Label: "lateness", Value: seconds(res.Lateness), UOM: "s"}}

	res.Details = details(in, runs, lastOK, running, p95, known, tickOf, name)
	return res
}

// details are the facts behind the verdict, for the long output of -v.
func details(in Input, runs []Run, lastOK, running int, p95 time.Duration, known int, tickOf func(Run) time.Time, name func(time.Time) string) []string {
	var d []string
	if in.Schedule != nil {
		d = append(d, fmt.Sprintf("schedule: %s in %s, due tick %s (%s, grace %s)", in.Schedule.String(), in.Schedule.Zone(),
			name(in.Schedule.Prev(in.Now.Add(-in.Grace))), utcMinute(in.Schedule.Prev(in.Now.Add(-in.Grace))), human(in.Grace)))
	}
	if in.MaxAge > 0 {
		d = append(d, "--max-age: "+human(in.MaxAge))
	}
	if lastOK >= 0 {
		r := runs[lastOK]
		d = append(d, fmt.Sprintf("last success: ended %s%s, for the %s tick", utcSecond(endOf(r)), onNode(r.Node), name(tickOf(r))))
	} else {
		d = append(d, "last success: none recorded")
	}
	if running >= 0 {
		r := runs[running]
		d = append(d, fmt.Sprintf("in progress: since %s%s, for the %s tick", utcSecond(r.Started), onNode(r.Node), name(tickOf(r))))
	}
	if known >= minKnown {
		d = append(d, fmt.Sprintf("usual duration: p95 %s of the newest %d successes", human(p95), known))
	} else {
		d = append(d, fmt.Sprintf("usual duration: not judged, fewer than %d successes recorded (%d): a run in progress may take until the next tick", minKnown, known))
	}
	n := 0
	for _, r := range runs {
		if r.Status == runstatus.Skipped {
			continue
		}
		if n == 0 {
			d = append(d, "newest runs:")
		}
		if n++; n > 5 {
			break
		}
		line := "  " + utcSecond(r.Started) + onNode(r.Node) + " " + r.Status
		if r.Status == NeverFiredStatus {
			line += fmt.Sprintf(" (%d)", max(r.NeverFired, 1))
		} else if !r.Finished.IsZero() {
			line += " after " + human(max(r.Finished.Sub(r.Started), 0))
		}
		if !r.ScheduledFor.IsZero() {
			line += ", for the " + name(r.ScheduledFor) + " tick"
		}
		d = append(d, line)
	}
	return d
}

// maxCounted bounds how many never-fired ticks one entry is counted to (a per-minute job
// whose cron was off for a year has half a million): the line says "at least" beyond.
const maxCounted = 100000

// ticksIn counts the ticks of s from from to to, both included, and returns the first. A
// never_fired entry written by a script that knows no schedule (Redis's acquire) holds
// no count, and as its start the instant just after the last claimed tick: the reader
// turns that into ticks with the schedule. A zero from counts to alone.
func ticksIn(s *schedule.Schedule, from, to time.Time) (int, time.Time) {
	if from.IsZero() || from.After(to) {
		return 1, to
	}
	n, first := s.Count(from, to, maxCounted)
	if n == 0 {
		return 1, to
	}
	return n, first
}

// suspendedWithin reports whether a run of runs was suspended at or after since.
func suspendedWithin(runs []Run, since time.Time) bool {
	for _, r := range runs {
		if r.Status == runstatus.Suspended && !r.Started.Before(since) {
			return true
		}
	}
	return false
}

// endOf is when a run ended: its Finished, else (a record without an end) its start.
func endOf(r Run) time.Time {
	if r.Finished.IsZero() {
		return r.Started
	}
	return r.Finished
}

// addNode adds node to nodes once; an unnamed node counts as "?".
func addNode(nodes []string, node string) []string {
	if node == "" {
		node = "?"
	}
	if slices.Contains(nodes, node) {
		return nodes
	}
	return append(nodes, node)
}

// byNodes is " (recorded by vmA, vmB)", or nothing.
func byNodes(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return " (recorded by " + strings.Join(nodes, ", ") + ")"
}

// seconds is d as a perfdata value in seconds, to the millisecond; "" (U) for nil.
func seconds(d *time.Duration) string {
	if d == nil {
		return ""
	}
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64)
}

// utcMinute and utcSecond write an instant in UTC, as the line names run starts.
func utcMinute(t time.Time) string { return t.UTC().Format("2006-01-02T15:04Z") }
func utcSecond(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// usualP95 is the 95th percentile of the durations (end − start, the measure of a run
// in progress) of the newest (up to 100) succeeded runs, and how many there were.
func usualP95(runs []Run) (time.Duration, int) {
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
		return 0, 0
	}
	slices.Sort(d)
	// Nearest rank: the smallest duration with at least 95% of the runs at or below it.
	i := (95*len(d)+99)/100 - 1
	return d[i], len(d)
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
