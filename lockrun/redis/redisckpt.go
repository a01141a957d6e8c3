package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"cronlock/lockrun"
)

var (
	_ lockrun.CheckpointLease = (*redisLease)(nil)
	_ lockrun.CheckpointStore = (*Locker)(nil)
)

// A key keeps one newest checkpoint, whatever its scope, and the newest of a succeeded
// run: a tick's runs follow one another under the lock, so the newest is the only one a
// load (of the running tick, or the running run's tries) can ask for, and a key's
// checkpoints stay two records however many ticks it runs.

func (l *Locker) ckptKey(key string) string   { return l.prefix + "{" + key + "}:ckpt" }
func (l *Locker) ckptOKKey(key string) string { return l.prefix + "{" + key + "}:ckpt:ok" }

func (l *Locker) ckptKeys(key string) []string {
	return []string{l.lockKey(key), l.ckptKey(key), l.ckptOKKey(key)}
}

// SaveCheckpoint writes c as the key's newest checkpoint in one script that first checks
// the lock still holds this lease's token; with --min-replicas the replicas acknowledge
// it like a renewal, and one that they do not is an error (it may be lost in a failover).
func (s *redisLease) SaveCheckpoint(ctx context.Context, c *lockrun.Checkpoint) error {
	if len(c.Value) > lockrun.MaxCheckpoint {
		return fmt.Errorf("save checkpoint of %s: %d bytes, more than the %d allowed", s.key, len(c.Value), lockrun.MaxCheckpoint)
	}
	c.Token = s.fence
	res, acks, _, err := s.l.evalAcked(ctx, false, ckptScript(), s.l.ckptKeys(s.key),
		"save", s.token, c.Value, c.EncodeMeta(), c.Scope, durMS(lockrun.CheckpointKeep))
	if err != nil {
		return s.l.userError("save checkpoint of "+s.key, err)
	}
	r, _ := res.([]any)
	if len(r) == 0 {
		return fmt.Errorf("save checkpoint of %s: unexpected reply %v", s.key, res)
	}
	if n, _ := r[0].(int64); n != 1 {
		return fmt.Errorf("save checkpoint of %s: the lock is no longer this run's (it expired, was unlocked or taken over): %w", s.key, lockrun.ErrLockLost)
	}
	if len(r) > 1 {
		c.Saved = usTime(r[1])
	}
	if l := s.l; l.minReplicas > 0 && acks.n < int64(l.minReplicas) {
		return fmt.Errorf("save checkpoint of %s: only %d of %d replicas acknowledged it within %s on %s, so a failover may lose it (check the replicas: INFO replication on the master)",
			s.key, max(acks.n, 0), l.minReplicas, acks.within.Round(time.Millisecond), l.target.Server())
	}
	return nil
}

// MarkCheckpointSucceeded copies the newest checkpoint, when it is of scope, to the
// succeeded run's record, fenced like a save.
func (s *redisLease) MarkCheckpointSucceeded(ctx context.Context, scope string) error {
	res, _, _, err := s.l.evalAcked(ctx, false, ckptScript(), s.l.ckptKeys(s.key),
		"mark", s.token, scope, durMS(lockrun.CheckpointKeep))
	if err != nil {
		return s.l.userError("mark checkpoint of "+s.key, err)
	}
	if n, _ := res.(int64); n == 0 {
		return fmt.Errorf("mark checkpoint of %s: %w", s.key, lockrun.ErrLockLost)
	}
	return nil
}

// LoadCheckpoint reads the newest checkpoint of scope, or of a succeeded run.
func (s *redisLease) LoadCheckpoint(ctx context.Context, scope string, lastSuccess bool) (*lockrun.Checkpoint, error) {
	last, ok, err := s.l.readCheckpoints(ctx, s.key)
	if err != nil {
		return nil, err
	}
	if lastSuccess {
		return ok, nil
	}
	if last == nil || last.Scope != scope {
		return nil, nil
	}
	return last, nil
}

// Checkpoints returns key's newest checkpoint and the newest of a succeeded run.
func (l *Locker) Checkpoints(ctx context.Context, key string) (last, success *lockrun.Checkpoint, err error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, nil, err
	}
	return l.readCheckpoints(ctx, key)
}

func (l *Locker) readCheckpoints(ctx context.Context, key string) (last, success *lockrun.Checkpoint, err error) {
	res, _, err := l.eval(ctx, ckptScript(), l.ckptKeys(key), "read")
	if err != nil {
		return nil, nil, l.userError("read checkpoint of "+key, err)
	}
	r, _ := res.([]any)
	for len(r) < 7 {
		r = append(r, nil)
	}
	if last, err = decodeCkpt(r[0], r[1], r[2]); err != nil {
		return nil, nil, fmt.Errorf("read checkpoint of %s: %w", key, err)
	}
	if last != nil {
		if sc, _ := r[3].(string); sc != "" {
			last.Scope = sc
		}
	}
	if success, err = decodeCkpt(r[4], r[5], r[6]); err != nil {
		return nil, nil, fmt.Errorf("read checkpoint of %s: %w", key, err)
	}
	return last, success, nil
}

// decodeCkpt builds a checkpoint from its hash fields; nil when the record is missing.
func decodeCkpt(v, m, us any) (*lockrun.Checkpoint, error) {
	vs, ok := v.(string)
	if !ok {
		return nil, nil
	}
	ms, _ := m.(string)
	c, err := lockrun.DecodeCheckpoint([]byte(vs), ms)
	if err != nil {
		return nil, err
	}
	if t := usTime(us); !t.IsZero() {
		c.Saved = t
	}
	return c, nil
}

// usTime reads a Redis time in µs; zero when it is none.
func usTime(v any) time.Time {
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}

// ResetCheckpoints deletes key's checkpoints; unless force, not while its lock is held.
func (l *Locker) ResetCheckpoints(ctx context.Context, key string, force bool) (int, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return 0, err
	}
	f := "0"
	if force {
		f = "1"
	}
	res, _, err := l.eval(ctx, ckptScript(), l.ckptKeys(key), "reset", f)
	if err != nil {
		return 0, l.userError("reset checkpoints of "+key, err)
	}
	r, _ := res.([]any)
	if len(r) == 0 {
		return 0, fmt.Errorf("reset checkpoints of %s: unexpected reply %v", key, res)
	}
	n, _ := r[0].(int64)
	if n < 0 {
		v, _ := r[1].(string)
		return 0, &lockrun.HeldError{Key: key, Holder: parseHolder(v, 0)}
	}
	return int(n), nil
}
