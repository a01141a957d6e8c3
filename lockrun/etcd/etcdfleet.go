package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
)

// The fleet's record on etcd is one key per run, <prefix>{KEY}:runs/<RUN>, rather than
// one key holding a list: etcd keeps every version of a key until compaction, so a list
// rewritten by each run would store the whole list again per run. An entry's write
// travels in the release's transaction, which also counts the entries; past FleetKeep
// plus a tenth, the oldest are deleted down to FleetKeep (two round trips, once every
// FleetKeep/10 runs). Entries do not expire: a retired job's record stays until deleted
// (etcdctl del --prefix '<prefix>{KEY}:runs/').

// entryTail closes an entry EncodeFleetEntry began, with the fields the scripts add on Redis.
func entryTail(startUS, endUS int64, skips int) string {
	return fmt.Sprintf(`,"a":%d,"f":%d,"k":%d}`, startUS, endUS, skips)
}

var entrySkips = regexp.MustCompile(`,"k":\d+}$`)

func (l *Locker) fleetKeep() int {
	if l.o.FleetKeep > 0 {
		return l.o.FleetKeep
	}
	return lockrun.DefaultFleetKeep
}

// RecordRun adds rec to key's record for a run that never held the lock (missed, error):
// one round trip (more when the record is due for trimming).
func (l *Locker) RecordRun(ctx context.Context, key string, rec *lockrun.RunRecord) error {
	if lockrun.ValidKey(key) != nil {
		return nil
	}
	now := time.Now().UnixMicro()
	return l.putEntry(ctx, key, rec, 0, now, now, 0)
}

// putEntry writes one entry, with its count and the tick record read in the same call.
// endRev is the revision of the run's release (0: none, or this write is the release).
func (l *Locker) putEntry(ctx context.Context, key string, rec *lockrun.RunRecord, fence uint64, startUS, endUS, endRev int64) error {
	entryKey := l.runsDir(key) + rec.RunID
	rf := ""
	if endRev > 0 {
		rf = `,"rf":` + strconv.FormatInt(endRev, 10)
	}
	var resp *clientv3.TxnResponse
	err := l.op(ctx, "record the run of "+key+" in the fleet's record", func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Txn(ctx).Then(clientv3.OpPut(entryKey, lockrun.EncodeFleetEntry(rec, fence)+rf+entryTail(startUS, endUS, 0)),
			clientv3.OpGet(l.runsDir(key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(l.tickKey(key))).Commit()
		return err
	})
	if err != nil {
		return err
	}
	l.afterEntry(ctx, key, entryKey, rec.RunID, resp, 1, resp.Header.Revision)
	return nil
}

// afterEntry follows an entry's write: the responses at off and off+1 are the record's
// count and the tick record. It copies the tick's skip count into the entry when the tick
// is this run's, and trims the record when it has grown past its bound. Best effort.
func (l *Locker) afterEntry(ctx context.Context, key, entryKey, runID string, resp *clientv3.TxnResponse, off int, rev int64) {
	if off < 0 || off+1 >= len(resp.Responses) {
		return
	}
	if kv := firstKV(resp, off+1); kv != nil {
		var tr lockrun.TickValue
		if json.Unmarshal(kv.Value, &tr) == nil && tr.RunID == runID && tr.Skips > 0 {
			l.setEntrySkips(ctx, entryKey, nil, rev, tr.Skips)
		}
	}
	r := resp.Responses[off].GetResponseRange()
	keep := int64(l.fleetKeep())
	if r == nil || r.Count <= keep+max(keep/10, 1)-1 {
		return
	}
	dir := l.runsDir(key)
	l.op(ctx, "trim the fleet's record of "+key, func(ctx context.Context, c *clientv3.Client) error {
		old, err := c.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(r.Count-keep))
		if err != nil || len(old.Kvs) == 0 {
			return err
		}
		last := string(old.Kvs[len(old.Kvs)-1].Key)
		_, err = c.Delete(ctx, string(old.Kvs[0].Key), clientv3.WithRange(last+"\x00"))
		return err
	})
}

// setEntrySkips rewrites an entry's skip count if the entry is still at revision rev
// (value nil: read it first).
func (l *Locker) setEntrySkips(ctx context.Context, entryKey string, value []byte, rev int64, skips int) {
	l.op(ctx, "count a skip", func(ctx context.Context, c *clientv3.Client) error {
		if value == nil {
			resp, err := c.Get(ctx, entryKey)
			if err != nil || len(resp.Kvs) == 0 {
				return err
			}
			value, rev = resp.Kvs[0].Value, resp.Kvs[0].ModRevision
		}
		v := entrySkips.ReplaceAllString(string(value), `,"k":`+strconv.Itoa(skips)+`}`)
		_, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(entryKey), "=", rev)).
			Then(clientv3.OpPut(entryKey, v)).Commit()
		return err
	})
}

