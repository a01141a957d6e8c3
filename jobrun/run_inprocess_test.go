package jobrun_test

// In-process tests of Run's logic against a fake backend (internal/locktest): what the run
// asks of the lock, what it records, what it says and which code it exits with, for each
// answer the backend may give. The children are real processes (true, false, sh); the
// built binary's tests keep signals, process groups and terminals.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/locktest"
	"cronlock/jobrun"
	"cronlock/lockrun"
	"cronlock/runstatus"
	"cronlock/schedule"
)

// backend is a fake backend that notes what the run asked of it. Its answer fields are
// set before the run; the notes are read after it.
type backend struct {
	// acquire answers each Acquire (after it is noted): nil or returning nil takes the lock.
	acquire func(ctx context.Context, req lockrun.Request) error
	// claimMissed answers ClaimMissed; nil claims the tick as missed.
	claimMissed func(req lockrun.Request) error
	// renew answers Renew; nil renews.
	renew     func() error
	ttl       time.Duration // the lease's TTL, counted from the Acquire; 0 = never expires
	release   error         // Release's answer
	recordErr error         // RecordErr's and WriteRecord's answer
	token     uint64
	tries     int // how many times Acquire reports asking (req.OnTry); 0 = once

	mu       sync.Mutex
	reqs     []lockrun.Request // Acquire's
	claimed  []lockrun.Request // ClaimMissed's
	releases int
	gaveBack int
	records  []lockrun.RunRecord // handed to SetRecord or WriteRecord
}

func (b *backend) locker() *locktest.Locker {
	return &locktest.Locker{
		DescribeFunc: func() string { return "fake test" },
		AcquireFunc: func(ctx context.Context, req lockrun.Request) (lockrun.Lease, error) {
			b.mu.Lock()
			b.reqs = append(b.reqs, req)
			b.mu.Unlock()
			for range max(b.tries, 1) {
				if req.OnTry != nil {
					req.OnTry()
				}
			}
			if b.acquire != nil {
				if err := b.acquire(ctx, req); err != nil {
					return nil, err
				}
			}
			return b.lease(), nil
		},
		ClaimMissedFunc: func(ctx context.Context, req lockrun.Request) error {
			b.mu.Lock()
			b.claimed = append(b.claimed, req)
			b.mu.Unlock()
			if b.claimMissed != nil {
				return b.claimMissed(req)
			}
			return nil
		},
	}
}

func (b *backend) lease() *locktest.Lease {
	note := func(rec *lockrun.RunRecord) {
		b.mu.Lock()
		b.records = append(b.records, *rec)
		b.mu.Unlock()
	}
	sent := lockrun.Boottime()
	return &locktest.Lease{
		FencingTokenFunc: func() uint64 { return b.token },
		TTLFunc:          func() time.Duration { return b.ttl },
		SentFunc:         func() time.Duration { return sent },
		RenewFunc: func(context.Context) error {
			if b.renew != nil {
				return b.renew()
			}
			return nil
		},
		ReleaseFunc: func(context.Context) error {
			b.mu.Lock()
			b.releases++
			b.mu.Unlock()
			return b.release
		},
		GiveBackTickFunc: func() {
			b.mu.Lock()
			b.gaveBack++
			b.mu.Unlock()
		},
		// The entry goes with the release (SetRecord) when the output is through in time,
		// else in a write of its own (WriteRecord): either way, one entry per run.
		SetRecordFunc:   note,
		RecordErrFunc:   func() error { return b.recordErr },
		WriteRecordFunc: func(_ context.Context, rec *lockrun.RunRecord) error { note(rec); return b.recordErr },
	}
}

// record is the one fleet entry the run handed to its lease.
func (b *backend) record(t *testing.T) lockrun.RunRecord {
	t.Helper()
	if len(b.records) != 1 {
		t.Fatalf("the lease got %d fleet entries (%+v), want 1", len(b.records), b.records)
	}
	return b.records[0]
}

