package lockrun

import (
	"encoding/json"
	"strconv"
	"time"
)

// TickValue is the JSON value of <prefix>{KEY}:tick (acquire.lua writes it).
type TickValue struct {
	TickUS    string `json:"tick_us"`
	PrevUS    string `json:"prev_us"`
	Expr      string `json:"expr"`
	TZ        string `json:"tz"`
	Node      string `json:"node"`
	RunID     string `json:"run_id"`
	Skips     int    `json:"skips"`
	Missed    bool   `json:"missed"`
	ClaimedUS string `json:"claimed_us"`
	// CX is the claim's schedule in canonical form with its zone (Request.Canonical), and
	// Sched the schedules claimed in the last 24 hours with when (see ClaimMarks).
	CX    string       `json:"cx,omitempty"`
	Sched SchedHistory `json:"sched,omitempty"`
	// HeldUS is a later tick that fired while a run of this one held the lock: it was
	// skipped, not never fired.
	HeldUS string `json:"held_us,omitempty"`
	// PendingUntil is when a --min-replicas claim stops being pending (Redis).
	PendingUntil string `json:"pending_until,omitempty"`
	// At is the tick's attempt this claim is (0 = 1), To the lost run a standby's
	// takeover took it from, NT a claimer that may run on after losing its lease
	// (--on-lock-lost continue, no guard): never taken over (standby.go).
	At int    `json:"at,omitempty"`
	To string `json:"to,omitempty"`
	NT bool   `json:"nt,omitempty"`
}

// TickErrorOf reads the tick record a skipped run found; what cannot be read stays empty.
func TickErrorOf(req Request, raw string) *TickError {
	e := &TickError{Key: req.Key, Tick: req.Tick}
	var rec TickValue
	if json.Unmarshal([]byte(raw), &rec) == nil {
		e.Node, e.RunID, e.Missed, e.Skips = rec.Node, rec.RunID, rec.Missed, rec.Skips
		if us, err := strconv.ParseInt(rec.TickUS, 10, 64); err == nil {
			e.Claimed = time.UnixMicro(us).UTC()
		}
	}
	return e
}

// HolderValue is the JSON stored in the lock key by acquire.lua. Large numbers are strings
// because Lua's numbers are doubles that it would print as 1.7e+15.
type HolderValue struct {
	Token      string `json:"token"`
	Fence      string `json:"fence"`
	Node       string `json:"node"`
	PID        int    `json:"pid"`
	RunID      string `json:"run_id"`
	SinceMS    string `json:"since_ms"`    // the holder's wall clock at acquisition
	AcquiredUS string `json:"acquired_us"` // Redis TIME at acquisition
	RenewedUS  string `json:"renewed_us"`  // Redis TIME at the last acquire or renewal
	TTLMS      int64  `json:"ttl_ms"`
	ReleasedUS string `json:"released_us,omitempty"` // set when a release kept it for --min-hold
	RevokedUS  string `json:"revoked_us,omitempty"`  // set by unlock --force of a live holder
}

// PlausibleTime reports whether t is a time a lock value can hold: 1970 to 9999.
func PlausibleTime(t time.Time) bool { return t.Year() >= 1970 && t.Year() <= 9999 }

// TickRecord is the last tick claimed for a key (--schedule), as a reader such as
// `cronlock check` sees it, from the local lock file or the Redis tick record.
type TickRecord struct {
	Tick   time.Time // the claimed tick, UTC
	Expr   string    // the --schedule expression of the run that claimed it
	TZ     string    // its zone
	Node   string
	RunID  string
	Skips  int
	Missed bool
}

// Record is the tick record v says, for readers; the zero Time when its tick cannot be
// read.
func (v TickValue) Record() *TickRecord {
	us, _ := strconv.ParseInt(v.TickUS, 10, 64)
	return &TickRecord{Tick: time.UnixMicro(us).UTC(), Expr: v.Expr, TZ: v.TZ,
		Node: v.Node, RunID: v.RunID, Skips: v.Skips, Missed: v.Missed}
}