// Fleet returns key's newest runs across the fleet, newest first, at most limit (0 = all
// kept), in one round trip, as the Redis backend's Fleet does.
func (l *Locker) Fleet(ctx context.Context, key string, limit int) ([]lockrun.FleetEntry, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	out, err := l.FleetAll(ctx, []string{key}, limit)
	if err != nil {
		return nil, err
	}
	return out[key], nil
}

// FleetAll is Fleet for several keys, one round trip per key.
func (l *Locker) FleetAll(ctx context.Context, keys []string, limit int) (map[string][]lockrun.FleetEntry, error) {
	out := make(map[string][]lockrun.FleetEntry, len(keys))
	for _, k := range keys {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
		if limit > 0 {
			opts = append(opts, clientv3.WithLimit(int64(limit)))
		}
		var resp *clientv3.TxnResponse
		err := l.op(ctx, "read the fleet's record of "+k, func(ctx context.Context, c *clientv3.Client) (err error) {
			resp, err = c.Txn(ctx).Then(clientv3.OpGet(l.runsDir(k), opts...), clientv3.OpGet(l.tickKey(k)),
				clientv3.OpGet(l.lockKey(k))).Commit()
			return err
		})
		if err != nil {
			return nil, err
		}
		var tr lockrun.TickValue
		tickV := ""
		if kv := firstKV(resp, 1); kv != nil {
			tickV = string(kv.Value)
			json.Unmarshal(kv.Value, &tr)
		}
		var es []lockrun.FleetEntry
		ids := map[string]bool{}
		endRev := map[string]int64{}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			var e lockrun.FleetEntry
			var rf struct {
				Rev int64 `json:"rf"`
			}
			if json.Unmarshal(kv.Value, &e) != nil || json.Unmarshal(kv.Value, &rf) != nil {
				continue
			}
			// The release wrote the entry in its own transaction, unless it says otherwise.
			endRev[e.RunID] = cmp.Or(rf.Rev, kv.CreateRevision)
			e.Key = k
			if e.RunID == tr.RunID && !tr.Missed {
				e.Skips = max(e.Skips, tr.Skips)
			}
			ids[e.RunID] = true
			es = append(es, e)
		}
		if e, ok := lockrun.PendingEntry(k, l.redisStyleLock(firstKV(resp, 2)), tickV, ids); ok {
			es = append([]lockrun.FleetEntry{e}, es...)
		}
		sort.SliceStable(es, func(a, b int) bool { return es[a].StartUS > es[b].StartUS })
		if limit > 0 && len(es) > limit {
			es = es[:limit]
		}
		markByRevision(es, endRev)
		out[k] = es
	}
	return out, nil
}

// markByRevision is MarkDuplicates with each run's hold of the lock measured in revisions,
// from its lock key's creation (the fencing token) to its release, instead of the hosts'
// clocks, which etcd cannot correct: revisions are one order across the cluster, so two
// holds overlap in them only if they really overlapped.
func markByRevision(es []lockrun.FleetEntry, endRev map[string]int64) {
	revs := make([]lockrun.FleetEntry, len(es))
	for i, e := range es {
		e.StartUS, e.EndUS = 0, 0 // a run without a token is judged by its tick alone
		if e.Fence > 0 {
			e.StartUS, e.EndUS = int64(e.Fence), endRev[e.RunID]
		}
		revs[i] = e
	}
	lockrun.MarkDuplicates(revs)
	for i := range es {
		es[i].Duplicate = revs[i].Duplicate
	}
}

