package lockrun

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cronlock/runstatus"
)

// The fleet's record (README, "The fleet's record") is a ledger: one compact
// JSON entry per run that claimed the lock or a tick, written at the claim (status
// running, or missed) and completed by the run's release; no other run's claim rewrites
// it. How a backend stores it is its own (Redis: a hash by run id and a sorted set by
// claim time, lockrun/redis); the entry's format is shared here. "abandoned" is never
// stored: readers derive it from an entry still running whose lock is gone
// (DeriveAbandoned).

// DefaultFleetKeep is how many entries the record of one key keeps when
// a backend's Options.FleetKeep is 0 (CRONLOCK_FLEET_KEEP).
const DefaultFleetKeep = 200

// maxFleetEntry is the most bytes one entry of the record takes: the error and, if need
// be, the node name are cut to fit.
const maxFleetEntry = 640

// fleetErrorBytes is how much of a run's error an entry keeps at most.
const fleetErrorBytes = 200

// fleetSuffixRoom is what the scripts append to the entry Go encodes: the fencing token
// at a claim (`,"fe":` and up to 20 digits), `,"a":<16 digits>,"f":<16 digits>`, the
// collapsed count and last time (`,"c":…,"l":<16 digits>`), the marks of the tick logic
// (schedule change, never fired, data loss: about 100 bytes) and `,"k":<up to 10 digits>}`.
const fleetSuffixRoom = 220

// FleetEntry is one run in the fleet's record, as stored (short names keep an entry far
// below maxFleetEntry). Times are Redis TIME in microseconds, so that the hosts' clock skew
// cannot fake or hide an overlap; use Started, Finished and ScheduledFor for time.Time.
// Zero values: TickUS 0 = no --schedule; Exit nil = unknown (a running or abandoned claim).
type FleetEntry struct {
	RunID      string `json:"id"`
	Node       string `json:"n"`
	Status     string `json:"s"`             // the history's status names, plus "running" and "abandoned"
	Exit       *int   `json:"x,omitempty"`   // the exit code cronlock returned
	Signal     string `json:"sig,omitempty"` // the signal that ended the job, "SIGTERM"
	Hung       bool   `json:"hb,omitempty"`  // a timeout of --heartbeat-timeout: resumable by a standby
	TickUS     int64  `json:"t,omitempty"`   // the tick the run was for (scheduled_for)
	DurationMS int64  `json:"d"`             // the job's run time (0 when it never started)
	Tries      int    `json:"r"`             // tries of the job in this run (--retries)
	Fence      uint64 `json:"fe,omitempty"`  // the fencing token of the lock it held
	Error      string `json:"e,omitempty"`   // the first 200 bytes of the run's error
	StartUS    int64  `json:"a"`             // Redis TIME when the lock was taken (or the entry written)
	EndUS      int64  `json:"f"`             // Redis TIME when the lock was released (or the entry written)
	Skips      int    `json:"k"`             // runs of other hosts skipped for this run's tick

	// Fields of the ledger, shared by every backend; all optional on the wire.
	Version    string `json:"v,omitempty"`  // the cronlock version that claimed
	Attempt    int    `json:"at,omitempty"` // tick attempt; 0 = 1
	TakeoverOf string `json:"to,omitempty"` // run id this attempt took over
	CmdHash    string `json:"ch,omitempty"` // hash of the command, for roll-out duplicates
	// GraceMS is the claim's --jitter + --start-deadline in ms: how late after its tick a
	// run of this key may start by design, which check's default grace allows for.
	GraceMS int64 `json:"g,omitempty"`
	// ScheduleWas is set on a claim whose canonical EXPR or zone differs from the key's
	// previous claim: "EXPR ZONE" of that claim. Flip is set when this claim went back to
	// a schedule the key had within 24 hours (hosts disagree on the schedule or zone).
	ScheduleWas string `json:"sc,omitempty"`
	Flip        bool   `json:"fl,omitempty"`
	// NeverFiredFrom, NeverFiredTo and NeverFired describe a never_fired entry: the first
	// and last tick (µs) that no host claimed, and how many there were. The acquire script
	// cannot read a schedule: it writes From as just after the last claimed (or held) tick
	// and no count, and readers turn that into the first tick and the count with the key's
	// schedule (cmd's countNeverFired).
	NeverFiredFrom int64 `json:"nf,omitempty"`
	NeverFiredTo   int64 `json:"nt,omitempty"`
	NeverFired     int   `json:"nc,omitempty"`
	// DataLoss marks a claim that found the backend had lost the key's data (its fencing
	// counter gone while this host knew the key): a re-run of a tick is possible.
	DataLoss bool `json:"dl,omitempty"`
	// Count and LastUS collapse repeated non-run outcomes of one host (a skew refusal every
	// minute) into one entry: how many, and the backend time of the newest.
	Count  int   `json:"c,omitempty"`
	LastUS int64 `json:"l,omitempty"`
	// Checkpoint is the start (at most FleetCheckpointBytes bytes) of the last checkpoint the
	// run saved, written by its release; nil when it saved none. Base64 on the wire (as
	// encoding/json writes bytes): binary-safe, and never longer than 128 characters.
	Checkpoint []byte `json:"cp,omitempty"`

	// Key is the lock key the entry belongs to (not stored: it is in the list's name).
	Key string `json:"-"`
	// Duplicate is set by MarkDuplicates: another run of the key claimed the same tick,
	// or held the lock during an overlapping interval.
	Duplicate bool `json:"-"`
}

