package lockrun

import (
	"context"
	"time"
)

// KeyState is what a backend knows of one key right now, for `cronlock jobs`: its last
// claimed tick (the schedule and zone come from it), its newest entries in the fleet's
// record, how many standbys wait on its tick, and its per-day counters.
type KeyState struct {
	Key string
	// Tick is the key's last claimed tick; nil when no run of it had --schedule.
	Tick *TickRecord
	// Recent are the key's newest entries, newest first (a few: enough to find the newest
	// finished one), with abandoned derived and the lock's holder as a running entry
	// when its own entry is missing (PendingEntry).
	Recent []FleetEntry
	// Standbys counts the standby slots taken on the key's current tick.
	Standbys int
	// Days are the key's per-day counters of the last days (at least the last 7), oldest
	// first; nil when the backend keeps none (readers then count Recent).
	Days []DayCount
}

// JobReader is a backend that reads every key's state in batches, for `cronlock jobs` on
// a large fleet (Redis: an index of known keys kept by the acquire script, and pipelined
// reads).
type JobReader interface {
	// JobKeys returns the keys the backend knows, sorted. From the index when there is
	// one; with scan, or when the server has no index yet (keys last claimed by a cronlock
	// that kept none), by walking the whole keyspace: scanned then says so.
	JobKeys(ctx context.Context, scan bool) (keys []string, scanned bool, err error)
	// JobStates reads the states of keys (a batch: one call, one operation time-out),
	// in the order of keys. now is the reader's clock, for the day counters' window.
	JobStates(ctx context.Context, keys []string, now time.Time) ([]KeyState, error)
}

// JobsBatch is how many keys one JobStates call reads at most: each call has its own
// deadline (--redis-timeout), never one over the whole walk.
const JobsBatch = 500

// RecentEntries is how many of a key's newest entries JobStates reads: a running entry,
// a never_fired one and the newest finished run fit.
const RecentEntries = 4
