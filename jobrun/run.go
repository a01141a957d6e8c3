// Package jobrun carries out one `cronlock run`: it takes the lock, supervises the job
// under it while the lease is kept, releases the lock, records the run in the history
// and the metrics file, says what happened on stderr, and returns the exit code cron
// sees.
//
// It knows no flags, environment or configuration file: cmd resolves those into
// Options. The lock and the child are lockrun's, the SQLite file history's, the metrics
// file metrics'; this package decides the order of the steps and what each outcome is
// called.
package jobrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"cronlock/child"
	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/logline"
	"cronlock/notify"
	"cronlock/runstatus"
	"cronlock/schedule"
	"cronlock/settings"
)

// Options are the settings of one run, resolved and checked by the caller.
type Options struct {
	Key     string   // the lock's name, valid for lockrun.ValidKey
	Command []string // argv of the job, executed without a shell

	TTL     time.Duration // lease length, renewed every TTL/3
	Wait    time.Duration // how long to wait for a held lock; 0 = skip at once
	Timeout time.Duration // longest run time of the job; 0 = none
	Grace   time.Duration // between SIGTERM and SIGKILL whenever the job is stopped
	MinHold time.Duration // keep the lock at least this long after acquiring it
	// ContinueOnLoss lets the job finish when the lock is lost (--on-lock-lost
	// continue); by default it is stopped.
	ContinueOnLoss   bool
	ConflictExitCode int           // the exit code of a skipped run
	StaleAfter       time.Duration // a skip past a holder this old is always said; 0 = never

	// Schedule is the crontab schedule of the line (--schedule); nil = none. The run's
	// tick is then its latest instant at or before the start, and the run is skipped
	// when that tick was already claimed.
	Schedule *schedule.Schedule
	// MaxSkew is --max-skew: with Schedule on Redis, the largest clock skew from the
	// server allowed (also at most a quarter of the time between ticks); 0 = no check.
	MaxSkew time.Duration
	// StartDeadline is --start-deadline: a run that starts (or would start, after a
	// --wait) more than this after its tick is missed; 0 = none.
	StartDeadline time.Duration
	// Jitter is --jitter: before asking for the lock, sleep a uniformly random time in
	// [0, Jitter), so that a fleet whose crons fire at the same second does not ask at
	// once; 0 = none. The tick is the start-up clock's all the same.
	Jitter time.Duration

	// Retries is --retries: how many more tries a job that fails by its own exit gets,
	// under the same lock; 0 = none. RetryDelay (--retry-delay) is the first delay
	// between tries, doubled for each one after, of which a random part is taken.
	// RetryOn (--retry-on) are the exit codes tried again; empty = any non-zero.
	Retries    int
	RetryDelay time.Duration
	RetryOn    []int

	// HeartbeatTimeout is --heartbeat-timeout: a try whose job saved no checkpoint for
	// this long (from its start or its last save) is stopped as a timeout; 0 = none.
	HeartbeatTimeout time.Duration

	// Standby is --standby: "" (none), "lost" or "failed" (--standby=failed). With
	// Schedule, a run that finds its tick claimed by a run that may still be running
	// waits beside it and takes the tick over when that run is lost (standby.go).
	// Standbys is --standbys, MaxAttempts --max-attempts.
	Standby     string
	Standbys    int
	MaxAttempts int

	// Open connects the lock backend; its error is the run's (status error, exit 125).
	Open func() (lockrun.Locker, error)
	// OpTimeout bounds one backend operation (--redis-timeout): a renewal, the release.
	// 0 means lockrun.DefaultTimeout.
	OpTimeout time.Duration
	// Warnings are said at the start of the run (e.g. a password visible in ps).
	Warnings []string

	// History is the history file: "" for the per-user default, "off" for none.
	History string
	// Retention is how old a finished run gets before a run deletes it (at most once a
	// day); 0 keeps every run. RetentionErr, when set, is a bad retention setting, said
	// by every run (which runs anyway) until it is fixed.
	Retention    time.Duration
	RetentionErr error
	// MetricsDir is node_exporter's textfile folder; "" = no metrics file.
	MetricsDir string
	// Ping is the Healthchecks ping URL ({key} already replaced), a secret; "" = none.
	Ping string
	// StampDir is where the hourly limits of repeated warnings are stamped: the lock
	// folder, the same for cron and a login shell.
	StampDir string

	// Capture is how many bytes of output tail are kept with the run; with 0 the job
	// writes to Stdout and Stderr itself.
	Capture int64
	Node    string // this machine's name in locks and history
	// OutputOnFailure and OutputMax: --output on-failure and --output-max (spool.go).
	OutputOnFailure bool
	OutputMax       int64

	// Version is cronlock's version, recorded with the run's claim in the fleet's record.
	Version string

	Quiet, Verbose bool
	LogFormat      string // logline.Text or logline.JSON

	Stdin, Stdout, Stderr *os.File
}