// ran is what a run did: its exit code, what it said on stderr, the job's stdout, and its
// history rows, oldest first.
type ran struct {
	code           int
	stderr, stdout string
	rows           []history.Run
}

// run runs argv once, in-process, with the fake backend b and its history in dir. set,
// when not nil, changes the options first.
func run(t *testing.T, dir string, b *backend, argv []string, set func(*jobrun.Options)) ran {
	t.Helper()
	stdout, stderr := createFile(t, dir, "stdout"), createFile(t, dir, "stderr")
	path := filepath.Join(dir, "history.db")
	o := &jobrun.Options{
		Key: "inproc", Command: argv, Node: "node1",
		TTL: 300 * time.Millisecond, Grace: 5 * time.Second, OpTimeout: time.Second,
		Capture: 64 << 10, History: path, StampDir: dir,
		Stdout: stdout, Stderr: stderr,
		Open: func() (lockrun.Locker, error) { return b.locker(), nil },
	}
	if set != nil {
		set(o)
	}
	r := ran{code: jobrun.Run(o)}
	r.stdout, r.stderr = readFile(t, stdout.Name()), readFile(t, stderr.Name())
	st, err := history.OpenRead(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if r.rows, err = st.List(history.Filter{}); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(r.rows)
	return r
}

// only is the run's one history row.
func (r ran) only(t *testing.T) history.Run {
	t.Helper()
	if len(r.rows) != 1 {
		t.Fatalf("%d history rows %+v, want 1", len(r.rows), r.rows)
	}
	return r.rows[0]
}

func createFile(t *testing.T, dir, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// intOr is *p, or -1 for nil.
func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// everyMinute is a --schedule whose tick is the start of the run's minute.
func everyMinute(t *testing.T) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse("* * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunExitCode: a run that took the lock ends with its job's code, or cronlock's own
// for a job that could not start or ran out of time; the row, the fleet entry and stderr
// agree, and a job that never started gives its tick back.
func TestRunExitCode(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		argv     []string
		timeout  time.Duration
		code     int
		status   string
		own      int    // the child's own code in the row; -1 = none
		signal   string // the signal that ended the child, in the row
		said     string // a part of stderr; "" = nothing is said
		gaveBack int    // GiveBackTick calls
	}{
		{"true", []string{"true"}, 0, 0, runstatus.Succeeded, 0, "", "", 0},
		{"false", []string{"false"}, 0, 1, runstatus.Failed, 1, "", "", 0},
		{"exit 3", []string{"sh", "-c", "exit 3"}, 0, 3, runstatus.Failed, 3, "", "", 0},
		{"killed by its own signal", []string{"sh", "-c", "kill -USR1 $$"}, 0, 128 + 10, runstatus.Failed, -1, "SIGUSR1", "", 0},
		{"not found", []string{filepath.Join(dir, "no-such-command")}, 0, jobrun.ExitNotFound, runstatus.Error, -1, "", "no-such-command", 1},
		{"not executable", []string{noExec}, 0, jobrun.ExitCannotExecute, runstatus.Error, -1, "", "not-executable", 1},
		{"timeout", []string{"sleep", "60"}, 100 * time.Millisecond, jobrun.ExitTimeout, runstatus.Timeout, -1, "SIGTERM", "longer than --timeout", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{token: 7}
			r := run(t, t.TempDir(), b, tc.argv, func(o *jobrun.Options) { o.Timeout = tc.timeout })
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			row := r.only(t)
			if row.Status != tc.status || intOr(row.Exit) != tc.code || intOr(row.ExitCode) != tc.own || row.Signal != tc.signal {
				t.Fatalf("row status %s, exit %d, own code %d, signal %q; want %s, %d, %d, %q",
					row.Status, intOr(row.Exit), intOr(row.ExitCode), row.Signal, tc.status, tc.code, tc.own, tc.signal)
			}
			if row.FencingToken != 7 || row.Backend != "fake test" {
				t.Fatalf("row token %d on %q, want 7 on the fake's Describe", row.FencingToken, row.Backend)
			}
			if tc.said == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.said) {
				t.Fatalf("stderr %q, want it to say %q", r.stderr, tc.said)
			}
			if len(b.reqs) != 1 || b.releases != 1 || b.gaveBack != tc.gaveBack {
				t.Fatalf("%d acquires, %d releases, %d ticks given back; want 1, 1, %d", len(b.reqs), b.releases, b.gaveBack, tc.gaveBack)
			}
			rec := b.record(t)
			if rec.Status != tc.status || rec.Exit != tc.code || rec.Signal != tc.signal || rec.RunID != row.RunID || rec.Node != "node1" || rec.Tries != 1 {
				t.Fatalf("fleet entry %+v; want status %s, exit %d, signal %q, run %s of node1, 1 try", rec, tc.status, tc.code, tc.signal, row.RunID)
			}
		})
	}
}

