// Package fleetview is `cronlock jobs`: one line per key a backend knows, with its
// schedule, its last run, its next tick, what runs now and its success rate over 7 days,
// as `systemctl list-timers` and `kubectl get cronjobs` show theirs. It reads through
// lockrun.JobReader (Redis: an index and pipelined batches; etcd: a range read and
// transactions of many keys), or the local lock folder and history, and lays the lines out
// as a table cut to the terminal or as JSON. It opens no backend (it is handed one) and
// marks the suspended keys with AddSuspensions.
package fleetview

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"cronlock/lockrun"
	"cronlock/runstatus"
	"cronlock/runview"
	"cronlock/schedule"
	"cronlock/table"
	"cronlock/tty"
)

// Window is the span of the success rate: the last 7 days (whole UTC days of the
// backend's per-day counters: today and the 6 before it).
const Window = 7 * 24 * time.Hour

// Job is one key as jobs shows it; its JSON is the --json line (README, "jobs").
type Job struct {
	Key string `json:"key"`
	// Schedule and Zone are the EXPR and zone of the key's last claimed tick; "" when no
	// run of the key had --schedule.
	Schedule string `json:"schedule"`
	Zone     string `json:"zone"`
	// Last is the newest run that ended (or never started: missed, error); nil when none
	// is kept.
	Last *Last `json:"last"`
	// Next is the schedule's first tick after now; NextInMS how long until it. Both nil
	// without a schedule.
	Next     *time.Time `json:"next"`
	NextInMS *int64     `json:"next_in_ms"`
	// Now is "running", "suspended" or "idle".
	Now string `json:"now"`
	// Running is the run that holds the key now; nil when none.
	Running *Running `json:"running"`
	// Standbys counts the standbys waiting on the running run's tick.
	Standbys int `json:"standbys"`
	// Suspended is the key's suspension; nil when it is not suspended. The caller sets it
	// with Suspend: this package reads none.
	Suspended *Suspension `json:"suspended"`
	// Rate is succeeded / runs with an outcome over Window; nil when no run had one.
	// Runs7d and Succeeded7d are its counts; RateFrom says where they come from:
	// "counters" (the fleet's per-day counters), "entries" (the entries the backend
	// keeps: etcd), "history" (the local history).
	Rate        *float64 `json:"success_rate_7d"`
	Runs7d      int      `json:"runs_7d"`
	Succeeded7d int      `json:"succeeded_7d"`
	RateFrom    string   `json:"rate_from"`

	next time.Time // sort key
}

// Last is a key's newest finished run.
type Last struct {
	RunID        string     `json:"run_id"`
	Node         string     `json:"node"`
	Status       string     `json:"status"`
	Exit         *int       `json:"exit"`
	ScheduledFor *time.Time `json:"scheduled_for"` // its tick; nil without --schedule
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"` // nil when unknown (abandoned)
	AgoMS        int64      `json:"ago_ms"`      // now − its end (or its start when the end is unknown)
}

// Running is the run that holds a key now.
type Running struct {
	RunID string    `json:"run_id"`
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
	ForMS int64     `json:"for_ms"`
}

// Suspension is a key's fleet-wide suspension, as its reader gives it.
type Suspension struct {
	By     string     `json:"by"` // user@host
	Since  time.Time  `json:"since"`
	Until  *time.Time `json:"until"` // nil: until resumed
	Reason string     `json:"reason"`
}

// Suspend marks j suspended by s: NOW says so (the run holding the key, if any, goes
// on: a suspension stops no running job, so Running stays).
func (j *Job) Suspend(s Suspension) {
	j.Suspended, j.Now = &s, "suspended"
}

// UnknownKeyError is Read's error for a --key the backend knows nothing of.
type UnknownKeyError struct{ Key, Backend string }

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("no key %s is known on %s (no lock, tick or run of it); cronlock jobs lists the known keys", e.Key, e.Backend)
}

// Source is where the keys and their states come from.
type Source interface {
	keys(ctx context.Context) ([]string, error)
	states(ctx context.Context, keys []string, now time.Time) ([]state, error)
	describe() string
}

// state is a KeyState with the rate's counts when the source has its own (local).
type state struct {
	lockrun.KeyState
	counted         bool
	runs, succeeded int
	rateFrom        string
}

// Options select what Read reads.
type Options struct {
	Key string    // only this key; "" = every key
	Now time.Time // the reader's clock; zero = time.Now()
}

