package jobrun

import (
	"sync"
	"sync/atomic"
	"time"

	"cronlock/history"
	"cronlock/metrics"
)

// recorder writes one run's history rows on a goroutine of its own, in order, so that
// opening SQLite and writing rows overlap with taking the lock and running the job.
// A history that cannot be written never stops the job: the first failure is reported
// and the rest of the run goes unrecorded.
type recorder struct {
	ops  chan func(*history.Store) error
	done chan struct{}

	mu     sync.Mutex // offer against wait's close
	closed bool
}

// startRecorder opens the history at path in the background. fail is called (on the
// recorder's goroutine) with the first error. after, when not nil, gets the store once
// every queued write has succeeded, if a retention pass is due (learnt at the start,
// while the job runs, so that the common case costs the run's end nothing).
// Rows that earlier runs on this node left running, because their cronlock died, are
// marked abandoned on the way (Reap); that is cheap, and off the job's path here.
func startRecorder(path, node string, fail func(error), after func(*history.Store)) *recorder {
	rec := &recorder{ops: make(chan func(*history.Store) error, 4), done: make(chan struct{})}
	go func() {
		defer close(rec.done)
		st, err := history.Open(path)
		if err != nil {
			fail(err)
		} else {
			_, _ = st.Reap(node) // a failure here loses nothing: `history` reaps too
		}
		due := false
		if st != nil && after != nil {
			due, _ = st.RetentionDue(time.Now()) // an error: tried again by the next run
		}
		for op := range rec.ops {
			if st == nil {
				continue
			}
			if err := op(st); err != nil {
				fail(err)
				st = nil
			}
		}
		if st != nil && due {
			after(st)
		}
		if st == nil {
			// The run's row is not written: its claimed file must not outlive it (see
			// history.DropClaims). Claim came before the writes queued here, so it is in.
			history.DropClaims()
		}
		// The store is deliberately not closed: closing the last connection checkpoints
		// the WAL with two fsyncs, the largest cost of a short run. SQLite recovers the
		// WAL at the next open, and wal_autocheckpoint keeps it short meanwhile.
	}()
	return rec
}

// do queues op; a nil recorder (history off) does nothing.
func (rec *recorder) do(op func(*history.Store) error) {
	if rec != nil {
		rec.ops <- op
	}
}