// Started is when the run took the lock, on the Redis clock.
func (e FleetEntry) Started() time.Time { return usTime(e.StartUS) }

// Finished is when the run let the lock go, on the Redis clock; zero while running.
func (e FleetEntry) Finished() time.Time { return usTime(e.EndUS) }

// ScheduledFor is the tick the run was for; zero without --schedule.
func (e FleetEntry) ScheduledFor() time.Time { return usTime(e.TickUS) }

func usTime(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// NeverFiredStatus is the status of a ledger entry that records ticks no host claimed.
// It is not a run's status (no run had it), so it lives here and not in runstatus.
const NeverFiredStatus = "never_fired"

// tookLock reports whether the run held the lock (so its interval can overlap another's).
func (e FleetEntry) tookLock() bool {
	return e.Status != runstatus.Missed && e.Status != runstatus.Error && e.Status != NeverFiredStatus &&
		e.Status != runstatus.Suspended
}

// RunRecord is what a run tells the backend about itself for the fleet's record. The
// backend adds the times (its own clock), the fencing token and the tick's skip count.
type RunRecord struct {
	RunID  string
	Node   string
	Status string
	Exit   int
	Signal string
	// Hung: a timeout of --heartbeat-timeout (the job saved no checkpoint in time), which
	// a standby may take over, unlike a --timeout.
	Hung     bool
	Tick     time.Time // zero = no --schedule
	Duration time.Duration
	Tries    int
	Error    string
	// Shared ledger fields (FleetEntry's Version, Attempt, TakeoverOf, CmdHash); zero
	// values are left out of the entry.
	Version    string
	Attempt    int
	TakeoverOf string
	CmdHash    string
	Grace      time.Duration // --jitter + --start-deadline (FleetEntry.GraceMS)
	// DataLoss, ScheduleWas and Flip are the claim's marks (see FleetEntry).
	DataLoss    bool
	ScheduleWas string
	Flip        bool
	// Checkpoint is the start of the run's last checkpoint (nil = none); the entry keeps
	// at most FleetCheckpointBytes bytes of it.
	Checkpoint []byte
}

// FleetCheckpointBytes is how much of a run's last checkpoint its entry keeps: enough to
// tell "batch 3" from "batch 4" across the fleet, little enough to keep the entry small.
// The history of the run's node has the whole value.
const FleetCheckpointBytes = 96

// EncodeFleetEntry is the entry of rec without its closing brace and the fields the
// scripts add ("a", "f", "k"), cut to fit maxFleetEntry.
func EncodeFleetEntry(rec *RunRecord, fence uint64) string {
	return encodeEntry(rec, fence, true)
}

// EncodeClaimEntry is the entry a claim writes, as EncodeFleetEntry: without an exit code
// while the run's status is running (the script adds the fencing token and the times).
func EncodeClaimEntry(rec *RunRecord) string {
	return encodeEntry(rec, 0, rec.Status != runstatus.Running)
}

func encodeEntry(rec *RunRecord, fence uint64, exit bool) string {
	e := FleetEntry{RunID: rec.RunID, Node: rec.Node, Status: rec.Status, Signal: rec.Signal, Hung: rec.Hung,
		DurationMS: rec.Duration.Milliseconds(), Tries: max(rec.Tries, 1), Fence: fence,
		Error: cutUTF8(rec.Error, fleetErrorBytes), Version: cutUTF8(rec.Version, 40),
		Attempt: rec.Attempt, TakeoverOf: rec.TakeoverOf, CmdHash: cutUTF8(rec.CmdHash, 32), GraceMS: rec.Grace.Milliseconds(),
		DataLoss: rec.DataLoss, ScheduleWas: cutUTF8(rec.ScheduleWas, 80), Flip: rec.Flip,
		Checkpoint: rec.Checkpoint[:min(len(rec.Checkpoint), FleetCheckpointBytes)]}
	if exit {
		x := rec.Exit
		e.Exit = &x
	}
	if !rec.Tick.IsZero() {
		e.TickUS = rec.Tick.UnixMicro()
	}
	for {
		s := encodePrefix(e)
		over := len(s) + fleetSuffixRoom - maxFleetEntry
		if over <= 0 {
			return s
		}
		// Escapes make the encoded text longer than the string: cut by what is over.
		switch {
		case len(e.Node) > 64:
			e.Node = cutUTF8(e.Node, max(len(e.Node)-over, 64))
		case len(e.Error) > 64:
			e.Error = cutUTF8(e.Error, max(len(e.Error)-over, 64))
		case len(e.Checkpoint) > 24:
			e.Checkpoint = cutCheckpoint(e.Checkpoint, over, 24)
		case e.Error != "":
			e.Error = cutUTF8(e.Error, max(len(e.Error)-over, 0))
		case len(e.Node) > 16:
			e.Node = cutUTF8(e.Node, max(len(e.Node)-over, 16))
		case e.Checkpoint != nil:
			e.Checkpoint = cutCheckpoint(e.Checkpoint, over, 0)
		default:
			return s // unreachable: the other fields are bounded
		}
	}
}

func encodePrefix(e FleetEntry) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// The trailing fields are the scripts'; drop them from Go's encoding.
	type prefix struct {
		RunID      string `json:"id"`
		Node       string `json:"n"`
		Status     string `json:"s"`
		Exit       *int   `json:"x,omitempty"`
		Signal     string `json:"sig,omitempty"`
		Hung       bool   `json:"hb,omitempty"`
		TickUS     int64  `json:"t,omitempty"`
		DurationMS int64  `json:"d"`
		Tries      int    `json:"r"`
		Fence      uint64 `json:"fe,omitempty"`
		Error      string `json:"e,omitempty"`
		Version    string `json:"v,omitempty"`
		Attempt    int    `json:"at,omitempty"`
		TakeoverOf string `json:"to,omitempty"`
		CmdHash    string `json:"ch,omitempty"`
		GraceMS    int64  `json:"g,omitempty"`
		DataLoss   bool   `json:"dl,omitempty"`
		Sched      string `json:"sc,omitempty"`
		Flip       bool   `json:"fl,omitempty"`
		Checkpoint []byte `json:"cp,omitempty"`
	}
	enc.Encode(prefix{e.RunID, e.Node, e.Status, e.Exit, e.Signal, e.Hung, e.TickUS, e.DurationMS, e.Tries, e.Fence, e.Error,
		e.Version, e.Attempt, e.TakeoverOf, e.CmdHash, e.GraceMS, e.DataLoss, e.ScheduleWas, e.Flip, e.Checkpoint})
	s := strings.TrimRight(b.String(), "\n")
	return strings.TrimSuffix(s, "}")
}