// redisStyleLock is the lock's value in the Redis backend's shape, which PendingEntry reads.
func (l *Locker) redisStyleLock(kv *mvccKV) string {
	if kv == nil {
		return ""
	}
	var h etcdHolder
	if json.Unmarshal(kv.Value, &h) != nil {
		return ""
	}
	v := lockrun.HolderValue{Fence: strconv.FormatInt(kv.CreateRevision, 10), Node: h.Node, PID: h.PID, RunID: h.RunID,
		AcquiredUS: strconv.FormatInt(h.AcquiredUS, 10)}
	if h.ReleasedUS > 0 {
		v.ReleasedUS = strconv.FormatInt(h.ReleasedUS, 10)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// FleetKeys returns the keys that have a fleet record.
func (l *Locker) FleetKeys(ctx context.Context) ([]string, error) {
	return l.walk(ctx, "runs", "list the fleet's records")
}

// TickRecord reads the tick record of key, or nil, nil when no tick was ever claimed.
func (l *Locker) TickRecord(ctx context.Context, key string) (*lockrun.TickRecord, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	var resp *clientv3.GetResponse
	err := l.op(ctx, "read the tick record of "+key, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.Get(ctx, l.tickKey(key))
		return err
	})
	if err != nil {
		return nil, err
	}
	var tr lockrun.TickValue
	if len(resp.Kvs) == 0 || json.Unmarshal(resp.Kvs[0].Value, &tr) != nil {
		return nil, nil
	}
	return tr.Record(), nil
}

// walk returns, sorted, the KEYs that have a <prefix>{KEY}:kind key, paging through the
// prefix with keys-only reads and jumping over each key's run entries.
func (l *Locker) walk(ctx context.Context, kind, what string) ([]string, error) {
	base := l.prefix + "{"
	end := clientv3.GetPrefixRangeEnd(base)
	from := base
	var names []string
	for {
		var resp *clientv3.GetResponse
		err := l.op(ctx, what, func(ctx context.Context, c *clientv3.Client) (err error) {
			resp, err = c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(500),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
			return err
		})
		if err != nil {
			return nil, err
		}
		next := ""
		for _, kv := range resp.Kvs {
			name, k, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), base), "}:")
			if !ok || lockrun.ValidKey(name) != nil {
				continue
			}
			if strings.HasPrefix(k, "runs/") {
				if kind == "runs" {
					names = append(names, name)
				}
				next = base + name + "}:runs0" // past every entry of name ('0' follows '/')
				break
			}
			if k == kind {
				names = append(names, name)
			}
		}
		switch {
		case next != "":
			from = next
		case resp.More && len(resp.Kvs) > 0:
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		default:
			sort.Strings(names)
			return names, nil
		}
	}
}

// Inspect returns the holder of key, or nil when it is free.
func (l *Locker) Inspect(ctx context.Context, key string) (*lockrun.Holder, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	hs, err := l.holders(ctx, []string{key})
	if err != nil {
		return nil, err
	}
	if h, ok := hs[key]; ok {
		return &h, nil
	}
	return nil, nil
}

// List returns every lock held right now under the prefix, by key.
func (l *Locker) List(ctx context.Context) (map[string]lockrun.Holder, error) {
	names, err := l.walk(ctx, "lock", "list locks")
	if err != nil {
		return nil, err
	}
	return l.holders(ctx, names)
}

// holders reads the locks of names, with the time their leases have left.
func (l *Locker) holders(ctx context.Context, names []string) (map[string]lockrun.Holder, error) {
	out := map[string]lockrun.Holder{}
	for _, n := range names {
		err := l.op(ctx, "read lock "+n, func(ctx context.Context, c *clientv3.Client) error {
			resp, err := c.Get(ctx, l.lockKey(n))
			if err != nil || len(resp.Kvs) == 0 {
				return err
			}
			kv := resp.Kvs[0]
			h := holderOf(kv.Value, kv.CreateRevision)
			if ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL > 0 {
				h.TTLLeft = time.Duration(ttl.TTL) * time.Second
			}
			out[n] = *h
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Unlock removes key whatever its holder and returns the holder it removed (nil, nil when
// the key is free). Without force it refuses every lock but one kept for --min-hold after
// its release: a key lives only while its holder keeps its lease alive, so any other lock
// has a holder that renewed it within its TTL (a value cronlock did not write is refused
// too, as on Redis).
func (l *Locker) Unlock(ctx context.Context, key string, force bool) (*lockrun.Holder, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	var h *lockrun.Holder
	var refused, leaseless bool
	err := l.op(ctx, "unlock "+key, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.Get(ctx, l.lockKey(key))
		if err != nil || len(resp.Kvs) == 0 {
			return err
		}
		kv := resp.Kvs[0]
		h = holderOf(kv.Value, kv.CreateRevision)
		var v etcdHolder
		if !force && (json.Unmarshal(kv.Value, &v) != nil || v.ReleasedUS == 0) {
			refused, leaseless = true, kv.Lease == 0
			return nil
		}
		d, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(l.lockKey(key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(l.lockKey(key))).Commit()
		if err == nil && !d.Succeeded {
			h = nil // released and perhaps taken again meanwhile: nothing of what was read is left
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if refused && leaseless {
		return nil, fmt.Errorf("%s is held by %s, a key with no lease: it never goes by itself, and every run of %s is skipped until it does (cronlock writes its locks with a lease; something else wrote this one); find what wrote it, or use --force to remove it", key, h, key)
	}
	if refused {
		return nil, fmt.Errorf("%s is held by %s, whose lease is alive (its holder renewed it within its TTL): it looks alive; stop that run, or use --force to remove the lock anyway", key, h)
	}
	return h, nil
}
