package jobrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cronlock/checkpoint"
	"cronlock/child"
	"cronlock/lockrun"
	"cronlock/settings"
)

// ckptRun is the run's side of the job's `cronlock checkpoint` commands: the socket
// (package checkpoint) and the handler that stores what the job saves with the run's
// own lease. It is nil-safe: a run whose socket could not be made runs without it.
type ckptRun struct {
	srv       *checkpoint.Server
	lease     lockrun.Lease
	keeper    *lockrun.Keeper
	opTimeout time.Duration
	scope     string // the tick (RFC 3339), or the run id without one
	key       string
	runID     string
	node      string
	attempt   int
	try       atomic.Int32
	beat      chan struct{} // an accepted save, for the heartbeat watch

	// onSave, when set, is told of each accepted save (on the socket's goroutine); it
	// must not block: the job waits for the save's answer.
	onSave func()

	mu       sync.Mutex
	rowID    string    // the history row of the current try
	last     []byte    // the try's last accepted value (nil: none yet)
	lastAt   time.Time // when it was accepted; zero = none
	runLast  []byte    // the run's last accepted value, any try: the ledger keeps its start
	runSaved bool
}

// FleetCheckpointBytes is how much of the run's last checkpoint its ledger entry keeps:
// enough to tell "batch 3" from "batch 4" across the fleet, little enough to keep the
// entry small. The history of the run's node has the whole value.
const FleetCheckpointBytes = 96

// saved notes value as accepted, and tells onSave.
func (c *ckptRun) saved(value []byte, at time.Time) {
	v := append([]byte{}, value...) // the socket's buffer is not ours
	c.mu.Lock()
	c.last, c.lastAt = v, at
	c.runLast, c.runSaved = v[:min(len(v), lockrun.FleetCheckpointBytes)], true
	c.mu.Unlock()
	if c.onSave != nil {
		c.onSave()
	}
}

// lastSaved is the last value the try of row rowID saved, if any (at zero: none).
func (c *ckptRun) lastSaved(rowID string) (value []byte, at time.Time) {
	if c == nil {
		return nil, time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rowID != rowID {
		return nil, time.Time{}
	}
	return c.last, c.lastAt
}

// current is the try's row and its last saved value, for the recorder's write.
func (c *ckptRun) current() (rowID string, value []byte, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rowID, c.last, c.lastAt
}

// fleetPrefix is the first lockrun.FleetCheckpointBytes of the run's last checkpoint; ok is
// false when the run saved none.
func (c *ckptRun) fleetPrefix() (prefix []byte, ok bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runLast, c.runSaved
}

// startCheckpoints opens the run's checkpoint socket: an abstract socket and a goroutine,
// no backend call, so a run whose job never asks costs nothing on the wire.
func (r *runner) startCheckpoints(lease lockrun.Lease, keeper *lockrun.Keeper) *ckptRun {
	c := &ckptRun{lease: lease, keeper: keeper, opTimeout: r.o.OpTimeout, key: r.o.Key,
		runID: r.runID, node: r.o.Node, attempt: max(r.attempt, 1), scope: r.runID}
	if !r.tick.IsZero() {
		c.scope = r.tick.UTC().Format(time.RFC3339)
	}
	c.try.Store(1)
	c.beat = make(chan struct{}, 1)
	if r.rec != nil {
		c.onSave = r.checkpointWriter(c)
	}
	srv, err := checkpoint.Listen(c, nil)
	if err != nil {
		r.verbosef("no checkpoint socket (%v): the job's cronlock checkpoint commands will fail", err)
		return nil
	}
	c.srv = srv
	r.ckptSeen.Store(c)
	return c
}

// forTry is env with the socket's name, for the job's try, whose history row is rowID.
func (c *ckptRun) forTry(env []string, try int, rowID string) []string {
	if c == nil {
		return env
	}
	c.try.Store(int32(max(try, 1)))
	c.mu.Lock()
	c.rowID, c.last, c.lastAt = rowID, nil, time.Time{}
	c.mu.Unlock()
	return append(env, settings.JobCheckpointSocket+"="+c.srv.Path())
}

// close removes the socket once the job's processes are gone, and reports whether the
// job used it.
func (c *ckptRun) close() (used bool) {
	if c == nil {
		return false
	}
	c.srv.Close()
	return c.srv.WasUsed()
}

// markCheckpoint records the tick's (or run's) newest checkpoint as a succeeded run's,
// for load --last-success: one backend call, only for a run that used checkpoints.
func (r *runner) markCheckpoint(c *ckptRun, used bool, res child.Result, end *outcome) {
	if c == nil || !used || end != nil || !res.Started || res.Reason != child.ReasonExited ||
		res.ExitCode != 0 || res.LossErr != nil {
		return
	}
	cl, ok := c.lease.(lockrun.CheckpointLease)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opTimeout)
	defer cancel()
	if err := cl.MarkCheckpointSucceeded(ctx, c.scope); err != nil {
		r.infof("could not mark %s's checkpoint as a succeeded run's (load --last-success will not return it): %v", c.key, err)
	}
}

