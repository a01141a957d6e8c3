package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/lockrun"
	"cronlock/runstatus"
)

// The fleet's record on etcd is a ledger of one key per run, <prefix>{KEY}:runs/<RUN>,
// rather than one key holding a list: etcd keeps every version of a key until compaction,
// so a list rewritten by each run would store the whole list again per run. A run's entry
// is written by the transaction that claims the lock (status running) or its tick as
// missed, and completed by the release's transaction, which also counts the entries; no
// other run's claim rewrites it. Readers derive abandoned from a running entry whose run no
// longer holds the lock. Past FleetKeep plus a tenth, the oldest entries are deleted down
// to FleetKeep (two round trips, once every FleetKeep/10 runs), never a running entry nor
// the key's last success or last failure. Entries do not expire: a retired job's record
// stays until deleted (etcdctl del --prefix '<prefix>{KEY}:').

// entryTail closes an entry EncodeFleetEntry began, with the fields the scripts add on Redis.
func entryTail(startUS, endUS int64, skips int) string {
	return fmt.Sprintf(`,"a":%d,"f":%d,"k":%d}`, startUS, endUS, skips)
}

// maxEntryNode bounds the node name in an entry written at a claim (EncodeFleetEntry cuts
// the completed entry's to fit).
const maxEntryNode = 128

// claimEntry is the entry a claim writes in its own transaction: status running (the lock)
// or missed (the tick alone), the run's start on this host's clock, no exit yet. The
// fencing token of a running entry is the entry key's create revision, which is the lock
// key's: the transaction does not know it before it commits.
// It carries what the claim found (marks: a schedule change or flip, a data loss).
func claimEntry(req lockrun.Request, m claimMarks, status string, startUS, endUS int64) string {
	e := lockrun.FleetEntry{RunID: req.RunID, Node: strings.ToValidUTF8(req.Node[:min(len(req.Node), maxEntryNode)], ""),
		Status: status, Tries: 1, StartUS: startUS, EndUS: endUS, CmdHash: req.CmdHash,
		ScheduleWas: m.ScheduleWas, Flip: m.Flip, DataLoss: m.dataLoss}
	if req.Entry != nil {
		e.Version, e.CmdHash, e.GraceMS = req.Entry.Version, req.Entry.CmdHash, req.Entry.Grace.Milliseconds()
	}
	if !req.Tick.IsZero() {
		e.TickUS = req.Tick.UnixMicro()
	}
	b, _ := json.Marshal(e)
	return string(b)
}

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

// pendingOps are the puts that complete earlier runs' entries from their kept completions
// (lockrun.PendingCompletion). An entry already completed is written again with the same
// outcome, which is harmless. Its hold is recorded as ending where it began ("rf" = its
// fencing token): the revision of its release is unknown (it never came), so readers judge
// it a duplicate by its tick alone, as they judge an abandoned run, rather than by a hold
// stretched to this late write.
func (l *Locker) pendingOps(key string, ps []lockrun.PendingCompletion) []clientv3.Op {
	var ops []clientv3.Op
	for _, p := range ps {
		if p.RunID == "" || strings.ContainsAny(p.RunID, "/\x00") {
			continue
		}
		var e struct {
			Fence int64 `json:"fe"`
		}
		if json.Unmarshal([]byte(p.Entry+"}"), &e) != nil {
			continue // not an entry this build wrote: dropped rather than stored broken
		}
		end, err := strconv.ParseInt(p.EndUS, 10, 64)
		if err != nil {
			end = time.Now().UnixMicro()
		}
		start, err := strconv.ParseInt(p.StartUS, 10, 64)
		if err != nil || start <= 0 {
			start = end
		}
		rf := ""
		if e.Fence > 0 {
			rf = `,"rf":` + strconv.FormatInt(e.Fence, 10)
		}
		ops = append(ops, clientv3.OpPut(l.runsDir(key)+p.RunID, p.Entry+rf+entryTail(start, end, 0)))
	}
	return ops
}