// Read returns the jobs of src, sorted by next tick (keys without a schedule last, by
// key). With o.Key it reads that key alone and returns *UnknownKeyError when the backend
// knows nothing of it. Its other errors are the backend's.
func Read(src Source, o Options) ([]Job, error) {
	ctx := context.Background()
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	var keys []string
	if o.Key != "" {
		keys = []string{o.Key}
	} else {
		var err error
		if keys, err = src.keys(ctx); err != nil {
			return nil, err
		}
	}
	var jobs []Job
	for i := 0; i < len(keys); i += lockrun.JobsBatch {
		sts, err := src.states(ctx, keys[i:min(i+lockrun.JobsBatch, len(keys))], now)
		if err != nil {
			return nil, err
		}
		for _, st := range sts {
			if st.Tick == nil && len(st.Recent) == 0 && st.runs == 0 && !counted(st.Days) {
				// Nothing of it: not a key the backend knows (an index entry whose
				// records expired with a retired job, or a --key never used).
				continue
			}
			jobs = append(jobs, build(st, now))
		}
	}
	if o.Key != "" && len(jobs) == 0 {
		return nil, &UnknownKeyError{Key: o.Key, Backend: src.describe()}
	}
	Sort(jobs)
	return jobs, nil
}

// counted reports whether days count any run.
func counted(days []lockrun.DayCount) bool {
	for _, d := range days {
		if d.Runs > 0 {
			return true
		}
	}
	return false
}

// Sort orders jobs by next tick, keys without a schedule last, ties by key.
func Sort(jobs []Job) {
	sort.SliceStable(jobs, func(a, b int) bool {
		x, y := jobs[a], jobs[b]
		if x.next.IsZero() != y.next.IsZero() {
			return !x.next.IsZero()
		}
		if !x.next.Equal(y.next) {
			return x.next.Before(y.next)
		}
		return x.Key < y.Key
	})
}

// build makes the Job of one key's state at now.
func build(st state, now time.Time) Job {
	j := Job{Key: st.Key, Now: "idle", Standbys: st.Standbys}
	if tr := st.Tick; tr != nil && tr.Expr != "" {
		j.Schedule, j.Zone = tr.Expr, tr.TZ
		if s, err := schedule.Parse(tr.Expr, tr.TZ); err == nil {
			if next := s.Next(now); !next.IsZero() {
				ms := next.Sub(now).Milliseconds()
				j.next, j.Next, j.NextInMS = next, &next, &ms
			}
		}
	}
	for _, e := range st.Recent {
		switch {
		case e.Status == runstatus.Running:
			if j.Running == nil {
				since := e.Started()
				j.Running = &Running{RunID: e.RunID, Node: e.Node, Since: since, ForMS: max(now.Sub(since).Milliseconds(), 0)}
				j.Now = "running"
			}
		case e.Status == lockrun.NeverFiredStatus, e.Status == runstatus.Suspended:
			// Not runs: LAST is the last run that was let run (NOW says suspended).
		case j.Last == nil:
			j.Last = lastOf(e, now)
		}
	}
	if j.Running == nil {
		j.Standbys = 0 // a slot outlives its run by its lease at most
	}
	runs, ok, from := st.runs, st.succeeded, st.rateFrom
	if !st.counted {
		runs, ok, from = rateOf(st.KeyState, now)
	}
	j.Runs7d, j.Succeeded7d, j.RateFrom = runs, ok, from
	if runs > 0 {
		r := float64(ok) / float64(runs)
		j.Rate = &r
	}
	return j
}

func lastOf(e lockrun.FleetEntry, now time.Time) *Last {
	l := &Last{RunID: e.RunID, Node: e.Node, Status: e.Status, Exit: e.Exit, StartedAt: e.Started()}
	if t := e.ScheduledFor(); !t.IsZero() {
		l.ScheduledFor = &t
	}
	end := l.StartedAt
	if f := e.Finished(); !f.IsZero() && e.Status != runstatus.Abandoned {
		l.FinishedAt, end = &f, f
	}
	l.AgoMS = max(now.Sub(end).Milliseconds(), 0)
	return l
}

