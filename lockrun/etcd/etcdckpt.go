package etcd

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

var (
	_ lockrun.CheckpointLease = (*etcdLease)(nil)
	_ lockrun.CheckpointStore = (*Locker)(nil)
)

// A key's checkpoints are two keys, <prefix>{KEY}:ckpt (the newest) and :ckpt:ok (the
// newest of a succeeded run), each a JSON record with its value. They carry no lease: an
// etcd lease of 400 days would cost every save a Grant; they stay until reset.

func (l *Locker) ckptKey(key string) string   { return l.prefix + "{" + key + "}:ckpt" }
func (l *Locker) ckptOKKey(key string) string { return l.prefix + "{" + key + "}:ckpt:ok" }

// etcdCkpt is a checkpoint key's value.
type etcdCkpt struct {
	lockrun.Checkpoint
	V []byte `json:"value"`
}

// mine compares the lock key with this lease: the key it created, on its lease.
func (s *etcdLease) mine() []clientv3.Cmp {
	lockKey := s.l.lockKey(s.key)
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lockKey), "=", s.fence),
		clientv3.Compare(clientv3.LeaseValue(lockKey), "=", s.id)}
}

// SaveCheckpoint writes c in one transaction that first compares the lock key's create
// revision and lease with this lease's.
func (s *etcdLease) SaveCheckpoint(ctx context.Context, c *lockrun.Checkpoint) error {
	if len(c.Value) > lockrun.MaxCheckpoint {
		return fmt.Errorf("save checkpoint of %s: %d bytes, more than the %d allowed", s.key, len(c.Value), lockrun.MaxCheckpoint)
	}
	c.Token = uint64(s.fence)
	c.Saved = s.wall().UTC()
	b, err := json.Marshal(etcdCkpt{Checkpoint: *c, V: c.Value})
	if err != nil {
		return err
	}
	var resp *clientv3.TxnResponse
	if err := s.l.op(ctx, "save checkpoint of "+s.key, func(ctx context.Context, cl *clientv3.Client) (err error) {
		resp, err = cl.Txn(ctx).If(s.mine()...).Then(clientv3.OpPut(s.l.ckptKey(s.key), string(b))).Commit()
		return err
	}); err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("save checkpoint of %s: the lock is no longer this run's (it expired, was unlocked or taken over): %w", s.key, lockrun.ErrLockLost)
	}
	return nil
}

// MarkCheckpointSucceeded copies the newest checkpoint, when it is of scope, to the
// succeeded run's key, in a transaction fenced like a save (and on the newest not having
// changed since it was read).
func (s *etcdLease) MarkCheckpointSucceeded(ctx context.Context, scope string) error {
	kv, c, err := s.l.getCkpt(ctx, s.key, s.l.ckptKey(s.key))
	if err != nil || c == nil || c.Scope != scope {
		return err
	}
	var resp *clientv3.TxnResponse
	if err := s.l.op(ctx, "mark checkpoint of "+s.key, func(ctx context.Context, cl *clientv3.Client) (err error) {
		cmp := append(s.mine(), clientv3.Compare(clientv3.ModRevision(s.l.ckptKey(s.key)), "=", kv.ModRevision))
		resp, err = cl.Txn(ctx).If(cmp...).Then(clientv3.OpPut(s.l.ckptOKKey(s.key), string(kv.Value))).Commit()
		return err
	}); err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("mark checkpoint of %s: %w", s.key, lockrun.ErrLockLost)
	}
	return nil
}

// LoadCheckpoint reads the newest checkpoint of scope, or of a succeeded run.
func (s *etcdLease) LoadCheckpoint(ctx context.Context, scope string, lastSuccess bool) (*lockrun.Checkpoint, error) {
	if lastSuccess {
		_, c, err := s.l.getCkpt(ctx, s.key, s.l.ckptOKKey(s.key))
		return c, err
	}
	_, c, err := s.l.getCkpt(ctx, s.key, s.l.ckptKey(s.key))
	if err != nil || c == nil || c.Scope != scope {
		return nil, err
	}
	return c, nil
}

// getCkpt reads one checkpoint key; nils when it is missing.
func (l *Locker) getCkpt(ctx context.Context, key, name string) (*mvccKV, *lockrun.Checkpoint, error) {
	var resp *clientv3.GetResponse
	if err := l.op(ctx, "read checkpoint of "+key, func(ctx context.Context, cl *clientv3.Client) (err error) {
		resp, err = cl.Get(ctx, name)
		return err
	}); err != nil {
		return nil, nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, nil
	}
	var f etcdCkpt
	if err := json.Unmarshal(resp.Kvs[0].Value, &f); err != nil {
		return nil, nil, fmt.Errorf("checkpoint of %s is unreadable (%v); remove it with cronlock checkpoint reset", key, err)
	}
	c := f.Checkpoint
	c.Value = f.V
	if c.Value == nil {
		c.Value = []byte{}
	}
	return resp.Kvs[0], &c, nil
}

// Checkpoints returns key's newest checkpoint and the newest of a succeeded run.
func (l *Locker) Checkpoints(ctx context.Context, key string) (last, success *lockrun.Checkpoint, err error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, nil, err
	}
	if _, last, err = l.getCkpt(ctx, key, l.ckptKey(key)); err != nil {
		return nil, nil, err
	}
	if _, success, err = l.getCkpt(ctx, key, l.ckptOKKey(key)); err != nil {
		return nil, nil, err
	}
	return last, success, nil
}

// ResetCheckpoints deletes key's checkpoints; unless force, not while its lock is held.
func (l *Locker) ResetCheckpoints(ctx context.Context, key string, force bool) (int, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return 0, err
	}
	if err := lockrun.RefuseWhileHeld(ctx, l, key, force); err != nil {
		return 0, err
	}
	n := 0
	for _, name := range []string{l.ckptKey(key), l.ckptOKKey(key)} {
		var resp *clientv3.DeleteResponse
		if err := l.op(ctx, "reset checkpoints of "+key, func(ctx context.Context, cl *clientv3.Client) (err error) {
			resp, err = cl.Delete(ctx, name)
			return err
		}); err != nil {
			return n, err
		}
		n += int(resp.Deleted)
	}
	return n, nil
}