// TestRunSkipsWhenHeld: a lock held elsewhere skips the run, with --conflict-exit-code,
// a skipped row naming the holder, and no word on stderr unless -v asks or the holder is
// older than --stale-after. The job does not run.
func TestRunSkipsWhenHeld(t *testing.T) {
	recent := &lockrun.Holder{Node: "other", PID: 42, RunID: "r1", Since: time.Now()}
	old := &lockrun.Holder{Node: "other", PID: 42, RunID: "r1", Since: time.Now().Add(-48 * time.Hour)}
	for _, tc := range []struct {
		name     string
		holder   *lockrun.Holder
		conflict int
		verbose  bool
		stale    time.Duration
		said     string // "" = nothing
		rowHold  string
	}{
		{"silent", recent, 0, false, 24 * time.Hour, "", "other (pid 42, run r1)"},
		{"conflict exit code", recent, 3, false, 0, "", "other (pid 42, run r1)"},
		{"holder unknown", nil, 0, false, 24 * time.Hour, "", ""},
		{"verbose", recent, 0, true, 0, "cronlock: skipped: inproc held by other (pid 42, run r1) since", "other (pid 42, run r1)"},
		{"past --stale-after", old, 0, false, 24 * time.Hour, "longer than --stale-after 24h: is that job hung?", "other (pid 42, run r1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := &backend{acquire: func(_ context.Context, req lockrun.Request) error {
				return &lockrun.HeldError{Key: req.Key, Holder: tc.holder}
			}}
			ranFile := filepath.Join(dir, "ran")
			r := run(t, dir, b, []string{"touch", ranFile}, func(o *jobrun.Options) {
				o.ConflictExitCode, o.Verbose, o.StaleAfter = tc.conflict, tc.verbose, tc.stale
			})
			if r.code != tc.conflict {
				t.Fatalf("exit code %d, want --conflict-exit-code %d; stderr %q", r.code, tc.conflict, r.stderr)
			}
			row := r.only(t)
			if row.Status != runstatus.Skipped || intOr(row.Exit) != tc.conflict || row.Holder != tc.rowHold {
				t.Fatalf("row status %s, exit %d, holder %q; want skipped, %d, %q", row.Status, intOr(row.Exit), row.Holder, tc.conflict, tc.rowHold)
			}
			if tc.said == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.said) {
				t.Fatalf("stderr %q, want it to say %q", r.stderr, tc.said)
			}
			if exists(ranFile) {
				t.Fatal("the job ran although the lock was held")
			}
			if b.releases != 0 || len(b.records) != 0 {
				t.Fatalf("%d releases, fleet entries %+v of a lock never taken", b.releases, b.records)
			}
		})
	}
}

