package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

var _ lockrun.JobReader = (*Locker)(nil)

// jobsTxnKeys is how many keys one transaction of JobStates reads: four reads each,
// within etcd's default --max-txn-ops of 128.
const jobsTxnKeys = 32

// JobKeys returns the keys that have a lock, a tick record or an entry: a range read
// over cronlock's prefix, keys only (FleetKeys). etcd holds nothing but what it is
// given, so this is never a walk of others' data: scanned is false.
func (l *Locker) JobKeys(ctx context.Context, scan bool) ([]string, bool, error) {
	keys, err := l.FleetKeys(ctx)
	return keys, false, err
}

// JobStates reads keys' records, jobsTxnKeys keys per transaction (one operation
// time-out each): every kept entry (etcd keeps no per-day counters, so the rate is
// counted from them), the tick record, the lock and the standby slots (Standbys counts
// those taken: on a standby's lease, or an older cronlock's not yet expired).
func (l *Locker) JobStates(ctx context.Context, keys []string, now time.Time) ([]lockrun.KeyState, error) {
	out := make([]lockrun.KeyState, 0, len(keys))
	for i := 0; i < len(keys); i += jobsTxnKeys {
		batch := keys[i:min(i+jobsTxnKeys, len(keys))]
		ops := make([]clientv3.Op, 0, 4*len(batch))
		for _, k := range batch {
			ops = append(ops, clientv3.OpGet(l.runsDir(k), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)),
				clientv3.OpGet(l.tickKey(k)), clientv3.OpGet(l.lockKey(k)), clientv3.OpGet(l.standbyDir(k), clientv3.WithPrefix()))
		}
		var resp *clientv3.TxnResponse
		err := l.op(ctx, "read the fleet's records", func(ctx context.Context, c *clientv3.Client) (err error) {
			resp, err = c.Txn(ctx).Then(ops...).Commit()
			return err
		})
		if err != nil {
			return nil, err
		}
		for j, k := range batch {
			es, tv := l.keyRecord(k, &clientv3.TxnResponse{Responses: resp.Responses[4*j : 4*j+3]}, 0)
			st := lockrun.KeyState{Key: k, Recent: es,
				Standbys: liveSlots(resp.Responses[4*j+3].GetResponseRange().Kvs, now.UnixMicro())}
			if tv.TickUS != "" {
				st.Tick = tv.Record()
			}
			out = append(out, st)
		}
	}
	return out, nil
}