// Run does one locked, supervised, recorded run and returns the exit code: the job's
// own, or one of the Exit codes, or ConflictExitCode for a skipped run.
func Run(o *Options) int {
	if o.OpTimeout <= 0 {
		o.OpTimeout = lockrun.DefaultTimeout
	}
	r := &runner{o: o, started: wallNow()}
	code := r.run()
	r.recordMetrics(code) // the outcome is final here: lock released, row written
	r.pingEnd(code)
	return code
}

// runner carries one run's state between its steps.
type runner struct {
	o        *Options
	started  time.Time // when cronlock started: the row's start, before any wait
	runID    string
	rec      *recorder     // nil when the history is off
	histPath string        // the history file rec writes to
	ended    chan struct{} // closed when the run's final row is queued (see recordStart)
	// startRowAfter is when the running row is due (time.After(startRowDelay) when nil);
	// called on the recorder's goroutine, once it is ready to write the row.
	startRowAfter func() <-chan time.Time
	row           *history.Run
	locker        lockrun.Locker
	tick          time.Time // the run's schedule tick (UTC); zero without --schedule
	refused       bool      // the backend answered the acquire with a refusal (status error)
	known         bool      // this host claimed the key on this backend before (history.KnowsKey)
	// pendingRead gets this key's completions that earlier runs of this host could not
	// deliver (history.Pending), once the history is open; see pending.go.
	pendingRead chan []history.PendingCompletion
	pendingKept bool // this run's own completion is kept for a later run
	pendingSeen bool // pendingRead's answer was taken
	// releaseAt is when the release was sent: a kept completion's end, as the lock was
	// still held then (a later time could overlap the next holder's claim: DUPLICATE).
	releaseAt time.Time
	// attempt is the tick's attempt this run is (0 before the claim = 1), takeoverOf the
	// lost run it took over; noGuard: no guard process could be prepared.
	attempt    int
	takeoverOf string
	noGuard    bool
	ping       *notify.Pinger
	pingLine   string   // cronlock's line at the end of a failure ping's body (endLine)
	ckpt       *ckptRun // the job's checkpoint socket; nil when it could not be made
	// ckptSeen is ckpt for the recorder's goroutine: the running row, written a while
	// after ckpt is made, takes the checkpoints saved before it (their own writes found
	// no row).
	ckptSeen atomic.Pointer[ckptRun]
}