// TestRunSkipsClaimedTick: with --schedule, an Acquire that finds the tick (or a later
// one) claimed skips the run, silently within a minute of the tick, and the request
// carries the tick the row is for.
func TestRunSkipsClaimedTick(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later bool // a later tick than the run's was claimed
		said  string
	}{
		{"this tick", false, ""},
		{"a later tick, verbose", true, "skipped: the later tick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := &backend{acquire: func(_ context.Context, req lockrun.Request) error {
				e := &lockrun.TickError{Key: req.Key, Tick: req.Tick, Claimed: req.Tick, Node: "other", RunID: "r9"}
				if tc.later {
					e.Claimed = req.Tick.Add(time.Minute)
				}
				return e
			}}
			ranFile := filepath.Join(dir, "ran")
			r := run(t, dir, b, []string{"touch", ranFile}, func(o *jobrun.Options) {
				o.Schedule, o.ConflictExitCode, o.Verbose = everyMinute(t), 5, tc.said != ""
			})
			if r.code != 5 {
				t.Fatalf("exit code %d, want --conflict-exit-code 5; stderr %q", r.code, r.stderr)
			}
			row := r.only(t)
			if row.Status != runstatus.Skipped || row.Holder != "other (run r9)" || !strings.Contains(row.Error, "by other (run r9)") {
				t.Fatalf("row status %s, holder %q, error %q; want skipped, claimed by other (run r9)", row.Status, row.Holder, row.Error)
			}
			tick := b.reqs[0].Tick
			if tick.IsZero() || !tick.Equal(row.ScheduledFor) || tick.Second() != 0 || tick.After(row.StartedAt) {
				t.Fatalf("request's tick %v, row's %v (started %v): want the same minute's start", tick, row.ScheduledFor, row.StartedAt)
			}
			if tc.said == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.said) {
				t.Fatalf("stderr %q, want it to say %q", r.stderr, tc.said)
			}
			if exists(ranFile) {
				t.Fatal("the job ran although its tick was claimed")
			}
		})
	}
}

// TestRunMissed: a run past --start-deadline claims its tick as missed instead of taking
// the lock, and says so; a tick already claimed is a skip, and a backend that cannot
// claim it fails the run.
func TestRunMissed(t *testing.T) {
	down := errors.New("redis 127.0.0.1:6379 unreachable: connection refused")
	for _, tc := range []struct {
		name   string
		answer func(req lockrun.Request) error
		code   int
		status string
		said   string // "" = nothing
	}{
		{"claimed as missed", nil, 5, runstatus.Missed, "missed the"},
		{"already claimed", func(req lockrun.Request) error {
			return &lockrun.TickError{Key: req.Key, Tick: req.Tick, Claimed: req.Tick, Node: "other", Missed: true}
		}, 5, runstatus.Skipped, ""},
		{"backend down", func(lockrun.Request) error { return down }, jobrun.ExitFailed, runstatus.Error, down.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := &backend{claimMissed: tc.answer}
			ranFile := filepath.Join(dir, "ran")
			r := run(t, dir, b, []string{"touch", ranFile}, func(o *jobrun.Options) {
				// The run starts after its minute began: later than 1ns after its tick.
				o.Schedule, o.StartDeadline, o.ConflictExitCode = everyMinute(t), time.Nanosecond, 5
			})
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			row := r.only(t)
			if row.Status != tc.status || intOr(row.Exit) != tc.code {
				t.Fatalf("row status %s, exit %d; want %s, %d", row.Status, intOr(row.Exit), tc.status, tc.code)
			}
			if tc.said == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.said) {
				t.Fatalf("stderr %q, want it to say %q", r.stderr, tc.said)
			}
			if len(b.claimed) != 1 || !b.claimed[0].Tick.Equal(row.ScheduledFor) || row.ScheduledFor.IsZero() {
				t.Fatalf("ClaimMissed asked %d times (%+v), want once for the row's tick %v", len(b.claimed), b.claimed, row.ScheduledFor)
			}
			if len(b.reqs) != 0 || exists(ranFile) {
				t.Fatalf("%d acquires; job ran: %v; want neither for a missed run", len(b.reqs), exists(ranFile))
			}
		})
	}
}

