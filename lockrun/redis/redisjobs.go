package redis

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
)

// The index of known keys: a sorted set of KEY names scored by the server's TIME (s) of
// their last claim, written by acquire.lua in the claim's own script (no round trip of
// its own), so that `cronlock jobs` reads the keys without a SCAN of the whole database.
// On one server (or Sentinel's master) it is one set, <prefix>keys. On a Cluster a
// script may touch its own slot only, so there is one set per slot, <prefix>{TAG}:keys,
// TAG being a name that hashes to the same slot as the key (slotTag: "#" and letters,
// never a valid KEY, so no record of a key is ever taken for it); jobs reads the sets of
// every slot. Members older than 400 days (retired jobs) are dropped by the next claim into
// the same set, and the set expires 400 days after its last write.

var _ lockrun.JobReader = (*Locker)(nil)

// clusterSlots is how many hash slots a Redis Cluster has.
const clusterSlots = 16384

// indexKey is the index set that a claim of key writes to.
func (l *Locker) indexKey(key string) string {
	if l.target.Scheme != conn.SchemeCluster {
		return l.prefix + "keys"
	}
	return l.prefix + "{" + slotTag(int(crc16(key)%clusterSlots)) + "}:keys"
}

// tagLen is how many letters a slot's tag has after its "#": each an 'a' or a 'b'.
const tagLen = 16

// tagRow is one row of tagRows: a 14-bit slot difference and the letters (a bit mask of
// positions turned from 'a' to 'b') that make it.
type tagRow struct{ diff, letters uint16 }

var (
	tagOnce sync.Once
	tagZero uint16 // the slot of "#" followed by tagLen 'a's
	tagRows []tagRow
)

// slotTag is the tag of slot: "#" and tagLen letters, 'a' or 'b', chosen so that the tag
// hashes to slot. CRC16 (no initial value, no final xor) is linear: turning one letter
// from 'a' into 'b' changes the hash by a fixed difference, whatever the other letters
// are, so the letters are a solution of a linear system over GF(2), found by elimination
// against tagRows: a few hundred operations, the same tag for a claim and for jobs.
func slotTag(slot int) string {
	tagOnce.Do(func() {
		zero := "#" + strings.Repeat("a", tagLen)
		tagZero = crc16(zero) % clusterSlots
		for i := range tagLen {
			b := []byte(zero)
			b[1+i] = 'b'
			r := tagRow{diff: (crc16(string(b)) % clusterSlots) ^ tagZero, letters: 1 << i}
			for _, p := range tagRows { // reduce by the rows so far, highest bit first
				if r.diff^p.diff < r.diff {
					r.diff, r.letters = r.diff^p.diff, r.letters^p.letters
				}
			}
			if r.diff != 0 {
				tagRows = append(tagRows, r)
				sort.Slice(tagRows, func(a, b int) bool { return tagRows[a].diff > tagRows[b].diff })
			}
		}
	})
	want, letters := uint16(slot)^tagZero, uint16(0)
	for _, p := range tagRows {
		if want^p.diff < want {
			want, letters = want^p.diff, letters^p.letters
		}
	}
	b := []byte("#" + strings.Repeat("a", tagLen))
	for i := range tagLen {
		if letters&(1<<i) != 0 {
			b[1+i] = 'b'
		}
	}
	return string(b)
}

// allSlotTags is slotTag of every slot.
func allSlotTags() []string {
	tags := make([]string, clusterSlots)
	for s := range tags {
		tags[s] = slotTag(s)
	}
	return tags
}

// crc16 is the CRC16-CCITT (XMODEM) that Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// indexBatch is how many index sets one call reads on a Cluster.
const indexBatch = 4096

// JobKeys returns the keys in the index, sorted. With scan, or when the index is empty
// (a server whose keys were all last claimed by a cronlock that kept no index), it walks
// the keyspace as FleetKeys does, and says so with scanned.
func (l *Locker) JobKeys(ctx context.Context, scan bool) ([]string, bool, error) {
	if !scan {
		keys, err := l.indexed(ctx)
		if err != nil {
			return nil, false, l.userError("read the index of known keys", err)
		}
		if len(keys) > 0 {
			return keys, false, nil
		}
	}
	keys, err := l.FleetKeys(ctx)
	return keys, true, err
}

