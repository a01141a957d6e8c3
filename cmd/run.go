package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"cronlock/history"
	"cronlock/lockrun"
)

// runOptions are the settings of one `cronlock run`.
type runOptions struct {
	backendOptions
	Key              string
	TTL              time.Duration
	Wait             time.Duration
	Timeout          time.Duration
	Grace            time.Duration
	MinHold          time.Duration
	OnLockLost       string
	ConflictExitCode int
	StaleAfter       time.Duration
	History          string
	Capture          int64
	Node             string
	Quiet, Verbose   bool
	MetricsDir       string // "" = no metrics file (see package metrics)
	LogFormat        string // text or json (see logformat.go)
	Retention        time.Duration
	RetentionErr     error // a bad CRONLOCK_HISTORY_RETENTION: said after the job, which runs anyway
	Command          []string

	captureSet bool // --capture was given: a terminal does not change it

	Stdin          *os.File
	Stdout, Stderr *os.File
}

// runTwins maps run's own flags to their environment/config names.
var runTwins = map[string]string{
	"ttl":     "CRONLOCK_TTL",
	"history": "CRONLOCK_HISTORY",
	"node":    "CRONLOCK_NODE",

	"metrics-dir": "CRONLOCK_METRICS_DIR",
	"log-format":  "CRONLOCK_LOG_FORMAT", // root's flag, resolved here with run's other settings
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &runOptions{TTL: 60 * time.Second, Grace: 10 * time.Second, StaleAfter: 24 * time.Hour,
		Capture: 64 << 10, OnLockLost: "kill"}
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
				return exitf(ExitUsage, "%v", err)
			}
			if err := o.resolve(c, s); err != nil {
				return exitf(ExitUsage, "%v", err)
			}
			o.Retention, o.RetentionErr = parseRetention(s.vals[retentionName], s.source[retentionName])
			o.Command = args
			o.LogFormat = logFormatOf(c)
			o.Stdin, o.Stdout, o.Stderr = os.Stdin, fileOr(stdout, os.Stdout), fileOr(stderr, os.Stderr)
			code := runJob(o)
			if code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
	c.SetOut(stdout)
	c.SetErr(stderr)
	f := c.Flags()
	f.SortFlags = false
	f.StringVarP(&o.Key, "key", "k", "", "lock name: 1–200 characters of A-Z a-z 0-9 . _ - : / @ (required)")
	f.Var(durationValue{d: &o.TTL, positive: true}, "ttl", "lease length, renewed every ttl/3 (env CRONLOCK_TTL)")
	o.backendOptions.addFlags(f)
	f.Var(durationValue{d: &o.Wait}, "wait", "how long to wait for a held lock; 0 skips at once")
	f.Var(durationValue{d: &o.Timeout}, "timeout", "longest run time, then stop the job and exit 124; 0 = none")
	f.Var(durationValue{d: &o.Grace}, "grace", "time between SIGTERM and SIGKILL when cronlock stops the job")
	f.Var(durationValue{d: &o.MinHold}, "min-hold", "keep the lock at least this long after acquiring it (clock skew between hosts)")
	f.StringVar(&o.OnLockLost, "on-lock-lost", o.OnLockLost, "kill: stop the job and exit 125; continue: warn and let it finish")
	f.IntVar(&o.ConflictExitCode, "conflict-exit-code", 0, "exit code when the lock is held elsewhere")
	f.Var(durationValue{d: &o.StaleAfter}, "stale-after", "warn on every skip once the holder has held the lock this long; 0 = never")
	f.StringVar(&o.History, "history", "", "SQLite history file, or off (env CRONLOCK_HISTORY)")
	f.Var(sizeValue{n: &o.Capture}, "capture", "bytes of output tail kept with the run; 0 = none")
	f.StringVar(&o.Node, "node", "", "this machine's name in locks and history (env CRONLOCK_NODE; default the hostname)")
	f.StringVar(&o.MetricsDir, "metrics-dir", "", "after each run, write `DIR`/cronlock_KEY.prom for node_exporter's textfile collector (env CRONLOCK_METRICS_DIR)")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "no cronlock messages on stderr but errors")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "also report skipped runs and each lock step on stderr")
	return c
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
	f := c.Flags()
	if err := s.apply(f, runTwins); err != nil {
		return err
	}
	if err := o.backendOptions.resolve(f, s); err != nil {
		return err
	}
	if !f.Changed("key") {
		return errors.New("--key is required: the name of the lock, e.g. --key daily-billing")
	}
	if err := lockrun.ValidKey(o.Key); err != nil {
		return fmt.Errorf("--key %q: %v", o.Key, err)
	}
	if o.TTL < time.Second {
		return fmt.Errorf("--ttl %v is too short; use 1s or more (the lease must outlast a Redis round trip)", o.TTL)
	}
	switch o.OnLockLost {
	case "kill", "continue":
	default:
		return fmt.Errorf("--on-lock-lost %q: use kill or continue", o.OnLockLost)
	}
	if o.ConflictExitCode < 0 || o.ConflictExitCode > 255 {
		return fmt.Errorf("--conflict-exit-code %d: use 0 to 255", o.ConflictExitCode)
	}
	if o.Quiet && o.Verbose {
		return errors.New("--quiet and --verbose contradict each other; give one")
	}
	if err := checkMetricsDir(o.MetricsDir); err != nil {
		return err
	}
	if o.Node == "" {
		o.Node, _ = os.Hostname()
		if o.Node == "" {
			o.Node = "localhost"
		}
	}
	o.captureSet = f.Changed("capture")
	return nil
}