// TestRunBackendFails: a backend that cannot be opened, cannot be reached, or refuses the
// lock fails the run with 125, an error row and one line that says why; the job does not
// run.
func TestRunBackendFails(t *testing.T) {
	down := errors.New("redis 127.0.0.1:6379 unreachable: dial tcp 127.0.0.1:6379: connect: connection refused")
	skew := &lockrun.SkewError{Key: "inproc", Server: "redis 127.0.0.1:6379", Skew: 45 * time.Second, Max: 15 * time.Second}
	for _, tc := range []struct {
		name     string
		open     error
		acquire  error
		said     string
		acquires int
	}{
		{"open fails", down, nil, down.Error(), 0},
		{"acquire fails", nil, down, down.Error(), 1},
		{"clock skew refused", nil, skew, "this host's clock is 45s ahead of redis 127.0.0.1:6379's", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := &backend{acquire: func(context.Context, lockrun.Request) error { return tc.acquire }}
			ranFile := filepath.Join(dir, "ran")
			r := run(t, dir, b, []string{"touch", ranFile}, func(o *jobrun.Options) {
				if tc.open != nil {
					o.Open = func() (lockrun.Locker, error) { return nil, tc.open }
				}
			})
			if r.code != jobrun.ExitFailed {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, jobrun.ExitFailed, r.stderr)
			}
			row := r.only(t)
			if row.Status != runstatus.Error || intOr(row.Exit) != jobrun.ExitFailed || !strings.Contains(row.Error, tc.said) {
				t.Fatalf("row status %s, exit %d, error %q; want error, 125, saying %q", row.Status, intOr(row.Exit), row.Error, tc.said)
			}
			if !strings.Contains(r.stderr, tc.said) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("stderr %q, want one line saying %q", r.stderr, tc.said)
			}
			if len(b.reqs) != tc.acquires || exists(ranFile) {
				t.Fatalf("%d acquires, job ran: %v; want %d, false", len(b.reqs), exists(ranFile), tc.acquires)
			}
		})
	}
}

// TestRunLockLost: a lock lost while the job runs stops the job: lock_lost, 125, and a
// line that says why. The loss is a renewal answered "not ours" (ErrLockLost), or
// renewals that fail until the lease would run out. With --on-lock-lost continue the job
// finishes and its code stands, still lock_lost, with a warning.
func TestRunLockLost(t *testing.T) {
	timeout := errors.New("i/o timeout")
	for _, tc := range []struct {
		name     string
		renewErr error         // each renewal's answer once the job runs
		ttl      time.Duration // the lease's, and --ttl; 0 = 300ms, on a lease that never expires
		cont     bool
		code     int
		signal   string
		said     string
	}{
		{"not ours", lockrun.ErrLockLost, 0, false, jobrun.ExitFailed, "SIGTERM",
			"cronlock: inproc: the lock was lost while the job ran (lockrun: lock lost); stopped the job"},
		{"renewals fail", timeout, 1200 * time.Millisecond, false, jobrun.ExitFailed, "SIGTERM",
			"cronlock: inproc: the lock was lost while the job ran (no renewal confirmed before the lease ran out; the last try: i/o timeout); stopped the job"},
		{"not ours, continue", lockrun.ErrLockLost, 0, true, 4, "",
			"cronlock: inproc: the lock was lost while the job ran (lockrun: lock lost); --on-lock-lost continue let it finish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			started, lost := filepath.Join(dir, "started"), filepath.Join(dir, "lost")
			b := &backend{ttl: tc.ttl, renew: func() error {
				if !exists(started) {
					return nil // renewed until the job runs: the loss comes while it does
				}
				if err := os.WriteFile(lost, nil, 0o600); err != nil {
					t.Error(err)
				}
				return tc.renewErr
			}}
			// The job waits for the loss. Stopped by it, the job would then sleep for good;
			// let run through it (continue), it ends with its own code a moment later: the
			// moment lets the keeper's report reach the supervisor before the job's end
			// does, as nothing the job can see says that it has.
			job := `touch "$1"; while [ ! -e "$2" ]; do sleep 0.01; done; [ -n "$3" ] && sleep 1 && exit 4; exec sleep 60`
			cont := ""
			if tc.cont {
				cont = "continue"
			}
			r := run(t, dir, b, []string{"sh", "-c", job, "sh", started, lost, cont}, func(o *jobrun.Options) {
				o.ContinueOnLoss = tc.cont
				if tc.ttl != 0 {
					o.TTL = tc.ttl
				}
			})
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			row := r.only(t)
			if row.Status != runstatus.LockLost || intOr(row.Exit) != tc.code || row.Signal != tc.signal {
				t.Fatalf("row status %s, exit %d, signal %q; want lock_lost, %d, %q", row.Status, intOr(row.Exit), row.Signal, tc.code, tc.signal)
			}
			if !strings.Contains(r.stderr, tc.said) {
				t.Fatalf("stderr %q, want it to say %q", r.stderr, tc.said)
			}
			if rec := b.record(t); rec.Status != runstatus.LockLost || rec.Exit != tc.code {
				t.Fatalf("fleet entry %+v, want lock_lost, exit %d", rec, tc.code)
			}
			if b.releases != 1 || b.gaveBack != 0 {
				t.Fatalf("%d releases, %d ticks given back; want 1, 0", b.releases, b.gaveBack)
			}
		})
	}
}

