package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"cronlock/check"
	"cronlock/history"
	"cronlock/jobrun"
	"cronlock/lockrun"
	"cronlock/lockrun/local"
	"cronlock/runstatus"
	"cronlock/schedule"
)

// checkOptions are the settings of `cronlock check`.
type checkOptions struct {
	backendOptions
	Key      string
	Schedule string // --schedule; "" = the one the tick record names
	TZ       string // --tz / CRONLOCK_TZ: the zone of --schedule, as run reads it
	MaxAge   time.Duration
	Grace    time.Duration
	History  string // the history file, resolved; "" = off
	ThisNode string
	JSON     bool

	Now            time.Time
	LogFormat      string
	Stdout, Stderr io.Writer
}

// checkTwins maps check's own flags to their environment/config names.
var checkTwins = twins("check")

// checkRecords is how many of the newest runs the verdict reads: enough for the usual
// duration (p95 of the newest 100 successes) of a job that fails now and then.
const checkRecords = 500

func newCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &checkOptions{Grace: 5 * time.Minute, Stdout: stdout, Stderr: stderr}
	var flagPath string
	c := &cobra.Command{
		Use:   "check --key KEY [--schedule EXPR [--tz ZONE]] [--max-age D] [--grace D] [--history FILE] [--json]",
		Short: "Dead-man's switch for monitoring: did the job's last tick succeed?",
		Long: `Check that a job ran and succeeded when it should have, as a monitoring plugin
(Nagios, Icinga, Sensu, Zabbix): one line on stdout, and the exit code 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN (bad flags and an unreachable backend included).

The schedule is --schedule, else the one the key's last --schedule run recorded. The
newest tick due before now - --grace must have a successful run (or one in progress,
within twice its usual p95); without a schedule, --max-age says how old the last
success may be. The newest run whose job started must not have failed.

On the local backend the runs come from the history (--history FILE reads a copy).`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return checkUnknown(o, fmt.Errorf("check takes no arguments, got %q", args[0]))
			}
			return nil
		},
		// Unlike the other commands, every failure is the plugin's UNKNOWN (exit 3) with
		// the status line on stdout, where the monitoring system reads it.
		PersistentPreRunE: func(c *cobra.Command, args []string) error {
			if err := resolveLogFormat(c); err != nil {
				return checkUnknown(o, err)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.setUp(c, &flagPath); err != nil {
				return checkUnknown(o, err)
			}
			return checkRun(o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Key, "key", "k", "", "the job's lock key (required)")
	f.StringVar(&o.Schedule, "schedule", "", "the job's crontab schedule (default: the one its last --schedule run recorded)")
	f.StringVar(&o.TZ, "tz", "", "zone of --schedule (env CRONLOCK_TZ; default the zone of /etc/localtime, as cron uses; never $TZ)")
	f.Var(durationValue{d: &o.MaxAge}, "max-age", "CRITICAL when the last success is older than this (needed without a schedule)")
	f.Var(durationValue{d: &o.Grace}, "grace", "how long after its tick a run may take to succeed")
	f.StringVar(&flagPath, "history", "", "SQLite history file to read (env CRONLOCK_HISTORY; default per user)")
	f.BoolVar(&o.JSON, "json", false, "one JSON object instead of the status line")
	o.backendOptions.addFlags(f)
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return checkUnknown(o, err) })
	return c
}

// setUp resolves the settings of check; its errors become UNKNOWN.
func (o *checkOptions) setUp(c *cobra.Command, flagPath *string) error {
	o.Now = jobrun.Now()
	if o.Key == "" {
		return errors.New("--key is required")
	}
	if err := lockrun.ValidKey(o.Key); err != nil {
		return fmt.Errorf("--key %q: %v", o.Key, err)
	}
	if o.Grace < 0 || o.MaxAge < 0 {
		return errors.New("--grace and --max-age cannot be negative")
	}
	if err := o.load(c); err != nil {
		return err
	}
	s, path, err := historySettings(c, flagPath)
	if err != nil {
		return err
	}
	// The runs read --schedule in CRONLOCK_TZ when it is set (the config file often sets
	// it for a whole machine); a check reading it in /etc/localtime would judge another
	// tick and cry CRITICAL over runs that were on time.
	if err := s.apply(c.Flags(), checkTwins); err != nil {
		return err
	}
	if c.Flags().Changed("tz") && o.Schedule == "" {
		return errors.New("--tz works only with --schedule (a recorded schedule keeps the zone its runs used)")
	}
	o.History, o.ThisNode, o.LogFormat = path, s.thisNode(), logFormatOf(c)
	return nil
}

// checkUnknown prints err as the plugin's UNKNOWN line and ends with exit 3.
func checkUnknown(o *checkOptions, err error) error {
	msg := err.Error()
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == check.ExitCode(check.Unknown) {
		return err // already said
	}
	key := o.Key
	if lockrun.ValidKey(key) != nil {
		key = ""
	}
	return showCheck(o, check.UnknownResult(key, msg))
}

