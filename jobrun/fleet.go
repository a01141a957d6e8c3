package jobrun

import (
	"context"
	"errors"
	"time"

	"cronlock/child"
	"cronlock/lockrun"
	"cronlock/runstatus"
)

// outputSettle is how long the release waits for the relays to drain what the pipes held
// when the job's processes went: microseconds for a reader that keeps up. Past it, the
// reader is slow, and the lock goes without waiting any longer (the fleet's entry then
// costs a round trip of its own).
const outputSettle = 20 * time.Millisecond

// fleetRecord is this run's entry for the fleet's record.
func (r *runner) fleetRecord(out outcome, res *child.Result) *lockrun.RunRecord {
	rec := &lockrun.RunRecord{RunID: r.runID, Node: r.o.Node, Status: out.Status, Exit: out.Code,
		Signal: out.Signal, Tick: r.tick, Tries: max(r.row.Try, 1), Error: out.Message, CmdHash: cmdHash(r.o.Command),
		Version: r.o.Version, Grace: r.o.Jitter + r.o.StartDeadline, TakeoverOf: r.takeoverOf,
		Hung: res != nil && res.Hung && out.Status == runstatus.Timeout}
	if r.attempt > 1 { // the first attempt's entry stays as it always was
		rec.Attempt = r.attempt
	}
	if res != nil && res.Started {
		rec.Duration = res.Duration
	}
	if cp, ok := r.ckpt.fleetPrefix(); ok {
		rec.Checkpoint = append([]byte{}, cp...) // a non-nil slice: an empty value is a value
	}
	return rec
}

// fleetWriter is a backend with a fleet record that takes entries of runs without a lock.
type fleetWriter interface {
	RecordRun(ctx context.Context, key string, rec *lockrun.RunRecord) error
}

// recordFleetNoLock writes the entry of a run that never held the lock (missed, error):
// a round trip of its own, off the success path. Its row is already recorded.
func (r *runner) recordFleetNoLock() {
	fw, ok := r.locker.(fleetWriter)
	if !ok || r.row == nil {
		return
	}
	rec := &lockrun.RunRecord{RunID: r.runID, Node: r.o.Node, Status: r.row.Status, Tick: r.tick,
		Tries: max(r.row.Try, 1), Error: r.row.Error, Version: r.o.Version, CmdHash: cmdHash(r.o.Command),
		Grace: r.o.Jitter + r.o.StartDeadline}
	if r.row.Exit != nil {
		rec.Exit = *r.row.Exit
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.o.OpTimeout)
	defer cancel()
	r.fleetFailed(fw.RecordRun(ctx, r.o.Key, rec))
}

// fleetFailed warns that the run is missing from the fleet's record; the run's outcome
// stays as it is. Rate-limited like the history's warning: a full Redis would have every
// run of every job say it.
func (r *runner) fleetFailed(err error) {
	if errors.Is(err, lockrun.ErrUnacknowledged) && r.pendingKept {
		// It is in the record on the master; only its replicas are unconfirmed, which
		// the run's own lines already say. The next run sends it again, to be sure.
		return
	}
	if err == nil || r.o.Quiet || !r.shouldWarn("fleet", r.row.Backend, err) {
		return
	}
	if r.pendingKept {
		r.infof("warning: %v; the run's end is not in the fleet's record yet (cronlock history --fleet): this host's next run of %s sends it, its outcome is unchanged%s", err, r.o.Key, r.repeatNote())
		return
	}
	r.infof("warning: %v; the run is not in the fleet's record (cronlock history --fleet), its outcome is unchanged%s", err, r.repeatNote())
}