// TestRunReleaseFails: a release that fails, or finds the lock no longer ours, changes
// neither status nor exit code: the job's stand. A failure is said (not with -q); a lock
// that was no longer ours only with -v. So is a fleet entry that could not be written.
func TestRunReleaseFails(t *testing.T) {
	reset := errors.New("read tcp 127.0.0.1:6379: connection reset by peer")
	for _, tc := range []struct {
		name           string
		release        error
		recordErr      error
		quiet, verbose bool
		said           string // "" = nothing
	}{
		{"release fails", reset, nil, false, false, "cronlock: releasing inproc failed: " + reset.Error() + "\n"},
		{"release fails, quiet", reset, nil, true, false, ""},
		{"no longer ours", fmt.Errorf("release: %w", lockrun.ErrLockLost), nil, false, false, ""},
		{"no longer ours, verbose", fmt.Errorf("release: %w", lockrun.ErrLockLost), nil, false, true, "did not release inproc: it was no longer this run's lock"},
		{"fleet entry not written", nil, errors.New("OOM command not allowed"), false, false, "warning: OOM command not allowed; the run is not in the fleet's record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{release: tc.release, recordErr: tc.recordErr}
			r := run(t, t.TempDir(), b, []string{"sh", "-c", "exit 3"}, func(o *jobrun.Options) {
				o.Quiet, o.Verbose = tc.quiet, tc.verbose
			})
			if r.code != 3 {
				t.Fatalf("exit code %d, want the job's 3; stderr %q", r.code, r.stderr)
			}
			if row := r.only(t); row.Status != runstatus.Failed || intOr(row.Exit) != 3 {
				t.Fatalf("row status %s, exit %d; want failed, 3", row.Status, intOr(row.Exit))
			}
			if tc.said == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.said) {
				t.Fatalf("stderr %q, want it to say %q", r.stderr, tc.said)
			}
			if b.releases != 1 {
				t.Fatalf("%d releases, want 1", b.releases)
			}
		})
	}
}