// SendPending completes earlier runs' entries from their kept completions in one
// transaction of its own: for a run that read them too late for its release.
func (l *Locker) SendPending(ctx context.Context, key string, ps []lockrun.PendingCompletion) error {
	if err := lockrun.ValidKey(key); err != nil {
		return err
	}
	ops := l.pendingOps(key, ps)
	if len(ops) == 0 {
		return nil
	}
	return l.op(ctx, "complete earlier runs of "+key+" in the fleet's record", func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.Txn(ctx).Then(ops...).Commit()
		return err
	})
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
	l.trim(ctx, key)
}

// trim deletes key's oldest entries down to FleetKeep, sparing the entry of the run that
// holds the lock and the key's last success and last failure: a record that keeps only
// failures must still say when the job last worked, and a run must never vanish while it
// runs. Best effort: a record changed between the read and the delete is trimmed by a
// later run instead.
func (l *Locker) trim(ctx context.Context, key string) {
	dir := l.runsDir(key)
	l.op(ctx, "trim the fleet's record of "+key, func(ctx context.Context, c *clientv3.Client) error {
		read, err := c.Txn(ctx).Then(clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
			clientv3.OpGet(l.lockKey(key))).Commit()
		if err != nil {
			return err
		}
		kvs := read.Responses[0].GetResponseRange().Kvs
		holder := ""
		if kv := firstKV(read, 1); kv != nil {
			holder = holderOf(kv.Value, kv.CreateRevision).RunID
		}
		spare := make([]bool, len(kvs))
		lastOK, lastBad := -1, -1
		for i, kv := range kvs {
			var e lockrun.FleetEntry
			json.Unmarshal(kv.Value, &e)
			switch {
			case e.Status == runstatus.Running && e.RunID == holder:
				spare[i] = true
			case e.Status == runstatus.Succeeded:
				lastOK = i
			case failure(e.Status):
				lastBad = i // a running entry whose run let the lock go is abandoned: a failure
			}
		}
		for _, i := range []int{lastOK, lastBad} {
			if i >= 0 {
				spare[i] = true
			}
		}
		// Oldest first, in ranges between the spared entries; each range is deleted only if
		// none of its keys changed since the read (a host whose clock is behind may have
		// written a new entry among the old ones).
		over := int64(len(kvs)) - int64(l.fleetKeep())
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for i := 0; i < len(kvs) && over > 0; {
			if spare[i] {
				i++
				continue
			}
			j := i
			for j+1 < len(kvs) && !spare[j+1] && int64(j+1-i) < over {
				j++
			}
			from, end := string(kvs[i].Key), string(kvs[j].Key)+"\x00"
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(from), "<", read.Header.Revision+1).WithRange(end))
			ops = append(ops, clientv3.OpDelete(from, clientv3.WithRange(end)))
			over -= int64(j + 1 - i)
			i = j + 1
		}
		if len(ops) == 0 {
			return nil
		}
		_, err = c.Txn(ctx).If(cmps...).Then(ops...).Commit()
		return err
	})
}

// failure reports a status that counts as a failure of the job, for the last failure a
// trim keeps (running stands for an abandoned run here: the holder's is spared before).
func failure(status string) bool {
	switch status {
	case runstatus.Succeeded, runstatus.Skipped, lockrun.NeverFiredStatus:
		return false
	}
	return true
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
		// As raw fields, so that fields this build does not know are kept as they are.
		var m map[string]json.RawMessage
		if json.Unmarshal(value, &m) != nil {
			return nil
		}
		m["k"] = json.RawMessage(strconv.Itoa(skips))
		if _, ok := m["rf"]; !ok && string(m["s"]) != `"running"` {
			// This write moves the entry's revision past its release's: keep that one.
			m["rf"] = json.RawMessage(strconv.FormatInt(rev, 10))
		}
		v, _ := json.Marshal(m)
		_, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(entryKey), "=", rev)).
			Then(clientv3.OpPut(entryKey, string(v))).Commit()
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
		out[k], _ = l.keyRecord(k, resp, limit)
	}
	return out, nil
}