// rateOf counts the runs with an outcome over Window, and the successes among them:
// from the per-day counters where the backend keeps them (so the rate covers every run
// of the days, not only the entries kept), else from the entries. A run still running
// has no outcome yet.
func rateOf(st lockrun.KeyState, now time.Time) (runs, ok int, from string) {
	if st.Days != nil {
		first := now.UTC().Truncate(24 * time.Hour).Add(-6 * 24 * time.Hour)
		for _, d := range st.Days {
			if !d.Day.Before(first) {
				runs += d.Runs
				ok += d.Succeeded
			}
		}
		for _, e := range st.Recent {
			if e.Status == runstatus.Running && !e.Started().Before(first) {
				runs--
			}
		}
		return max(runs, 0), ok, "counters"
	}
	since := now.Add(-Window)
	for _, e := range st.Recent {
		if e.Status == runstatus.Running || e.Status == lockrun.NeverFiredStatus || e.Status == runstatus.Suspended ||
			e.Status == runstatus.Skipped || e.Started().Before(since) {
			continue
		}
		runs++
		if e.Status == runstatus.Succeeded {
			ok++
		}
	}
	return runs, ok, "entries"
}

// View says how the table is laid out.
type View struct {
	Width int  // the terminal's columns (tty.Columns); 0 = never cut
	UTC   bool // times in UTC instead of the local zone
	Now   time.Time
}

// WriteJSON prints one JSON object per job and line.
func WriteJSON(w io.Writer, jobs []Job) error {
	for _, j := range jobs {
		if err := runview.WriteJSONLine(w, j); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable prints the jobs as a table: KEY, SCHEDULE, LAST, NEXT, NOW, 7D; text that
// came from other hosts (node names, keys) is escaped, and SCHEDULE, LAST and NOW are
// cut to v.Width.
func WriteTable(w io.Writer, jobs []Job, v View) error {
	now := v.Now
	if now.IsZero() {
		now = time.Now()
	}
	loc := time.Local
	if v.UTC {
		loc = time.UTC
	}
	at := func(t time.Time) string {
		t = t.In(loc)
		if y, m, d := t.Date(); func() bool { ny, nm, nd := now.In(loc).Date(); return y == ny && m == nm && d == nd }() {
			return t.Format("15:04")
		}
		return t.Format("01-02 15:04")
	}
	rows := [][]string{{"KEY", "SCHEDULE", "LAST", "NEXT", "NOW", "7D"}}
	for _, j := range jobs {
		sched, last, next, nowCell, rate := "-", "-", "-", "-", "-"
		if j.Schedule != "" {
			sched = tty.Escape(strings.TrimSpace(j.Schedule + " " + j.Zone))
		}
		if l := j.Last; l != nil {
			when := l.StartedAt
			if l.ScheduledFor != nil {
				when = *l.ScheduledFor
			}
			last = fmt.Sprintf("%s %s %s, %s ago", at(when), tty.Escape(l.Node), l.Status, Age(time.Duration(l.AgoMS)*time.Millisecond))
		}
		if j.Next != nil {
			next = fmt.Sprintf("%s (in %s)", at(*j.Next), Age(time.Duration(*j.NextInMS)*time.Millisecond))
		}
		switch {
		case j.Suspended != nil:
			nowCell = "suspended by " + tty.Escape(j.Suspended.By)
			if u := j.Suspended.Until; u != nil {
				nowCell += " until " + at(*u)
			}
			if j.Suspended.Reason != "" {
				nowCell += ": " + tty.Escape(j.Suspended.Reason)
			}
		case j.Running != nil:
			nowCell = fmt.Sprintf("running on %s since %s (%s)", tty.Escape(j.Running.Node), at(j.Running.Since), Age(time.Duration(j.Running.ForMS)*time.Millisecond))
			if j.Standbys > 0 {
				nowCell += fmt.Sprintf(", %d standby", j.Standbys)
				if j.Standbys > 1 {
					nowCell += "s"
				}
			}
		}
		if j.Rate != nil {
			rate = strconv.FormatFloat(*j.Rate*100, 'f', 0, 64) + "% of " + strconv.Itoa(j.Runs7d)
		}
		rows = append(rows, []string{tty.Escape(j.Key), sched, last, next, nowCell, rate})
	}
	_, err := io.WriteString(w, table.Format(rows, table.Options{Right: map[int]bool{5: true}, Width: v.Width, Cut: []int{1, 2, 4}}))
	return err
}

// Age is d for people, in its two largest units: "42s", "12m", "3h05m", "2d3h".
func Age(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}