// TestRunRetries: --retries tries a failing job again under the one lease taken once; each
// try has its row, linked by the run id, and the fleet entry counts the tries.
func TestRunRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		argv     []string
		retryOn  []int
		code     int
		statuses []string
	}{
		// CRONLOCK_TRY counts the tries: the third one succeeds.
		{"mended by the third try", []string{"sh", "-c", `[ "$CRONLOCK_TRY" -ge 3 ]`}, nil, 0,
			[]string{runstatus.Retried, runstatus.Retried, runstatus.Succeeded}},
		{"every try fails", []string{"sh", "-c", "exit 3"}, nil, 3,
			[]string{runstatus.Retried, runstatus.Retried, runstatus.Failed}},
		{"code not in --retry-on", []string{"sh", "-c", "exit 3"}, []int{4}, 3,
			[]string{runstatus.Failed}},
		{"command not found", []string{"/nonexistent/cronlock-test-job"}, nil, jobrun.ExitNotFound,
			[]string{runstatus.Error}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{token: 9}
			r := run(t, t.TempDir(), b, tc.argv, func(o *jobrun.Options) {
				o.Retries, o.RetryOn = 2, tc.retryOn // RetryDelay 0: no wait between tries
			})
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			var statuses []string
			for i, row := range r.rows {
				statuses = append(statuses, row.Status)
				if row.Try != i+1 || row.RunID != r.rows[0].ID || row.FencingToken != 9 {
					t.Fatalf("row %d: try %d of run %s, token %d; want try %d of run %s, token 9", i, row.Try, row.RunID, row.FencingToken, i+1, r.rows[0].ID)
				}
			}
			if !slices.Equal(statuses, tc.statuses) {
				t.Fatalf("rows %v, want %v", statuses, tc.statuses)
			}
			if len(b.reqs) != 1 || b.releases != 1 {
				t.Fatalf("%d acquires and %d releases, want one of each for every try", len(b.reqs), b.releases)
			}
			rec := b.record(t)
			if rec.Tries != len(tc.statuses) || rec.Exit != tc.code || rec.RunID != r.rows[0].ID {
				t.Fatalf("fleet entry %+v, want %d tries, exit %d, run %s", rec, len(tc.statuses), tc.code, r.rows[0].ID)
			}
			wantBack := 0
			if tc.code == jobrun.ExitNotFound {
				wantBack = 1
			}
			if b.gaveBack != wantBack {
				t.Fatalf("%d ticks given back, want %d", b.gaveBack, wantBack)
			}
		})
	}
}

// TestRunLockLostBetweenTries: a lock lost while the run waits to try again ends the run
// there, lock_lost and 125; the next try does not start.
func TestRunLockLostBetweenTries(t *testing.T) {
	dir := t.TempDir()
	tries := filepath.Join(dir, "tries")
	b := &backend{renew: func() error {
		if exists(tries) {
			return lockrun.ErrLockLost // once the first try has run
		}
		return nil
	}}
	job := `echo "$CRONLOCK_TRY" >>"$1"; [ "$CRONLOCK_TRY" -eq 1 ] && exit 3; exec sleep 60`
	r := run(t, dir, b, []string{"sh", "-c", job, "sh", tries}, func(o *jobrun.Options) {
		// The delay is a random part of --retry-delay: with 10m, the next try comes before
		// the next renewal (100ms) about once in 6000 runs; the try is then stopped by the
		// loss, an end that is lock_lost and 125 too.
		o.Retries, o.RetryDelay = 1, 10*time.Minute
		o.Verbose = true // -v must not say the lost lock was released
	})
	if r.code != jobrun.ExitFailed {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, jobrun.ExitFailed, r.stderr)
	}
	if len(r.rows) != 2 || r.rows[0].Status != runstatus.Retried || r.rows[1].Status != runstatus.LockLost || intOr(r.rows[1].Exit) != jobrun.ExitFailed {
		t.Fatalf("rows %+v; want retried, then lock_lost with exit 125", r.rows)
	}
	if strings.Contains(r.stderr, "while the job ran") {
		t.Skipf("the second try started before the loss was seen (the rare case): %q", r.stderr)
	}
	if !strings.Contains(r.stderr, "the lock was lost between tries (lockrun: lock lost); try 2 was not started") {
		t.Fatalf("stderr %q, want it to say the lock was lost between tries", r.stderr)
	}
	if strings.Contains(r.stderr, "released inproc") || !strings.Contains(r.stderr, "did not release inproc") {
		t.Fatalf("stderr %q: -v says the lock lost between tries was released", r.stderr)
	}
	if !strings.Contains(r.rows[0].Error, "try 2 to follow after") {
		t.Fatalf("the retried row says %q, want the try to follow (it may never start)", r.rows[0].Error)
	}
	if got := readFile(t, tries); got != "1\n" {
		t.Fatalf("tries that ran: %q, want only the first", got)
	}
	if rec := b.record(t); rec.Status != runstatus.LockLost || rec.Tries != 2 {
		t.Fatalf("fleet entry %+v, want lock_lost after 2 tries", rec)
	}
}