// Save stores value for the run's scope, fenced by the lease: refused while the lease is
// in doubt (once a renewal that was merely due has had its chance: Keeper.Vouch), and by
// the backend when the lock is no longer this run's.
func (c *ckptRun) Save(ctx context.Context, value []byte) error {
	cl, ok := c.lease.(lockrun.CheckpointLease)
	if !ok {
		return errors.New("this backend does not store checkpoints")
	}
	left, doubt, never := c.keeper.Vouch(ctx, c.opTimeout)
	if never {
		return &checkpoint.RefusedError{Reason: fmt.Sprintf("checkpoint refused: --ttl %v is too short for checkpoints: a save needs min(--grace, ttl/4) + --redis-timeout (%v) of its lease left, more than a renewal leaves; give a longer --ttl or a shorter --redis-timeout", c.lease.TTL(), c.keeper.SaveNeeds(c.opTimeout))}
	}
	if doubt {
		return &checkpoint.RefusedError{Reason: fmt.Sprintf("checkpoint refused: the lease of %s is in doubt (%v left of it unconfirmed, less than a backend call and the stop's grace need): another host may run the job; stop", c.key, left.Round(time.Millisecond))}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opTimeout)
	defer cancel()
	cp := &lockrun.Checkpoint{Value: value, Scope: c.scope, RunID: c.runID, Node: c.node,
		TickAttempt: c.attempt, Try: int(c.try.Load())}
	err := cl.SaveCheckpoint(ctx, cp)
	if err == nil {
		c.saved(value, wallNow())
		select {
		case c.beat <- struct{}{}:
		default: // one pending beat says it all
		}
	}
	if errors.Is(err, lockrun.ErrLockLost) {
		return &checkpoint.RefusedError{Reason: fmt.Sprintf("checkpoint refused, nothing written: %v; another run may hold the lock: stop", err)}
	}
	return err
}

// Load returns the scope's newest checkpoint, or the newest of a succeeded run.
func (c *ckptRun) Load(ctx context.Context, lastSuccess bool) ([]byte, bool, error) {
	cl, ok := c.lease.(lockrun.CheckpointLease)
	if !ok {
		return nil, false, errors.New("this backend does not store checkpoints")
	}
	ctx, cancel := context.WithTimeout(ctx, c.opTimeout)
	defer cancel()
	cp, err := cl.LoadCheckpoint(ctx, c.scope, lastSuccess)
	if err != nil || cp == nil {
		return nil, false, err
	}
	return cp.Value, true, nil
}

// heartbeat watches one try for --heartbeat-timeout d: the channel is closed once d
// passes with no accepted save (from now, or the last one). stop ends the watch; with d
// 0 (or no socket) there is nothing to watch.
func (c *ckptRun) heartbeat(d time.Duration) (hung <-chan struct{}, stop func()) {
	if c == nil || d <= 0 {
		return nil, func() {}
	}
	h := make(chan struct{})
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-c.beat:
				t.Reset(d)
			case <-t.C:
				close(h)
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return h, func() { once.Do(func() { close(done) }) }
}
