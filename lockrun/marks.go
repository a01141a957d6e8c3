package lockrun

import (
	"encoding/json"
	"strconv"
)

// The marks of a claim of a tick (README, "Once per tick"): what the key's previous tick
// record says about this claim. Redis computes them in its acquire script; a backend
// that reads the tick record before it writes (etcd) computes them here, with the same
// rules.

// schedDay is how long a schedule stays in a tick record's history: a claim going back
// to one of them is a flip.
const schedDay = 86400_000_000 // µs

// maxSched is how many schedules the history keeps.
const maxSched = 8

// SchedHistory is the schedules a key's claims used in the last 24 hours: {canonical
// schedule with zone, claim time in µs as a decimal string} each (acquire.lua's sched).
type SchedHistory [][2]string

// UnmarshalJSON reads the history, dropping what is not a pair of strings (cjson writes
// an empty history as {}): a record must stay readable whatever a writer made of it.
func (h *SchedHistory) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	*h = nil
	if json.Unmarshal(b, &raw) != nil {
		return nil
	}
	for _, r := range raw {
		var p [2]string
		if json.Unmarshal(r, &p) == nil {
			*h = append(*h, p)
		}
	}
	return nil
}

// TickMarks is what a claim of a tick found: the fields of its entry in the fleet's
// record (FleetEntry's ScheduleWas, Flip, NeverFiredFrom, NeverFiredTo) and the
// schedule history its tick record keeps.
type TickMarks struct {
	ScheduleWas string
	Flip        bool
	// NeverFiredFrom is just after the last claimed (or fired-but-held) tick, NeverFiredTo
	// the request's PrevTick, both µs; 0 when no tick in between went unclaimed.
	NeverFiredFrom, NeverFiredTo int64
	Sched                        SchedHistory
}

// ClaimMarks computes the marks of req's claim of req.Tick at nowUS, given the key's
// tick record before it (nil: none). A record of req's own run (a retried claim) is not
// a previous claim: it only passes its history on.
//
//   - A Canonical schedule other than the previous claim's is a change (ScheduleWas =
//     that claim's); a change to one the key had within 24 hours is a flip.
//   - Ticks of the same schedule after the last claimed or held tick, up to PrevTick,
//     were never claimed by any host (NeverFiredFrom..NeverFiredTo).
func ClaimMarks(prev *TickValue, req Request, nowUS int64) TickMarks {
	var m TickMarks
	cx := req.Canonical
	var sched SchedHistory
	switch {
	case prev != nil && prev.RunID != req.RunID:
		flipped := false
		for _, e := range prev.Sched {
			if at, err := strconv.ParseInt(e[1], 10, 64); err != nil || at < nowUS-schedDay {
				continue
			}
			if e[0] == cx {
				flipped = true
			}
			if len(sched) < maxSched {
				sched = append(sched, e)
			}
		}
		if prev.CX != "" && cx != "" && prev.CX != cx {
			m.ScheduleWas, m.Flip = prev.CX, flipped
		}
		last, err := strconv.ParseInt(prev.TickUS, 10, 64)
		if held, herr := strconv.ParseInt(prev.HeldUS, 10, 64); herr == nil && held > last {
			last = held
		}
		if err == nil && cx != "" && prev.CX == cx && !req.PrevTick.IsZero() && req.PrevTick.UnixMicro() > last {
			m.NeverFiredFrom, m.NeverFiredTo = last+1, req.PrevTick.UnixMicro()
		}
	case prev != nil:
		sched = append(sched, prev.Sched...)
	}
	if cx != "" {
		now := strconv.FormatInt(nowUS, 10)
		found := false
		for i := range sched {
			if sched[i][0] == cx {
				sched[i][1], found = now, true
			}
		}
		if !found {
			if len(sched) >= maxSched {
				sched = sched[1:]
			}
			sched = append(sched, [2]string{cx, now})
		}
	}
	m.Sched = sched
	return m
}