// TestRunRequest: the lock is asked for with the run's settings, and the job sees the
// lease it runs under in its environment; the row has the attempts Acquire reported.
func TestRunRequest(t *testing.T) {
	b := &backend{token: 12345, tries: 3}
	env := `echo "$CRONLOCK_KEY $CRONLOCK_NODE $CRONLOCK_FENCING_TOKEN $CRONLOCK_TOKEN_BACKEND $CRONLOCK_TRY $CRONLOCK_RUN_ID"`
	r := run(t, t.TempDir(), b, []string{"sh", "-c", env}, func(o *jobrun.Options) {
		o.TTL, o.Wait, o.MinHold = 600*time.Millisecond, 2*time.Second, 50*time.Millisecond
	})
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr %q", r.code, r.stderr)
	}
	row := r.only(t)
	if len(b.reqs) != 1 {
		t.Fatalf("%d acquires, want 1", len(b.reqs))
	}
	req := b.reqs[0]
	if req.Key != "inproc" || req.TTL != 600*time.Millisecond || req.Wait != 2*time.Second || req.MinHold != 50*time.Millisecond ||
		req.Node != "node1" || req.PID != os.Getpid() || req.RunID != row.RunID || !req.Tick.IsZero() {
		t.Fatalf("request %+v; want key inproc, ttl 600ms, wait 2s, min-hold 50ms, node1, pid %d, run %s, no tick", req, os.Getpid(), row.RunID)
	}
	// CRONLOCK_TOKEN_BACKEND is the backend's own Name.
	if want := "inproc node1 12345 fake 1 " + row.RunID + "\n"; r.stdout != want {
		t.Fatalf("the job saw %q, want %q", r.stdout, want)
	}
	if row.Attempt != 3 || row.FencingToken != 12345 {
		t.Fatalf("row: attempt %d, token %d; want 3 (OnTry calls), 12345", row.Attempt, row.FencingToken)
	}
}

// TestRunInterruptedWhileAcquiring: a stop signal while the lock is being taken ends the
// run before its job: 128+N, interrupted. A lease the backend granted all the same is
// given back, tick and lock.
func TestRunInterruptedWhileAcquiring(t *testing.T) {
	dir := t.TempDir()
	b := &backend{acquire: func(ctx context.Context, _ lockrun.Request) error {
		// Run has registered its signal handling by now: SIGTERM reaches it, not the
		// default action that would end the test.
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		<-ctx.Done()
		return nil // a backend that took the lock just as it was told to stop
	}}
	ranFile := filepath.Join(dir, "ran")
	r := run(t, dir, b, []string{"touch", ranFile}, nil)
	if r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit code %d, want 143; stderr %q", r.code, r.stderr)
	}
	row := r.only(t)
	if row.Status != runstatus.Interrupted || row.Signal != "SIGTERM" || intOr(row.Exit) != 143 {
		t.Fatalf("row status %s, signal %q, exit %d; want interrupted, SIGTERM, 143", row.Status, row.Signal, intOr(row.Exit))
	}
	if want := "cronlock: inproc: stopped by SIGTERM before the job started\n"; r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
	if b.gaveBack != 1 || b.releases != 1 || exists(ranFile) {
		t.Fatalf("%d ticks given back, %d releases, job ran: %v; want 1, 1, false", b.gaveBack, b.releases, exists(ranFile))
	}
}
