package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
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
	// MaxSuspend: a suspension older than this is WARNING (--max-suspend).
	MaxSuspend time.Duration
	GraceSet   bool   // --grace was given; else check.DefaultGrace
	History    string // the history file, resolved; "" = off
	ThisNode   string
	JSON       bool
	Verbose    int           // -v: the long output (every reason on a line, and the facts)
	Version    bool          // -V: print the version, as the plugin guidelines reserve it
	Timeout    time.Duration // -t: the whole check's bound, then UNKNOWN

	Now            time.Time
	LogFormat      string
	Stdout, Stderr io.Writer
}

// checkTwins maps check's own flags to their environment/config names.
var checkTwins = twins("check")

// defaultCheckTimeout bounds a check that gives no -t: the plugins' usual 10 s, well
// inside Nagios's own service_check_timeout (60 s), so that a slow backend is an UNKNOWN
// that says so, not a plugin killed by its runner.
const defaultCheckTimeout = 10 * time.Second

// checkRecords is how many of the newest runs the verdict reads: enough for the usual
// duration (p95 of the newest 100 successes) of a job that fails now and then.
const checkRecords = 500

func newCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &checkOptions{Grace: check.MinGrace, Timeout: defaultCheckTimeout, Stdout: stdout, Stderr: stderr}
	var flagPath string
	c := &cobra.Command{
		Use:   "check --key KEY [--schedule EXPR [--tz ZONE]] [--max-age D] [--grace D] [--history FILE] [-t D] [-v] [--json]",
		Short: "Dead-man's switch for monitoring: did the job's last tick succeed?",
		Long: `Check that a job ran and succeeded when it should have, as a monitoring plugin
(Nagios, Icinga, Sensu, Zabbix): one line on stdout, and the exit code 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN (bad flags and an unreachable backend included).

The schedule is --schedule, else the one the key's last --schedule run recorded. The
newest tick due before now - --grace must have a successful run (or one in progress,
within twice its usual p95, or until the next tick while fewer than 5 successes tell
what usual is); without a schedule, --max-age says how old the last
success may be. The newest run whose job started must not have failed (a run of the
due tick in progress puts what ended before it behind it).

Several reasons are joined by " -- " (Nagios turns ";" into ":"). -v adds the long
output: every reason on a line of its own, and what the verdict saw. -t D bounds the
whole check (default 10s; a bare number is seconds): past it, UNKNOWN. -V prints the
version and ends UNKNOWN (3), as the Monitoring Plugins do, so that a check command
mistakenly left with -V never shows OK.

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
			if o.Version {
				fmt.Fprintln(o.Stdout, versionString())
				return &ExitError{Code: check.ExitCode(check.Unknown)}
			}
			return showCheck(o, o.bounded(func(ctx context.Context) check.Result {
				if err := o.setUp(c, &flagPath); err != nil {
					return unknownOf(o, err)
				}
				return checkVerdict(ctx, o)
			}))
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Key, "key", "k", "", "the job's lock key (required)")
	f.StringVar(&o.Schedule, "schedule", "", "the job's crontab schedule (default: the one its last --schedule run recorded)")
	f.StringVar(&o.TZ, "tz", "", "zone of --schedule (env CRONLOCK_TZ; default the zone of /etc/localtime, as cron uses; never $TZ)")
	f.Var(durationValue{d: &o.MaxAge}, "max-age", "CRITICAL when the last success is older than this (needed without a schedule)")
	o.MaxSuspend = 7 * 24 * time.Hour
	f.Var(ageValue{d: &o.MaxSuspend}, "max-suspend", "WARNING when the key has been suspended longer than this (cronlock suspend)")
	f.Var(durationValue{d: &o.Grace}, "grace", "how long after its tick a run may take to succeed (default: the larger of 5m and the --jitter + --start-deadline its runs recorded)")
	f.StringVar(&flagPath, "history", "", "SQLite history file to read (env CRONLOCK_HISTORY; default per user)")
	f.BoolVar(&o.JSON, "json", false, "one JSON object instead of the status line")
	f.CountVarP(&o.Verbose, "verbose", "v", "long output: every reason on a line of its own, and the facts behind the verdict")
	f.BoolVarP(&o.Version, "version", "V", false, "print cronlock's version and exit 3 (UNKNOWN), as monitoring plugins do")
	f.VarP(pluginTimeout{d: &o.Timeout}, "timeout", "t", "bound of the whole check, then UNKNOWN: a duration, or seconds as a bare number (plugin style)")
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
	o.GraceSet = c.Flags().Changed("grace")
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

// pluginTimeout is -t: a duration, or a bare number of seconds as monitoring plugins
// take it (check_http -t 10); more than 0.
type pluginTimeout struct{ d *time.Duration }

func (v pluginTimeout) String() string { return v.d.String() }
func (v pluginTimeout) Type() string   { return "duration" }
func (v pluginTimeout) Set(s string) error {
	if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32); err == nil {
		if n == 0 {
			return errors.New("must be more than 0")
		}
		*v.d = time.Duration(n) * time.Second
		return nil
	}
	return durationValue{d: v.d, positive: true}.Set(s)
}

// bounded returns verdict's result, or UNKNOWN once the -t bound has passed: a backend
// that does not answer must not hold the plugin until its runner kills it (Nagios then
// shows a CRITICAL "timed out" that says nothing of why). verdict gets the bound as its
// context's deadline; a verdict still running past it is left behind (the process ends).
func (o *checkOptions) bounded(verdict func(ctx context.Context) check.Result) check.Result {
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	done := make(chan check.Result, 1)
	go func() { done <- verdict(ctx) }()
	select {
	case r := <-done:
		// A verdict cut short by the deadline is an error of the backend's that would
		// blame its own time-out: say which bound ended it. The clock decides, not
		// ctx.Err(): a socket deadline set from ctx can fire before ctx's own timer.
		if dl, _ := ctx.Deadline(); time.Now().Before(dl) {
			return r
		}
	case <-ctx.Done():
	}
	return check.UnknownResult(validKeyOr(o.Key), fmt.Sprintf("no verdict within -t/--timeout %s: the backend or the history did not answer in time, look at them or give a longer -t", o.Timeout))
}

// checkUnknown prints err as the plugin's UNKNOWN line and ends with exit 3.
func checkUnknown(o *checkOptions, err error) error {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == check.ExitCode(check.Unknown) {
		return err // already said
	}
	return showCheck(o, unknownOf(o, err))
}

// unknownOf is err as the plugin's UNKNOWN verdict.
func unknownOf(o *checkOptions, err error) check.Result {
	return check.UnknownResult(validKeyOr(o.Key), err.Error())
}

// validKeyOr is key when it is a valid key, else "" (a bad one is the reason, not the name).
func validKeyOr(key string) string {
	if lockrun.ValidKey(key) != nil {
		return ""
	}
	return key
}

// showCheck prints the verdict and returns its exit code.
func showCheck(o *checkOptions, r check.Result) error {
	if o.JSON {
		b, err := r.JSON()
		if err != nil {
			return err
		}
		fmt.Fprintln(o.Stdout, string(b))
	} else {
		var b strings.Builder
		b.WriteString(r.Line() + "\n")
		if o.Verbose > 0 {
			for _, l := range r.Long() {
				b.WriteString(l + "\n")
			}
		}
		io.WriteString(o.Stdout, b.String())
	}
	if code := check.ExitCode(r.State); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// checkVerdict gathers the key's runs and schedule, and judges them; every failure to
// gather them is UNKNOWN.
func checkVerdict(ctx context.Context, o *checkOptions) check.Result {
	in := check.Input{Key: o.Key, MaxAge: o.MaxAge, Grace: o.Grace, Now: o.Now, MaxSuspend: o.MaxSuspend}
	var susp *lockrun.Suspension
	var recorded *schedule.Schedule
	var tr *lockrun.TickRecord
	var err error
	if o.Backend == "local" {
		if tr, err = o.localTick(); err == nil {
			in.Runs, err = o.localRuns()
		}
		if err == nil {
			// A monitoring user that may not look into the lock folder (root's is 0700)
			// cannot see a suspension there: it judges the runs alone, as with --schedule.
			if susp, err = local.ReadSuspension(o.lockDir(), o.Key); errors.Is(err, fs.ErrPermission) {
				err = nil
			}
		}
	} else {
		var locker lockrun.Locker
		if locker, err = o.open(); err != nil {
			return unknownOf(o, err)
		}
		defer locker.Close()
		if l, ok := locker.(lockrun.FleetStore); ok {
			// The fleet's view: every host's runs from the fleet's record, from any host.
			if tr, err = l.TickRecord(ctx, o.Key); err == nil {
				in.Runs, err = fleetRuns(ctx, l, o.Key)
			}
		}
		if err == nil {
			if susp, err = lockrun.ReadSuspensionOf(ctx, locker, o.Key); errors.Is(err, lockrun.ErrNoSuspend) {
				err = nil
			}
		}
	}
	if err != nil {
		return unknownOf(o, err)
	}
	if susp != nil {
		in.Suspension = &check.Suspension{By: susp.By, Since: susp.Since, Until: susp.Until, Reason: susp.Reason}
	}
	if tr != nil {
		in.Seen = true
		if tr.Expr != "" {
			if recorded, err = schedule.Parse(tr.Expr, tr.TZ); err != nil {
				return unknownOf(o, fmt.Errorf("the tick record's schedule %q (%s): %v, give --schedule", tr.Expr, tr.TZ, err))
			}
		}
	}
	if !o.GraceSet {
		in.Grace = check.DefaultGrace(in.Runs)
	}
	in.Schedule = recorded
	if o.Schedule != "" {
		if in.Schedule, err = schedule.Parse(o.Schedule, o.TZ); err != nil {
			return unknownOf(o, fmt.Errorf("--schedule: %v", err))
		}
	}
	return check.Evaluate(in)
}

// localTick reads the key's tick record from the lock folder, as a reader: a monitoring
// user may run check against root's folder, which it must neither create nor own. A
// record it may not read matters only when it is the schedule: --schedule wins anyway.
func (o *checkOptions) localTick() (*lockrun.TickRecord, error) {
	dir := o.lockDir()
	tr, err := local.ReadTickRecord(dir, o.Key)
	if err != nil {
		if o.Schedule != "" {
			return nil, nil
		}
		return nil, fmt.Errorf("cannot read the schedule its runs recorded (%v); give --schedule EXPR (the crontab schedule), or let this user read %s", err, dir)
	}
	return tr, nil
}

// lockDir is the local backend's folder, read as it is (check never creates it).
func (o *checkOptions) lockDir() string {
	if o.LockDir == "" {
		return local.DefaultDir()
	}
	return o.LockDir
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
		r := check.Run{Status: e.Status, Started: e.Started(), ScheduledFor: e.ScheduledFor(),
			Duration: time.Duration(e.DurationMS) * time.Millisecond, Node: e.Node, Duplicate: e.Duplicate,
			Grace: time.Duration(e.GraceMS) * time.Millisecond,
			Flip:  e.Flip, ScheduleWas: e.ScheduleWas, DataLoss: e.DataLoss}
		if e.Status != runstatus.Running && e.Status != runstatus.Abandoned {
			r.Finished = e.Finished()
		}
		if e.Status == lockrun.NeverFiredStatus {
			r.Status, r.NeverFired = check.NeverFiredStatus, e.NeverFired
			r.NeverFiredFrom, r.NeverFiredTo = time.UnixMicro(e.NeverFiredFrom).UTC(), time.UnixMicro(e.NeverFiredTo).UTC()
			if e.NeverFiredFrom <= 0 {
				r.NeverFiredFrom = time.Time{}
			}
			if e.NeverFiredTo <= 0 {
				r.NeverFiredTo = time.Time{}
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}