// cutCheckpoint shortens b so that its base64 (4 characters for every 3 bytes) is over
// characters shorter, keeping at least least bytes; nil once nothing is left.
func cutCheckpoint(b []byte, over, least int) []byte {
	b = b[:max(len(b)-(over*3/4+3), least)]
	if len(b) == 0 {
		return nil
	}
	return b
}

// cutUTF8 is s cut to at most n bytes, not inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// PendingEntry is the run that holds the lock and has no entry in the record: taken by a
// cronlock from before the ledger (which wrote none at the claim), or whose claim's entry
// the server refused (a full server, an ACL without hash rights). It reads as running; its
// tick comes from the tick record when that run claimed it. A tick's claimer with neither
// lock nor entry is not made up as abandoned: every claim writes its entry, so a missing
// one was trimmed or refused, and the run's end is not known.
func PendingEntry(key, lockV, tickV string, ids map[string]bool) (FleetEntry, bool) {
	var lv HolderValue
	if lockV != "" && json.Unmarshal([]byte(lockV), &lv) == nil && lv.RunID != "" && !ids[lv.RunID] && lv.ReleasedUS == "" {
		e := FleetEntry{Key: key, RunID: lv.RunID, Node: lv.Node, Status: runstatus.Running, Tries: 1}
		e.StartUS, _ = strconv.ParseInt(lv.AcquiredUS, 10, 64)
		e.Fence, _ = strconv.ParseUint(lv.Fence, 10, 64)
		var tr TickValue
		if tickV != "" && json.Unmarshal([]byte(tickV), &tr) == nil && tr.RunID == lv.RunID {
			e.TickUS, _ = strconv.ParseInt(tr.TickUS, 10, 64)
		}
		return e, true
	}
	return FleetEntry{}, false
}

