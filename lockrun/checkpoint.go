package lockrun

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// MaxCheckpoint is the largest checkpoint value a backend stores: a checkpoint is a
// job's position (a customer id, a page token, an offset), not its data, and every save
// is one backend write under the lock.
const MaxCheckpoint = 64 << 10

// CheckpointKeep is how long a key's checkpoints are kept after their last save: the
// fleet record's 400 days, so an incremental job that runs once a year still finds its
// --last-success high-water mark.
const CheckpointKeep = 400 * 24 * time.Hour

// Checkpoint is one saved position of a job. A backend keeps two per key: the newest
// saved by any run (whose Scope says which tick or run it belongs to), and the newest of
// a run that succeeded.
type Checkpoint struct {
	Value []byte `json:"-"`
	// Scope is the tick the value belongs to (RFC 3339, with --schedule), or the run id
	// of a run without a tick: a load finds a value only within its own scope.
	Scope       string    `json:"scope"`
	RunID       string    `json:"run_id"`
	Node        string    `json:"node"`
	TickAttempt int       `json:"tick_attempt"`
	Try         int       `json:"try"`
	Token       uint64    `json:"fencing_token"`
	Saved       time.Time `json:"saved_at"` // the backend's clock where it has one
}

// EncodeMeta is the checkpoint's record without its value, as backends store it beside
// the value.
func (c *Checkpoint) EncodeMeta() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// DecodeCheckpoint rebuilds a checkpoint from its value and EncodeMeta's record.
func DecodeCheckpoint(value []byte, meta string) (*Checkpoint, error) {
	c := &Checkpoint{}
	if err := json.Unmarshal([]byte(meta), c); err != nil {
		return nil, fmt.Errorf("checkpoint record is unreadable: %w", err)
	}
	c.Value = value
	return c, nil
}

// CheckpointLease is a Lease whose backend stores checkpoints fenced by the lease: a
// save is written only while the lock still holds this lease's token, checked in the
// same script, transaction or under the same flock as the write.
type CheckpointLease interface {
	// SaveCheckpoint stores c (Token and Saved are filled in) as the key's newest. It
	// returns an error wrapping ErrLockLost, having written nothing, when the lock is no
	// longer this lease's; any other error leaves the outcome unknown.
	SaveCheckpoint(ctx context.Context, c *Checkpoint) error
	// LoadCheckpoint returns the key's newest checkpoint when its Scope is scope, or with
	// lastSuccess the newest of a succeeded run whatever its scope; nil, nil when none.
	LoadCheckpoint(ctx context.Context, scope string, lastSuccess bool) (*Checkpoint, error)
	// MarkCheckpointSucceeded records the key's newest checkpoint, when it is of scope,
	// as the newest of a succeeded run; fenced like a save. Called before the release of
	// a run that succeeded and used checkpoints.
	MarkCheckpointSucceeded(ctx context.Context, scope string) error
}

// CheckpointStore is a Locker that reads and deletes a key's checkpoints outside a run
// (cronlock checkpoint show, reset).
type CheckpointStore interface {
	// Checkpoints returns key's newest checkpoint and the newest of a succeeded run;
	// nil for either when there is none.
	Checkpoints(ctx context.Context, key string) (last, success *Checkpoint, err error)
	// ResetCheckpoints deletes key's checkpoints and says how many records went. Unless
	// force, it refuses with *HeldError while the key's lock is held: the running job
	// would save again, or load nothing and start over.
	ResetCheckpoints(ctx context.Context, key string, force bool) (int, error)
}

// RefuseWhileHeld is ResetCheckpoints' refusal for a backend that cannot check the lock
// in the same step as the delete (etcd, local): a *HeldError while key's lock is held,
// unless force. Redis checks it inside its reset script.
func RefuseWhileHeld(ctx context.Context, l interface {
	Inspect(ctx context.Context, key string) (*Holder, error)
}, key string, force bool) error {
	if force {
		return nil
	}
	h, err := l.Inspect(ctx, key)
	if err != nil {
		return err
	}
	if h != nil {
		return &HeldError{Key: key, Holder: h}
	}
	return nil
}