func (r *runner) run() int {
	o := r.o
	// Signals first: a stop signal that arrives while the lock is being taken must be
	// seen (status interrupted), not kill cronlock with the lock half taken.
	sig := child.NotifySignals()
	// The guard is only prepared here; its process is forked as the child is about to
	// start, so a skipped run costs no guard.
	guard, err := child.StartGuard()
	if err != nil {
		r.noGuard = true
		r.verbosef("no guard process (%v): if cronlock is SIGKILLed, only the direct child is killed with it", err)
	}
	guard.OnStartError(func(err error) {
		r.asyncInfof("no guard process (%v): if cronlock is SIGKILLed, only the job's direct child is killed with it", err)
	})
	defer guard.Done()

	id, err := uuid.NewV7()
	if err != nil {
		r.errorf("cannot make a run id: %v", err)
		return ExitFailed
	}
	r.runID = id.String()
	for _, w := range o.Warnings {
		r.infof("%s", w)
	}
	// The tick, once, from the clock read at start: before any wait, so that a run that
	// waited past the next tick is still the run of the tick cron started it for.
	if o.Schedule != nil {
		r.tick = o.Schedule.Prev(r.started).UTC()
	}
	r.row = &history.Run{ID: r.runID, Key: o.Key, Node: o.Node, PID: os.Getpid(),
		Command: o.Command, StartedAt: r.started, Attempt: 1, ScheduledFor: r.tick, Try: 1}
	r.openHistory()

	locker, err := o.Open()
	if err != nil {
		return r.fail(ExitFailed, "%v", err)
	}
	r.locker = locker
	defer locker.Close()
	r.readPending()
	r.row.Backend = locker.Describe()

	if code, done := r.jitter(sig); done {
		return code
	}
	if r.pastDeadline(wallNow()) && !r.serverJudges() {
		return r.missed()
	}
	r.known = r.knowsKey()
	lease, code, done := r.acquire(sig)
	if done {
		return code
	}
	if f, ok := lease.(interface{ File() int }); ok {
		guard.Keep(f.File()) // a local lock stays held until the job's group is dead
	}
	if ta, ok := lease.(lockrun.TickAttempter); ok {
		r.attempt, r.takeoverOf = ta.TickAttempt()
		r.row.TickAttempt, r.row.TakeoverOf = r.attempt, r.takeoverOf
	}
	r.verbosef("acquired %s on %s (fencing token %d)", o.Key, r.row.Backend, lease.FencingToken())
	r.row.FencingToken = lease.FencingToken()
	r.row.Status = runstatus.Running
	r.recordStart()

	ctx, stopKeeper := context.WithCancel(context.Background())
	keeper := &lockrun.Keeper{Lease: lease, Interval: lockrun.RenewInterval(o.TTL), Grace: o.Grace,
		OpTimeout: o.OpTimeout,
		Warn: func(err error) {
			if o.Verbose { // on the keeper's goroutine: no status (see say)
				r.say(logline.Verbose, false, fmt.Sprintf("renewing %s failed, retrying: %v", o.Key, err))
			}
		}}
	watch := watchKeeper(ctx, keeper)

	spool := r.openSpool()
	defer spool.Close()
	r.ckpt = r.startCheckpoints(lease, keeper)
	res, end := r.tries(sig, watch, lease, guard, spool)
	// The job's processes are gone: no save can come now, and a run that succeeded marks
	// its checkpoint for load --last-success while the lock is still its own.
	r.markCheckpoint(r.ckpt, r.ckpt.close(), res, end)
	stopKeeper()
	if !res.Started && r.row.Try == 1 {
		// 126, 127: the job never ran, so the tick is not used up; the next host runs it.
		lease.GiveBackTick()
	}

	// The job's processes are all gone: only now may the lock go, and it goes now, before
	// the rest of the job's output has reached a slow reader. A local lock with
	// --min-hold is kept until the hold ends, so the deadline leaves room for it.
	//
	// The outcome waits for the output (output that could not be written fails the run),
	// and the fleet's record wants the outcome. Normally the output is all through by now:
	// the outcome is final, and the entry travels with the release, at no round trip. When
	// a slow reader still has output to take, the lock goes at once without the entry, and
	// the entry follows in a round trip of its own once the outcome is known.
	var out outcome
	// The run's outcome: its last try's, or how it ended between two tries.
	final := func() outcome {
		if end != nil {
			return *end
		}
		return outcomeOf(res, o)
	}
	early := res.OutputDone(outputSettle)
	if early {
		res.WaitOutput()
		out = final()
		if early = !spoolToWrite(spool, out); early {
			lease.SetRecord(r.fleetRecord(out, &res))
		}
	}
	pending := r.sendPending(lease)
	r.releaseAt = wallNow()
	released := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), o.OpTimeout+time.Second+o.MinHold)
		defer cancel()
		released <- lease.Release(rctx)
	}()
	if !early {
		res.WaitOutput()
		out = final()
	}
	if end == nil {
		out = r.finishSpool(spool, &res, out)
	} else if err := spool.Finish(false); err != nil {
		out.Message += fmt.Sprintf("; and %v", err)
	}
	r.row.Status, r.row.ExitCode, r.row.Signal = out.Status, out.ExitCode, out.Signal
	r.row.Exit = &out.Code
	if end == nil { // else the row is of a try that never started, and res the try before
		r.row.Output, r.row.Streams = res.Output, streamsOf(res)
	} else {
		r.row.FinishedAt = wallNow()
	}
	r.row.Error = out.Message
	r.pingLine = r.endLine(out, true)
	r.sayEnd(out, r.endLine(out, spool != nil), res, spool)
	// The row is written while the lock is being released (usually all of the output is
	// through at once): the release is what a waiting host is held up by, and a failed
	// release changes neither status nor exit code.
	r.queueFinish()
	// "released" only for a lock that was still this run's: after a loss (during a try,
	// or between two), another run may hold the key, and -v must not suggest this run
	// freed it.
	lost := res.LossErr != nil || (end != nil && end.Status == runstatus.LockLost)
	relErr := <-released
	switch err := relErr; {
	case errors.Is(err, lockrun.ErrLockLost) && lost:
		r.verbosef("did not release %s: it was lost during the run, and is no longer this run's", o.Key)
	case errors.Is(err, lockrun.ErrLockLost):
		r.verbosef("did not release %s: it was no longer this run's lock (%v)", o.Key, err)
	case err != nil:
		r.infof("releasing %s failed: %v%s", o.Key, err, freedBy(r.locker, o.TTL))
	case lost:
		// The local backend's lease still closes its descriptor of the replaced file.
		r.verbosef("did not release %s: it was lost during the run; dropped what this run still held of it", o.Key)
	default:
		r.verbosef("released %s", o.Key)
	}
	ferr := lease.RecordErr()
	rec := r.fleetRecord(out, &res)
	unknown := relErr != nil && !errors.Is(relErr, lockrun.ErrLockLost) ||
		ferr != nil && !lockrun.IsRefusal(ferr) // written, but not acknowledged by the replicas
	if !early || unknown {
		// The entry did not travel with the release, or the release's outcome is unknown
		// (a failover, a time-out): the completion goes, or is retried, on its own.
		ctx, cancel := context.WithTimeout(context.Background(), o.OpTimeout)
		ferr = lease.WriteRecord(ctx, rec)
		cancel()
	}
	r.settlePending(lease, rec, pending, relErr, ferr)
	r.fleetFailed(ferr)
	r.rec.wait()
	r.sendLatePending()
	return out.Code
}

