package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"cronlock/jobrun"
	"cronlock/lockrun"
	"cronlock/schedule"
	"cronlock/tty"
)

// runOptions are the settings of one `cronlock run`: the flags fill in the run's own
// options (job), and those that only choose among them.
type runOptions struct {
	backendOptions
	job        jobrun.Options
	OnLockLost string // kill or continue
	Schedule   string // --schedule EXPR; "" = none
	TZ         string // --tz / CRONLOCK_TZ
	Output     string // --output: always or on-failure
	Ping       string // --ping / CRONLOCK_PING_URL as given, {key} not yet filled in
	Standby    string // --standby: "" (none), "lost" (given alone) or "failed"

	captureSet bool // --capture was given: a terminal does not change it
}

// runTwins maps run's own flags to their environment/config names.
var runTwins = twins("run")

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	c, _ := newRunCommand(stdout, stderr)
	groupFlags(c, runFlagGroups)
	return c
}

// newRunCommand is run's command and the options its flags fill (for config check).
func newRunCommand(stdout, stderr io.Writer) (*cobra.Command, *runOptions) {
	o := &runOptions{OnLockLost: "kill", job: jobrun.Options{TTL: 60 * time.Second,
		Grace: 10 * time.Second, RetryDelay: 10 * time.Second, StaleAfter: 24 * time.Hour, Capture: 64 << 10, MaxSkew: 30 * time.Second,
		Standbys: 2, MaxAttempts: 3}}
	j := &o.job
	j.Version = shortVersion()
	c := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARG...]",
		Short: "Run COMMAND while holding the lock KEY",
		Long: `Run COMMAND while holding the lock KEY. COMMAND is executed directly, without a
shell: write sh -c '...' to ask for one. When the lock is held elsewhere the run is
skipped (exit --conflict-exit-code, 0 by default) and recorded in the history.`,
		Example: `  cronlock run --key daily-billing --ttl 60s -- /opt/jobs/billing.sh
  cronlock run -k report --timeout 30m -- sh -c 'make-report | mail -s report ops'`,
		Args: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() < 0 {
				if len(args) == 0 {
					return &usageError{errors.New("no command given; write it after --, e.g. cronlock run --key K -- /path/to/job")}
				}
				return &usageError{fmt.Errorf("put -- before the command (%q), so that its flags are not taken for cronlock's", args[0])}
			}
			if c.ArgsLenAtDash() > 0 {
				return &usageError{fmt.Errorf("unexpected %q before --; the command goes after --", args[0])}
			}
			if len(args) == 0 {
				return &usageError{errors.New("no command after --")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			s, err := loadSettings()
			if err != nil {
				return exitf(ExitFailed, "%v", err)
			}
			if err := o.resolve(c, s); err != nil {
				return exitf(ExitFailed, "%v", err)
			}
			j.Retention, j.RetentionErr = parseRetention(s.vals[retentionName], s.source[retentionName])
			j.Command = args
			j.LogFormat = logFormatOf(c)
			j.Stdin, j.Stdout, j.Stderr = os.Stdin, fileOr(stdout, os.Stdout), fileOr(stderr, os.Stderr)
			if !o.captureSet && tty.IsTerminal(j.Stdout) {
				j.Capture = 0 // on a terminal the job sees the terminal itself
			}
			o.resolveOutput(c.Flags())
			j.ContinueOnLoss = o.OnLockLost == "continue"
			j.Open, j.OpTimeout, j.Warnings, j.StampDir = o.open, o.RedisTimeout, o.warnings(), o.LockDir
			if code := jobrun.Run(j); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
	c.SetOut(stdout)
	c.SetErr(stderr)
	f := c.Flags()
	f.SortFlags = false
	f.StringVarP(&j.Key, "key", "k", "", "lock name: 1–200 characters of A-Z a-z 0-9 . _ - : / @ (required)")
	f.Var(durationValue{d: &j.TTL, positive: true}, "ttl", "lease length, renewed every ttl/3 (env CRONLOCK_TTL)")
	o.backendOptions.addFlags(f)
	f.Var(yesNoValue{&o.AllowEviction}, "allow-eviction", "take the lock even on a Redis that can evict keys (maxmemory with a policy but noeviction) (env CRONLOCK_ALLOW_EVICTION)")
	f.Lookup("allow-eviction").NoOptDefVal = "yes"
	addMinReplicasFlag(f, &o.backendOptions)
	f.Var(durationValue{d: &j.Wait}, "wait", "how long to wait for a held lock; 0 skips at once")
	f.Var(durationValue{d: &j.Jitter}, "jitter", "sleep a random time in [0, this) before asking for the lock, to spread a fleet's runs (env CRONLOCK_JITTER); 0 = none")
	f.Var(durationValue{d: &j.Timeout}, "timeout", "longest run time, of all tries and the delays between them; then stop the job and exit 124; 0 = none")
	f.Var(durationValue{d: &j.HeartbeatTimeout}, "heartbeat-timeout", "stop a job that saved no checkpoint (cronlock checkpoint save) for this long as hung: exit 124; 0 = none")
	f.IntVar(&j.Retries, "retries", 0, "try a job that fails by its own exit this many more times, holding the lock throughout")
	f.Var(durationValue{d: &j.RetryDelay}, "retry-delay", "delay before the second try, doubled for each try after (capped at 10m), of which a random part is taken")
	f.Var(exitCodesValue{&j.RetryOn}, "retry-on", "comma-separated exit codes to try again, e.g. 75,111 (default any non-zero exit of the job)")
	f.Var(durationValue{d: &j.Grace}, "grace", "time between SIGTERM and SIGKILL when cronlock stops the job")
	f.Var(durationValue{d: &j.MinHold}, "min-hold", "keep the lock at least this long after acquiring it (--schedule is the better cure for hosts whose cron fires seconds apart)")
	f.StringVar(&o.Schedule, "schedule", "", "the crontab schedule of this line (5 fields or @daily…): the job runs at most once per tick across the fleet")
	f.StringVar(&o.TZ, "tz", "", "zone of --schedule (env CRONLOCK_TZ; default the zone of /etc/localtime, as cron uses; never $TZ)")
	f.Var(durationValue{d: &j.MaxSkew}, "max-skew", "with --schedule on Redis, refuse to run when this host's clock is this far from Redis's (env CRONLOCK_MAX_SKEW); 0 = no check")
	f.Var(durationValue{d: &j.StartDeadline}, "start-deadline", "with --schedule, a run that would start more than this after its tick is missed, not run; 0 = none")
	f.StringVar(&o.Standby, "standby", "", "with --schedule, wait beside a run that holds this tick and take the tick over if that run is lost (its lease ended with no release); =failed also takes over a tick whose run failed")
	f.Lookup("standby").NoOptDefVal = "lost"
	f.IntVar(&j.Standbys, "standbys", j.Standbys, "at most this many standbys wait per tick and key; later runs skip")
	f.IntVar(&j.MaxAttempts, "max-attempts", j.MaxAttempts, "with --standby, at most this many attempts of one tick (the first run and the takeovers)")
	f.StringVar(&o.OnLockLost, "on-lock-lost", o.OnLockLost, "kill: stop the job and exit 125; continue: warn and let it finish")
	f.IntVar(&j.ConflictExitCode, "conflict-exit-code", 0, "exit code when the lock is held elsewhere")
	f.Var(durationValue{d: &j.StaleAfter}, "stale-after", "warn on every skip once the holder has held the lock this long; 0 = never")
	f.StringVar(&j.History, "history", "", "SQLite history file, or off (env CRONLOCK_HISTORY)")
	f.Var(sizeValue{n: &j.Capture}, "capture", "bytes of output tail kept with the run; 0 = none")
	o.addOutputFlags(f)
	f.StringVar(&j.Node, "node", "", "this machine's name in locks and history (env CRONLOCK_NODE; default the hostname)")
	f.StringVar(&j.MetricsDir, "metrics-dir", "", "after each run, write `DIR`/cronlock_KEY.prom for node_exporter's textfile collector (env CRONLOCK_METRICS_DIR)")
	f.StringVar(&o.Ping, "ping", "", "Healthchecks ping `URL`: start, then success, /EXIT or /fail, with the run id (env CRONLOCK_PING_URL, which must hold {key})")
	f.BoolVarP(&j.Quiet, "quiet", "q", false, "no cronlock messages on stderr but errors")
	f.BoolVarP(&j.Verbose, "verbose", "v", false, "also report skipped runs and each lock step on stderr")
	return c, o
}

// fileOr returns w as an *os.File when it is one, else def: the child needs real files.
func fileOr(w io.Writer, def *os.File) *os.File {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return def
}

// resolve applies settings and checks every flag, so bad input fails before any work.
func (o *runOptions) resolve(c *cobra.Command, s *settings) error {
	f, j := c.Flags(), &o.job
	if err := s.apply(f, runTwins); err != nil {
		return err
	}
	if err := o.backendOptions.resolve(f, s); err != nil {
		return err
	}
	if isOff(j.History) {
		j.History = "off" // jobrun's word for it
	} else if err := s.checkAbsPath(f, "history", "CRONLOCK_HISTORY", j.History, "/var/lib/cronlock/history.db, or off"); err != nil {
		return err
	}
	if !f.Changed("key") {
		return errors.New("--key is required: the name of the lock, e.g. --key daily-billing")
	}
	if err := lockrun.ValidKey(j.Key); err != nil {
		return fmt.Errorf("--key %q: %v", j.Key, err)
	}
	if err := o.resolvePing(f, s); err != nil {
		return err
	}
	if j.TTL < time.Second {
		return fmt.Errorf("--ttl %v is too short; use 1s or more (the lease must outlast a Redis round trip)", j.TTL)
	}
	switch o.OnLockLost {
	case "kill", "continue":
	default:
		return fmt.Errorf("--on-lock-lost %q: use kill or continue", o.OnLockLost)
	}
	if j.ConflictExitCode < 0 || j.ConflictExitCode > 255 {
		return fmt.Errorf("--conflict-exit-code %d: use 0 to 255", j.ConflictExitCode)
	}
	if j.Quiet && j.Verbose {
		return errors.New("--quiet and --verbose contradict each other; give one")
	}
	if err := checkMetricsDir(j.MetricsDir); err != nil {
		return err
	}
	if err := o.resolveRetries(f); err != nil {
		return err
	}
	if err := o.resolveSchedule(f); err != nil {
		return err
	}
	if err := o.etcdSkew(f); err != nil {
		return err
	}
	if j.StartDeadline > 0 && j.Jitter >= j.StartDeadline {
		return fmt.Errorf("--jitter %v is not shorter than --start-deadline %v: runs would be missed by their own sleep; make the jitter shorter", j.Jitter, j.StartDeadline)
	}
	if j.Node == "" {
		j.Node, _ = os.Hostname()
		if j.Node == "" {
			j.Node = "localhost"
		}
	}
	o.captureSet = f.Changed("capture")
	return nil
}

// resolveRetries checks the retry flags. The delay and the codes mean nothing without
// --retries: given alone they are refused rather than ignored.
func (o *runOptions) resolveRetries(f *pflag.FlagSet) error {
	j := &o.job
	if j.Retries < 0 || j.Retries > maxRetries {
		return fmt.Errorf("--retries %d: use 0 to %d", j.Retries, maxRetries)
	}
	if j.Retries == 0 {
		for _, name := range []string{"retry-delay", "retry-on"} {
			if f.Changed(name) {
				return fmt.Errorf("--%s works only with --retries: give how many more tries a failing job gets, e.g. --retries 2", name)
			}
		}
	}
	return nil
}

// maxRetries bounds --retries: a number beyond it is a typo, not a plan.
const maxRetries = 100

// resolveSchedule parses --schedule in its zone. The tick flags mean nothing without it:
// given on the command line they are refused rather than ignored (their settings, which
// a whole machine shares, are).
func (o *runOptions) resolveSchedule(f *pflag.FlagSet) error {
	if !f.Changed("schedule") {
		for _, name := range []string{"tz", "max-skew", "start-deadline", "standby", "standbys", "max-attempts"} {
			if f.Changed(name) {
				return fmt.Errorf("--%s works only with --schedule: give the crontab schedule of this line, e.g. --schedule '0 9 * * *'", name)
			}
		}
		return nil
	}
	s, err := schedule.Parse(o.Schedule, o.TZ)
	if err != nil {
		return fmt.Errorf("--schedule %q: %w", o.Schedule, err)
	}
	o.job.Schedule = s
	return o.resolveStandby(f)
}

// resolveStandby checks --standby and its bounds (with --schedule given).
func (o *runOptions) resolveStandby(f *pflag.FlagSet) error {
	j := &o.job
	switch o.Standby {
	case "":
		if f.Changed("standby") {
			return errors.New("--standby= has no value: give --standby alone, or --standby=failed to take over failed ticks too (leave it out for no standby)")
		}
		for _, name := range []string{"standbys", "max-attempts"} {
			if f.Changed(name) {
				return fmt.Errorf("--%s works only with --standby", name)
			}
		}
	case "lost", "failed":
	default:
		return fmt.Errorf("--standby=%q: give --standby alone, or --standby=failed to take over failed ticks too", o.Standby)
	}
	if j.Standbys < 1 || j.Standbys > maxRetries {
		return fmt.Errorf("--standbys %d: use 1 to %d (leave --standby out for none)", j.Standbys, maxRetries)
	}
	if j.MaxAttempts < 1 || j.MaxAttempts > maxRetries {
		return fmt.Errorf("--max-attempts %d: use 1 to %d", j.MaxAttempts, maxRetries)
	}
	j.Standby = o.Standby
	return nil
}

// checkMetricsDir refuses a relative --metrics-dir: cron starts jobs in the home folder,
// a login shell wherever it is, and node_exporter reads one fixed folder.
func checkMetricsDir(dir string) error {
	if dir != "" && !filepath.IsAbs(dir) {
		return fmt.Errorf("--metrics-dir %q is not an absolute path; give node_exporter's textfile folder, e.g. /var/lib/node_exporter/textfile_collector", dir)
	}
	return nil
}