// runJob does one locked, supervised, recorded run and returns the exit code (SPEC §3).
func runJob(o *runOptions) int {
	r := &runner{o: o, started: time.Now()}
	code := r.run()
	r.recordMetrics(code) // the outcome is final here: lock released, row written
	return code
}

// runner carries one run's state between its steps.
type runner struct {
	o        *runOptions
	started  time.Time
	runID    string
	rec      *recorder     // nil when the history is off
	histPath string        // the history file rec writes to
	ended    chan struct{} // closed when the run's final row is queued (see recordStart)
	// startRowAfter is when the running row is due (time.After(startRowDelay) when nil);
	// called on the recorder's goroutine, once it is ready to write the row.
	startRowAfter func() <-chan time.Time
	row           *history.Run
	locker        lockrun.Locker
}

func (r *runner) run() int {
	o := r.o
	// Signals first: a stop signal that arrives while the lock is being taken must be
	// seen (status interrupted), not kill cronlock with the lock half taken.
	sig := lockrun.NotifySignals()
	// The guard is only prepared here; its process is forked when it is armed, just after
	// the child starts, so a skipped run costs no guard.
	guard, err := lockrun.StartGuard()
	if err != nil {
		r.verbosef("no guard process (%v): if cronlock is SIGKILLed, only the direct child is killed with it", err)
	}
	defer guard.Done()

	id, err := uuid.NewV7()
	if err != nil {
		r.errorf("cannot make a run id: %v", err)
		return ExitUsage
	}
	r.runID = id.String()
	for _, w := range o.warnings() {
		r.infof("%s", w)
	}
	r.row = &history.Run{ID: r.runID, Key: o.Key, Node: o.Node, PID: os.Getpid(),
		Command: o.Command, StartedAt: r.started, Attempt: 1}
	r.openHistory()

	locker, err := o.open()
	if err != nil {
		return r.fail(ExitUsage, "%v", err)
	}
	r.locker = locker
	defer locker.Close()
	r.row.Backend = locker.Describe()

	lease, code, done := r.acquire(sig)
	if done {
		return code
	}
	r.verbosef("acquired %s on %s (fencing token %d)", o.Key, r.row.Backend, lease.FencingToken())
	r.row.FencingToken = lease.FencingToken()
	r.row.Status = "running"
	r.recordStart()

	ctx, stopKeeper := context.WithCancel(context.Background())
	keeper := &lockrun.Keeper{Lease: lease, Interval: o.TTL / 3, Grace: o.Grace,
		OpTimeout: o.RedisTimeout,
		Warn: func(err error) {
			if o.Verbose { // on the keeper's goroutine: no status (see say)
				r.say(levelVerbose, false, fmt.Sprintf("renewing %s failed, retrying: %v", o.Key, err))
			}
		}}
	keeper.Run(ctx)

	job := lockrun.Job{
		Argv: o.Command, Env: childEnv(o, r.runID, lease.FencingToken()),
		Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr,
		Capture: int(o.capture()), Grace: o.Grace, Timeout: o.Timeout,
		Foreground: inForeground(o.Stdin), Guard: guard, ContinueOnLoss: o.OnLockLost == "continue",
	}
	res := lockrun.Supervise(context.Background(), job, sig, keeper, nil)
	stopKeeper()
	r.row.FinishedAt = time.Now()

	out := outcomeOf(res, o)
	r.row.Status, r.row.ExitCode, r.row.Signal, r.row.Output = out.Status, out.ExitCode, out.Signal, res.Output
	for _, sg := range res.Streams { // lockrun's stream numbers are the history's
		r.row.Streams = append(r.row.Streams, history.Segment{Stream: history.Stream(sg.Stream), Len: sg.Len})
	}
	r.row.Error = out.Message
	if out.Message != "" {
		if out.Warning {
			r.infof("%s", out.Message)
		} else {
			r.errorf("%s", out.Message)
		}
	}
	// The row is written while the lock is released: the release is what a waiting host
	// is held up by, and a failed release changes neither status nor exit code.
	r.queueFinish()

	// The job's processes are all gone: only now may the lock go. A local lock with
	// --min-hold is kept until the hold ends, so the deadline leaves room for it.
	rctx, cancel := context.WithTimeout(context.Background(), o.RedisTimeout+time.Second+o.MinHold)
	if err := lease.Release(rctx); err != nil && !errors.Is(err, lockrun.ErrLockLost) {
		r.infof("releasing %s failed: %v (a Redis lock expires by itself after --ttl %v)", o.Key, err, o.TTL)
	} else {
		r.verbosef("released %s", o.Key)
	}
	cancel()
	r.rec.wait()
	return out.Code
}