// keyRecord is the fleet's record of k from resp, a transaction's three reads of k: its
// entries (newest first), its tick record and its lock. It returns the entries, newest
// first, at most limit (0 = all), marked as Fleet marks them, and the tick record.
func (l *Locker) keyRecord(k string, resp *clientv3.TxnResponse, limit int) ([]lockrun.FleetEntry, lockrun.TickValue) {
	var tr lockrun.TickValue
	tickV := ""
	if kv := firstKV(resp, 1); kv != nil {
		tickV = string(kv.Value)
		json.Unmarshal(kv.Value, &tr)
	}
	lockKV := firstKV(resp, 2)
	holder := ""
	if lockKV != nil {
		holder = holderOf(lockKV.Value, lockKV.CreateRevision).RunID
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
		e.Key = k
		if e.Status == runstatus.Running {
			e = l.claimState(e, kv, holder)
		} else {
			// The release's revision: an entry written at the claim was last written by the
			// release (a later skip count keeps it in rf); one from before the ledger was
			// created by the release. WriteRecord's says it in rf.
			end := kv.CreateRevision
			if e.Fence != 0 && uint64(kv.CreateRevision) == e.Fence {
				end = kv.ModRevision
			}
			endRev[e.RunID] = cmp.Or(rf.Rev, end)
		}
		if e.RunID == tr.RunID && !tr.Missed {
			e.Skips = max(e.Skips, tr.Skips)
		}
		ids[e.RunID] = true
		es = append(es, e)
	}
	if e, ok := lockrun.PendingEntry(k, l.redisStyleLock(lockKV), tickV, ids); ok {
		es = append([]lockrun.FleetEntry{e}, es...)
	}
	sort.SliceStable(es, func(a, b int) bool { return es[a].StartUS > es[b].StartUS })
	if limit > 0 && len(es) > limit {
		es = es[:limit]
	}
	markByRevision(es, endRev)
	// Roll-outs by the hosts' clocks: a run without --schedule has only its start to
	// say which tick interval it fell in.
	lockrun.MarkRollouts(es, l.tickOf(tr))
	return es, tr
}

// tickOf reads the key's schedule from its tick record for the roll-out rule; nil without
// Options.PrevTick or a readable schedule.
func (l *Locker) tickOf(tr lockrun.TickValue) lockrun.TickOf {
	if l.o.PrevTick == nil || tr.Expr == "" {
		return nil
	}
	prev := l.o.PrevTick(tr.Expr, tr.TZ)
	if prev == nil {
		return nil
	}
	return func(_ string, at time.Time) (time.Time, bool) { return prev(at), true }
}

// claimState is a running entry as readers see it: still running while its run holds the
// lock, else abandoned (its cronlock or its host died, or it was cut off: the lease ended
// with no release). Its fencing token is the entry's create revision, the lock key's.
func (l *Locker) claimState(e lockrun.FleetEntry, kv *mvccKV, holder string) lockrun.FleetEntry {
	if e.Fence == 0 {
		e.Fence = uint64(kv.CreateRevision)
	}
	if e.RunID != holder {
		e.Status = runstatus.Abandoned
		e.Error = "took the lock and let it expire without a record of its end (killed, or its host was lost)"
	}
	return e
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

// FleetKeys returns the keys that have a lock, a tick record or an entry: a key whose
// only run is still running, or was abandoned, is one of them.
func (l *Locker) FleetKeys(ctx context.Context) ([]string, error) {
	return l.walk(ctx, "list the fleet's records", "lock", "tick", "runs")
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

// walk returns, sorted, the KEYs that have a <prefix>{KEY}:kind key of one of kinds
// ("runs" for the entries), paging through the prefix with keys-only reads and jumping
// over each key's run entries.
func (l *Locker) walk(ctx context.Context, what string, kinds ...string) ([]string, error) {
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
			runs := strings.HasPrefix(k, "runs/")
			if runs {
				k = "runs"
			}
			// A key's names are adjacent (lock, runs/…, tick): one entry for each key.
			if slices.Contains(kinds, k) && (len(names) == 0 || names[len(names)-1] != name) {
				names = append(names, name)
			}
			if runs {
				next = base + name + "}:runs0" // past every entry of name ('0' follows '/')
				break
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
	names, err := l.walk(ctx, "list locks", "lock")
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