// offer queues op from another goroutine if there is room and the recorder is still
// open, and reports whether it did: it never blocks, so what calls it (a job waiting for
// its checkpoint's answer) is not held up by the history.
func (rec *recorder) offer(op func(*history.Store) error) bool {
	if rec == nil {
		return false
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.closed {
		return false
	}
	select {
	case rec.ops <- op:
		return true
	default:
		return false
	}
}

// wait lets the queued writes finish.
func (rec *recorder) wait() {
	if rec != nil {
		rec.mu.Lock()
		rec.closed = true
		close(rec.ops)
		rec.mu.Unlock()
		<-rec.done
	}
}

// checkpointWriter is the ckptRun.onSave of a run with a history: each accepted save
// queues one write of the try's newest value, off the job's path, so that it outlives a
// cronlock that dies before the row's end. Saves that come while a write is queued are
// folded into it (it reads the newest value when it runs); a save that finds the queue
// full is not written until the next save or the row's end (queueFinish), which always
// carries the try's last value. A failed write is not the history's failure: the row's
// end writes the value again and says what is wrong.
func (r *runner) checkpointWriter(c *ckptRun) func() {
	var queued atomic.Bool
	return func() {
		if !queued.CompareAndSwap(false, true) {
			return
		}
		if !r.rec.offer(func(s *history.Store) error {
			queued.Store(false)
			if id, v, at := c.current(); !at.IsZero() {
				_ = s.SaveCheckpoint(id, v, at)
			}
			return nil
		}) {
			queued.Store(false)
		}
	}
}

// openHistory starts the recorder unless recording is off.
func (r *runner) openHistory() {
	path := r.o.History
	switch path {
	case "off":
		return
	case "":
		var err error
		if path, err = history.DefaultPath(); err != nil {
			r.historyFailed(path, err)
			return
		}
	}
	var after func(*history.Store)
	switch {
	case r.o.RetentionErr != nil:
		// Said by every run, and nothing is deleted until it is fixed; the job runs.
		r.errorf("%v", r.o.RetentionErr)
	case r.o.Retention > 0:
		after = r.retain
	}
	r.histPath = path
	go history.Warm() // beside the lock's acquire: Claim comes right after it
	r.rec = startRecorder(path, r.o.Node, func(err error) { r.historyFailed(path, err) }, after)
}

// StartRowDelay is how long a run goes before its running row is written. A run that
// ends sooner is written once, when it ends: one SQLite write instead of two, and fewer
// pages for the next run to read back from the WAL. Its claimed file covers it
// meanwhile (see recordStart).
const StartRowDelay = time.Second

// recordStart records a run whose child is about to start. The run's per-run file is
// claimed here, on the run's own path, with its start facts. The running row is written
// by the recorder only once the run has lasted StartRowDelay. Meanwhile `cronlock
// history` shows the run from its file (history.AddLive), and should cronlock die, the
// next Reap records the run (abandoned) from that file. A failed claim is left to the
// recorder's Start or Finish, which says what is wrong with the history.
func (r *runner) recordStart() {
	if r.rec != nil {
		_ = history.Claim(r.histPath, *r.row)
	}
	row := *r.row
	ended := make(chan struct{})
	r.ended = ended
	after := r.startRowAfter
	if after == nil {
		after = func() <-chan time.Time { return time.After(StartRowDelay) }
	}
	r.rec.do(func(s *history.Store) error {
		select {
		case <-after():
			if err := s.Start(&row); err != nil {
				return err
			}
			if c := r.ckptSeen.Load(); c != nil {
				if id, v, at := c.current(); id == row.ID && !at.IsZero() {
					_ = s.SaveCheckpoint(id, v, at) // as checkpointWriter's
				}
			}
			return nil
		case <-ended:
			return nil // Finish, queued next, writes the whole row in one go
		}
	})
}

// queueFinish queues the completed row; rec.wait lets it be written.
func (r *runner) queueFinish() {
	if r.ended != nil {
		close(r.ended)
		r.ended = nil
	}
	row := *r.row
	row.Checkpoint, row.CheckpointAt = r.ckpt.lastSaved(row.ID)
	r.rec.do(func(s *history.Store) error { return s.Finish(&row) })
}

// recordInsert writes a run that ended before its child started (skipped, error,
// interrupted) in one go, and waits for it.
func (r *runner) recordInsert() {
	r.row.FinishedAt = wallNow()
	row := *r.row
	r.rec.do(func(s *history.Store) error { return s.Insert(&row) })
	r.rec.wait()
}

// retain is automatic retention, after the run's rows are written: it runs on the
// recorder's goroutine, once the job is over and its lock released, and prunes at most
// once a day per history file (history.Retain). A failed pass is said on stderr (a bad
// setting already was, by openHistory); the run's exit code stays the job's.
func (r *runner) retain(st *history.Store) {
	age := r.o.Retention
	if _, _, err := st.Retain(age, time.Now()); err != nil {
		r.asyncErrorf("deleting runs older than %s from the history failed (%v); it is tried again in a day, or run cronlock history prune", history.FormatAge(age), err)
	}
}

// recordMetrics writes the metrics file of a finished run when --metrics-dir is set.
// A failure is one warning line, limited like the history's (a misconfigured folder under
// a per-minute job must not flood cron mail): monitoring never changes a run's exit code.
func (r *runner) recordMetrics(code int) {
	o := r.o
	if o.MetricsDir == "" || r.row == nil || r.row.Status == "" {
		return
	}
	f := metrics.Facts{Key: o.Key, Node: o.Node, Status: r.row.Status, ExitCode: code,
		Started: r.row.StartedAt, Finished: r.row.FinishedAt}
	if err := metrics.Write(o.MetricsDir, f); err != nil && !o.Quiet && r.shouldWarn("metrics", o.MetricsDir, err) {
		r.infof("warning: cannot write the metrics of this run (%v); its exit code is unchanged. Fix that folder, or unset --metrics-dir and CRONLOCK_METRICS_DIR%s", err, r.repeatNote())
	}
}