// indexed reads the index: the one set, or every slot's set in batches of indexBatch,
// each batch one pipelined call within one operation time-out.
func (l *Locker) indexed(ctx context.Context) ([]string, error) {
	sets := []string{l.prefix + "keys"}
	if l.target.Scheme == conn.SchemeCluster {
		sets = make([]string, 0, clusterSlots)
		for _, t := range allSlotTags() {
			sets = append(sets, l.prefix+"{"+t+"}:keys")
		}
	}
	var keys []string
	for i := 0; i < len(sets); i += indexBatch {
		batch := sets[i:min(i+indexBatch, len(sets))]
		cmds := make([]*redis.StringSliceCmd, len(batch))
		octx, cancel := context.WithTimeout(ctx, l.timeout)
		_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
			for j, s := range batch {
				cmds[j] = p.ZRange(octx, s, 0, -1)
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		for _, c := range cmds {
			for _, k := range c.Val() {
				if lockrun.ValidKey(k) == nil {
					keys = append(keys, k)
				}
			}
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// JobStates reads keys' states in two pipelined calls, each within one operation
// time-out: the tick record, the lock, the newest entries' ids, the standby slots and the
// last 7 days' counters of every key, then those entries.
func (l *Locker) JobStates(ctx context.Context, keys []string, now time.Time) ([]lockrun.KeyState, error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	n := len(keys)
	ticks, locks := make([]*redis.StringCmd, n), make([]*redis.StringCmd, n)
	ids := make([]*redis.StringSliceCmd, n)
	sbs := make([]*redis.StringSliceCmd, n)
	days := make([]*redis.SliceCmd, n)
	today := now.UTC().Unix() / 86400
	fields := make([]string, 7)
	for i := range fields {
		fields[i] = strconv.FormatInt(today-6+int64(i), 10)
	}
	nowMS := strconv.FormatInt(now.UnixMilli(), 10)
	_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			ticks[i] = p.Get(octx, l.tickKey(k))
			locks[i] = p.Get(octx, l.lockKey(k))
			// ZRANGE alone (with REV, BYSCORE): the README's ACL line allows it.
			ids[i] = p.ZRangeArgs(octx, redis.ZRangeArgs{Key: l.orderKey(k), Start: 0, Stop: lockrun.RecentEntries - 1, Rev: true})
			sbs[i] = p.ZRangeArgs(octx, redis.ZRangeArgs{Key: l.standbyKey(k), Start: "(" + nowMS, Stop: "+inf", ByScore: true})
			days[i] = p.HMGet(octx, l.daysKey(k), fields...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, l.userError("read the state of the fleet's keys", err)
	}
	entries := make([]*redis.SliceCmd, n)
	octx, cancel = context.WithTimeout(ctx, l.timeout)
	defer cancel()
	_, err = l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			if v := ids[i].Val(); len(v) > 0 {
				entries[i] = p.HMGet(octx, l.ledgerKey(k), v...)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, l.userError("read the state of the fleet's keys", err)
	}
	out := make([]lockrun.KeyState, n)
	for i, k := range keys {
		st := lockrun.KeyState{Key: k, Standbys: len(sbs[i].Val())}
		tickV, lockV := ticks[i].Val(), locks[i].Val()
		var tv lockrun.TickValue
		if tickV != "" && json.Unmarshal([]byte(tickV), &tv) == nil && tv.TickUS != "" {
			st.Tick = tv.Record()
		}
		seen := map[string]bool{}
		if entries[i] != nil {
			for _, v := range entries[i].Val() {
				s, _ := v.(string)
				var e lockrun.FleetEntry
				if s == "" || json.Unmarshal([]byte(s), &e) != nil || seen[e.RunID] {
					continue
				}
				e.Key = k
				seen[e.RunID] = true
				st.Recent = append(st.Recent, e)
			}
		}
		if e, ok := lockrun.PendingEntry(k, lockV, tickV, seen); ok {
			st.Recent = append([]lockrun.FleetEntry{e}, st.Recent...)
		}
		var hv lockrun.HolderValue
		holder := ""
		if lockV != "" && json.Unmarshal([]byte(lockV), &hv) == nil && hv.ReleasedUS == "" {
			holder = hv.RunID
		}
		lockrun.DeriveAbandoned(st.Recent, holder)
		var dc []lockrun.DayCount
		if vals := days[i].Val(); len(vals) == len(fields) {
			m := map[string]string{}
			for j, v := range vals {
				if s, ok := v.(string); ok {
					m[fields[j]] = s
				}
			}
			dc = lockrun.ParseDayCounts(m)
		}
		if dc == nil {
			dc = []lockrun.DayCount{} // counters are kept: none in the window
		}
		st.Days = dc
		out[i] = st
	}
	return out, nil
}