// acquire takes the lock, giving way to a stop signal. done means the run ends here
// with code (skipped, failed or interrupted), its row already recorded.
func (r *runner) acquire(sig *lockrun.Signals) (lease lockrun.Lease, code int, done bool) {
	o := r.o
	var tries atomic.Int32
	req := lockrun.Request{Key: o.Key, TTL: o.TTL, Wait: o.Wait, MinHold: o.MinHold,
		Node: o.Node, PID: os.Getpid(), RunID: r.runID, OnTry: func() {
			if tries.Add(1) == 2 && o.Verbose { // on Acquire's goroutine: no status (see say)
				r.say(levelVerbose, false, fmt.Sprintf("%s is held; trying again for up to %s", o.Key, o.Wait))
			}
		}}
	type result struct {
		lease lockrun.Lease
		err   error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan result, 1)
	go func() {
		l, err := r.locker.Acquire(ctx, req)
		ch <- result{l, err}
	}()
	var res result
	for waiting := true; waiting; {
		select {
		case res = <-ch:
			waiting = false
			r.row.Attempt = max(1, int(tries.Load()))
		case s := <-sig.C:
			if !lockrun.IsStopSignal(s) {
				continue // USR1/USR2 before the child exists: nobody to forward them to
			}
			cancel()
			res = <-ch
			r.row.Attempt = max(1, int(tries.Load()))
			if res.lease != nil {
				rctx, c2 := context.WithTimeout(context.Background(), o.RedisTimeout)
				res.lease.Release(rctx)
				c2()
			}
			n := int(s.(syscall.Signal))
			r.row.Status = "interrupted"
			r.row.Signal = unix.SignalName(s.(syscall.Signal))
			r.row.Error = fmt.Sprintf("stopped by %s before the job started", r.row.Signal)
			r.recordInsert()
			r.infof("%s: %s", o.Key, r.row.Error)
			return nil, 128 + n, true
		}
	}
	var held *lockrun.HeldError
	switch {
	case res.err == nil:
		return res.lease, 0, false
	case errors.As(res.err, &held):
		r.row.Status = "skipped"
		if held.Holder != nil {
			r.row.Holder = held.Holder.String()
		}
		r.recordInsert()
		r.reportSkip(held)
		return nil, o.ConflictExitCode, true
	default:
		return nil, r.fail(ExitUsage, "%v", res.err), true
	}
}

// reportSkip says a run was skipped only where someone wants to hear it: cron would
// mail every skip from every other host.
func (r *runner) reportSkip(held *lockrun.HeldError) {
	o := r.o
	h := held.Holder
	if h != nil && o.StaleAfter > 0 && !h.Since.IsZero() && time.Since(h.Since) > o.StaleAfter {
		age := time.Since(h.Since).Round(time.Second)
		if age > time.Hour {
			age = age.Round(time.Minute)
		}
		r.errorf("%s held by %s (pid %d, run %s) for %v, longer than --stale-after %v: is that job hung? See cronlock status --key %s",
			o.Key, escape(h.Node), h.PID, escape(h.RunID), age, o.StaleAfter, o.Key)
		return
	}
	if o.Verbose || (!o.Quiet && isTerminal(o.Stderr)) {
		// The holder's names come from another host: escaped, as on every display.
		r.say(levelVerbose, true, "skipped: "+escape(held.Error()))
	}
}

// fail records an error row, says msg and returns code.
func (r *runner) fail(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	r.row.Status = "error"
	r.row.Error = msg
	r.recordInsert()
	r.errorf("%s", msg)
	return code
}

// capture is --capture, or 0 by default on a terminal so that the child sees it.
func (o *runOptions) capture() int64 {
	if !o.captureSet && isTerminal(o.Stdout) {
		return 0
	}
	return o.Capture
}

// childEnv is cronlock's environment plus the run's own variables.
func childEnv(o *runOptions, runID string, token uint64) []string {
	add := map[string]string{
		"CRONLOCK_KEY":           o.Key,
		"CRONLOCK_RUN_ID":        runID,
		"CRONLOCK_NODE":          o.Node,
		"CRONLOCK_FENCING_TOKEN": strconv.FormatUint(token, 10),
	}
	env := make([]string, 0, len(os.Environ())+len(add))
	for _, kv := range os.Environ() {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if _, ok := add[name]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range add {
		env = append(env, k+"="+v)
	}
	return env
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// inForeground reports whether stdin is a terminal whose foreground group is
// cronlock's: only then may the child's group take the terminal over.
func inForeground(stdin *os.File) bool {
	if !isTerminal(stdin) {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

func (r *runner) errorf(format string, args ...any) {
	r.say(levelError, true, fmt.Sprintf(format, args...))
}

func (r *runner) infof(format string, args ...any) {
	if !r.o.Quiet {
		r.say(levelWarn, true, fmt.Sprintf(format, args...))
	}
}

func (r *runner) verbosef(format string, args ...any) {
	if r.o.Verbose {
		r.say(levelVerbose, true, fmt.Sprintf(format, args...))
	}
}