// showCheck prints the verdict and returns its exit code.
func showCheck(o *checkOptions, r check.Result) error {
	if o.JSON {
		b, err := json.Marshal(checkJSONOf(r))
		if err != nil {
			return err
		}
		fmt.Fprintln(o.Stdout, string(b))
	} else {
		fmt.Fprintln(o.Stdout, r.Line())
	}
	if code := check.ExitCode(r.State); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// checkJSON is check's --json object.
type checkJSON struct {
	State       string     `json:"state"`
	ExitCode    int        `json:"exit_code"`
	Key         string     `json:"key"`
	Summary     string     `json:"summary"`
	Reasons     []string   `json:"reasons"`
	Due         *time.Time `json:"due"`          // null without a schedule
	LastSuccess *time.Time `json:"last_success"` // null when none is recorded
	AgeS        *int64     `json:"age_s"`        // null with last_success
	Failures    int        `json:"failures"`
	Perfdata    string     `json:"perfdata"`
	Line        string     `json:"line"`
}

func checkJSONOf(r check.Result) checkJSON {
	j := checkJSON{State: r.State.String(), ExitCode: check.ExitCode(r.State), Key: r.Key,
		Summary: r.Summary(), Reasons: r.Reasons, Failures: r.Failures, Line: r.Line()}
	if j.Reasons == nil {
		j.Reasons = []string{}
	}
	if !r.Due.IsZero() {
		d := r.Due.UTC()
		j.Due = &d
	}
	if !r.LastSuccess.IsZero() {
		t, age := r.LastSuccess.UTC(), int64(r.Age.Seconds())
		j.LastSuccess, j.AgeS = &t, &age
	}
	for i, p := range r.Perf {
		if i > 0 {
			j.Perfdata += " "
		}
		j.Perfdata += p.String()
	}
	return j
}

// checkRun gathers the key's runs and schedule, and shows the verdict.
func checkRun(o *checkOptions) error {
	in := check.Input{Key: o.Key, MaxAge: o.MaxAge, Grace: o.Grace, Now: o.Now}
	var recorded *schedule.Schedule
	var tr *lockrun.TickRecord
	var err error
	if o.Backend == "local" {
		if tr, err = o.localTick(); err == nil {
			in.Runs, err = o.localRuns()
		}
	} else {
		var locker lockrun.Locker
		if locker, err = o.open(); err != nil {
			return checkUnknown(o, err)
		}
		defer locker.Close()
		if l, ok := locker.(lockrun.FleetStore); ok {
			// The fleet's view: every host's runs from the fleet's record, from any host.
			ctx := context.Background()
			if tr, err = l.TickRecord(ctx, o.Key); err == nil {
				in.Runs, err = fleetRuns(ctx, l, o.Key)
			}
		}
	}
	if err != nil {
		return checkUnknown(o, err)
	}
	if tr != nil {
		in.Seen = true
		if tr.Expr != "" {
			if recorded, err = schedule.Parse(tr.Expr, tr.TZ); err != nil {
				return checkUnknown(o, fmt.Errorf("the tick record's schedule %q (%s): %v; give --schedule", tr.Expr, tr.TZ, err))
			}
		}
	}
	in.Schedule = recorded
	if o.Schedule != "" {
		if in.Schedule, err = schedule.Parse(o.Schedule, o.TZ); err != nil {
			return checkUnknown(o, fmt.Errorf("--schedule: %v", err))
		}
	}
	return showCheck(o, check.Evaluate(in))
}

// localTick reads the key's tick record from the lock folder, as a reader: a monitoring
// user may run check against root's folder, which it must neither create nor own. A
// record it may not read matters only when it is the schedule: --schedule wins anyway.
func (o *checkOptions) localTick() (*lockrun.TickRecord, error) {
	dir := o.LockDir
	if dir == "" {
		dir = local.DefaultDir()
	}
	tr, err := local.ReadTickRecord(dir, o.Key)
	if err != nil {
		if o.Schedule != "" {
			return nil, nil
		}
		return nil, fmt.Errorf("cannot read the schedule its runs recorded (%v); give --schedule EXPR (the crontab schedule), or let this user read %s", err, dir)
	}
	return tr, nil
}

// localRuns reads the key's newest runs from the local history, and its newest success
// when that is older than them.
func (o *checkOptions) localRuns() ([]check.Run, error) {
	if o.History == "" {
		return nil, errors.New(historyOff + "; give --history FILE")
	}
	if noHistory(o.History) {
		return nil, nil
	}
	s, err := openReaped(o.History, o.ThisNode, o.Stderr, o.LogFormat, history.OpenRead)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rows, err := s.List(history.Filter{Key: o.Key, Limit: checkRecords})
	if err != nil {
		return nil, err
	}
	if len(rows) == checkRecords {
		ok, err := s.List(history.Filter{Key: o.Key, Status: runstatus.Succeeded, Limit: 1})
		if err != nil {
			return nil, err
		}
		rows = append(rows, ok...)
	}
	runs := make([]check.Run, 0, len(rows))
	for _, r := range rows {
		if r.Status == runstatus.Retried {
			continue // a run counts once, by its last try
		}
		runs = append(runs, check.Run{Status: r.Status, Started: r.StartedAt, Finished: r.FinishedAt,
			ScheduledFor: r.ScheduledFor, Node: r.Node})
	}
	return runs, nil
}

// fleetRuns gathers the fleet's runs of key for the verdict: the newest entries of its
// record (with the lock's holder as running, and DUPLICATE marks).
func fleetRuns(ctx context.Context, l lockrun.FleetStore, key string) ([]check.Run, error) {
	entries, err := l.Fleet(ctx, key, checkRecords)
	if err != nil {
		return nil, err
	}
	runs := make([]check.Run, 0, len(entries))
	for _, e := range entries {
		if e.Status == lockrun.NeverFiredStatus {
			continue // ticks nobody claimed: not a run, and not a failure of one
		}
		r := check.Run{Status: e.Status, Started: e.Started(), ScheduledFor: e.ScheduledFor(),
			Node: e.Node, Duplicate: e.Duplicate}
		if e.Status != runstatus.Running && e.Status != runstatus.Abandoned {
			r.Finished = e.Finished()
		}
		runs = append(runs, r)
	}
	return runs, nil
}