// TickOf gives, for a key, the latest tick of its schedule at or before at; ok is false
// when the key's schedule is not known. Readers build it from the tick record with the
// schedule package (lockrun imports only the standard library).
type TickOf func(key string, at time.Time) (tick time.Time, ok bool)

// DeriveAbandoned turns the entries of one key that are still running, and whose run
// no longer holds the key's lock, into abandoned ones: the run claimed, and its lease
// ended without a release that completed the entry (its cronlock was killed, its host
// lost, or the completion never reached the backend). abandoned is never stored, so a
// late completion still turns it into the run's real outcome. holderRunID is the run
// id in the key's lock ("" when the lock is free, or kept by --min-hold after a
// release).
func DeriveAbandoned(es []FleetEntry, holderRunID string) {
	for i := range es {
		if es[i].Status == runstatus.Running && es[i].RunID != holderRunID {
			es[i].Status = runstatus.Abandoned
			if es[i].Error == "" {
				es[i].Error = "claimed and let its lock expire without completing its entry (killed, its host lost, or its completion never reached the server)"
			}
		}
	}
}

// MarkDuplicates sets Duplicate on the entries of one key that ran the same tick, or
// held the lock in overlapping intervals of the Redis clock: the job ran twice. Entries
// of one run (the same run id) never mark each other, nor do runs that never held the
// lock (missed, error). A running entry's interval is open-ended; an abandoned one's end
// is unknown, so it is a duplicate only by its tick.
//
// With tickOf (optional, at most one), two runs of the same command hash between one
// tick of the key's schedule and the next, one of them without --schedule, are
// duplicates too: a roll-out in which one host still runs the line without --schedule.
func MarkDuplicates(es []FleetEntry, tickOf ...TickOf) {
	if len(tickOf) > 0 && tickOf[0] != nil {
		markRollouts(es, tickOf[0])
	}
	// Attempts of one tick (a standby's takeover of a lost run) are one run of the tick:
	// each is named by the first attempt it descends from.
	first := attemptRoots(es)
	idx := make([]int, 0, len(es))
	byTick := map[string]int{}
	for i := range es {
		if !es[i].tookLock() {
			continue
		}
		idx = append(idx, i)
		if es[i].TickUS == 0 {
			continue
		}
		tk := es[i].Key + "\x00" + strconv.FormatInt(es[i].TickUS, 10)
		if j, ok := byTick[tk]; ok && first(es[j]) != first(es[i]) {
			es[i].Duplicate, es[j].Duplicate = true, true
		} else if !ok {
			byTick[tk] = i
		}
	}
	// By start, then each entry against those that start before it ends: linear in the
	// entries plus the overlaps.
	sort.Slice(idx, func(a, b int) bool { return es[idx[a]].StartUS < es[idx[b]].StartUS })
	for n, i := range idx {
		a := &es[i]
		if a.StartUS == 0 {
			continue
		}
		for _, j := range idx[n+1:] {
			b := &es[j]
			if b.StartUS >= a.end() {
				break
			}
			if first(*a) != first(*b) && a.Key == b.Key && b.StartUS < b.end() {
				a.Duplicate, b.Duplicate = true, true
			}
		}
	}
}