// fail records an error row, says msg and returns code.
func (r *runner) fail(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	r.row.Status = runstatus.Error
	r.row.Error = msg
	r.row.Exit = &code
	r.recordInsert()
	r.errorf("%s", msg)
	if r.refused {
		r.recordFleetNoLock()
	}
	return code
}

// childEnv is cronlock's environment plus the run's own variables (settings.JobNames):
// an inherited one (a nested run) is replaced, or dropped when this run has none to give
// (CRONLOCK_SCHEDULED_FOR without a tick). CRONLOCK_PING_URL is always dropped.
func childEnv(o *Options, runID string, token uint64, tokenBackend string, tick time.Time, try int, attempt int, takeoverOf string) []string {
	add := map[string]string{
		settings.JobTokenBackend: tokenBackend,
		settings.JobKey:          o.Key,
		settings.JobRunID:        runID,
		settings.JobTry:          strconv.Itoa(max(try, 1)),
		settings.JobNode:         o.Node,
		settings.JobFencingToken: strconv.FormatUint(token, 10),
		settings.JobScheduledFor: "",
		"CRONLOCK_PING_URL":      "", // a secret, and the job's own pings are not cronlock's
	}
	if !tick.IsZero() {
		add[settings.JobScheduledFor] = tick.UTC().Format(time.RFC3339)
		add[settings.JobTickAttempt] = strconv.Itoa(max(attempt, 1))
		add[settings.JobTakeoverOf] = takeoverOf
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
		if _, ok := add[name]; !ok && !slices.Contains(settings.JobNames, name) {
			env = append(env, kv)
		}
	}
	for k, v := range add {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// freedBy says what frees a lock whose release failed, when its backend frees it by itself.
func freedBy(l lockrun.Locker, ttl time.Duration) string {
	if e, ok := l.(lockrun.Expiring); ok {
		return e.FreedBy(ttl)
	}
	return ""
}