// attemptRoots returns, for an entry of es, the run id of the first attempt of its tick
// that it descends from by takeovers (TakeoverOf), itself when it took nothing over.
func attemptRoots(es []FleetEntry) func(FleetEntry) string {
	of := map[string]string{}
	for _, e := range es {
		if e.TakeoverOf != "" {
			of[e.Key+"\x00"+e.RunID] = e.TakeoverOf
		}
	}
	return func(e FleetEntry) string {
		id := e.RunID
		for n := 0; n < len(es); n++ { // bounded: a cycle in stored data must not hang
			p, ok := of[e.Key+"\x00"+id]
			if !ok {
				break
			}
			id = p
		}
		return id
	}
}

// end is the end of the interval the run held the lock.
func (e FleetEntry) end() int64 {
	switch {
	case e.EndUS != 0:
		return e.EndUS
	case e.Status == runstatus.Running:
		return 1<<63 - 1
	}
	return e.StartUS
}

// MarkRollouts is MarkDuplicates's roll-out rule alone: runs of one command hash in one
// tick interval of which one ran without --schedule, told by their start times (µs). For
// a backend that judges overlaps by other means (etcd: revisions).
func MarkRollouts(es []FleetEntry, tickOf TickOf) {
	if tickOf != nil {
		markRollouts(es, tickOf)
	}
}

// markRollouts marks runs of one command hash in one tick interval of which one ran
// without --schedule (see MarkDuplicates).
func markRollouts(es []FleetEntry, tickOf TickOf) {
	type group struct {
		unscheduled bool // one of its runs had no --schedule
		runs        map[string]bool
	}
	groups := map[string]*group{}
	idx := map[string][]int{}
	for i := range es {
		e := &es[i]
		if !e.tookLock() || e.CmdHash == "" || e.StartUS == 0 {
			continue
		}
		tick := e.ScheduledFor()
		if tick.IsZero() {
			t, ok := tickOf(e.Key, e.Started())
			if !ok {
				continue
			}
			tick = t
		}
		k := e.Key + "\x00" + e.CmdHash + "\x00" + strconv.FormatInt(tick.UnixMicro(), 10)
		g := groups[k]
		if g == nil {
			g = &group{runs: map[string]bool{}}
			groups[k] = g
		}
		g.runs[e.RunID] = true
		g.unscheduled = g.unscheduled || e.TickUS == 0
		idx[k] = append(idx[k], i)
	}
	for k, g := range groups {
		if g.unscheduled && len(g.runs) > 1 {
			for _, i := range idx[k] {
				es[i].Duplicate = true
			}
		}
	}
}

// PendingCompletion is the completed entry of a run whose release could not deliver it
// (a failover, a time-out): the host keeps it (its local history) and a later release of
// the key on that host delivers it, so every claimed run ends completed in the ledger.
type PendingCompletion struct {
	Key     string
	RunID   string
	Entry   string // EncodeFleetEntry's text
	StartUS string // the backend's time at the claim, µs; "" when unknown
	EndUS   string // when the run ended, µs (the host's clock: the backend never answered)
}

// DayCount is one day of a key's per-day counters in the fleet's record (they
// carry success rates beyond the entries kept), by the backend's clock in UTC.
type DayCount struct {
	Day time.Time // midnight UTC
	// Runs counts the claims of the day (every run with an entry, and each repeat
	// collapsed into one); Succeeded, Failed (of completed runs), Interrupted and Missed
	// count outcomes of those claims, NeverFired ticks no host claimed, Duplicates runs
	// found twice. Runs that never completed (running, abandoned) are in Runs alone.
	Runs, Succeeded, Failed, Interrupted, Missed, NeverFired, Duplicates int
}

// ParseDayCounts reads a backend's per-day counters: field = days since 1970, value
// "r,s,f,i,m,n,d" (runs, succeeded, failed, interrupted, missed, never fired,
// duplicates), oldest day first; what it cannot read is skipped.
func ParseDayCounts(fields map[string]string) []DayCount {
	out := make([]DayCount, 0, len(fields))
	for f, v := range fields {
		day, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			continue
		}
		var n [7]int
		for i, x := range strings.SplitN(v, ",", 7) {
			n[i], _ = strconv.Atoi(x)
		}
		out = append(out, DayCount{Day: time.Unix(day*86400, 0).UTC(), Runs: n[0], Succeeded: n[1], Failed: n[2],
			Interrupted: n[3], Missed: n[4], NeverFired: n[5], Duplicates: n[6]})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Day.Before(out[b].Day) })
	return out
}
