package runview

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/table"
	"cronlock/tty"
)

// FleetJSON is one line of `cronlock history --fleet --json`; the names are an interface
// (README, "The fleet's record").
type FleetJSON struct {
	ID           string  `json:"id"`
	Key          string  `json:"key"`
	Node         string  `json:"node"`
	Status       string  `json:"status"`
	Exit         *int    `json:"exit"`
	Signal       string  `json:"signal,omitempty"`
	ScheduledFor *string `json:"scheduled_for"`
	StartedAt    string  `json:"started_at"`
	FinishedAt   *string `json:"finished_at"`
	DurationMS   int64   `json:"duration_ms"`
	Tries        int     `json:"tries"`
	FencingToken uint64  `json:"fencing_token"`
	Error        string  `json:"error,omitempty"`
	Skips        int     `json:"skips"`
	Duplicate    bool    `json:"duplicate"`
	// The claim's marks: the backend had lost its data; the schedule before a
	// change ("EXPR ZONE"), and whether it flipped back; the ticks nobody claimed.
	DataLoss       bool    `json:"data_loss,omitempty"`
	ScheduleWas    string  `json:"schedule_was,omitempty"`
	ScheduleFlip   bool    `json:"schedule_flip,omitempty"`
	NeverFiredFrom *string `json:"never_fired_from,omitempty"`
	NeverFiredTo   *string `json:"never_fired_to,omitempty"`
	NeverFired     int     `json:"never_fired,omitempty"`
	// Count and LastAt: repeats of one host's error collapsed into this entry (the
	// first is the entry's own; absent when it was not repeated). Version: the cronlock
	// that claimed.
	Count   int     `json:"count,omitempty"`
	LastAt  *string `json:"last_at,omitempty"`
	Version string  `json:"version,omitempty"`
	// TickAttempt is which attempt of its tick the run was (with a tick), TakeoverOf the
	// lost run a standby took it from.
	TickAttempt int    `json:"tick_attempt,omitempty"`
	TakeoverOf  string `json:"takeover_of,omitempty"`
}

// WriteFleetJSON prints one JSON line per entry of the fleet's record.
func WriteFleetJSON(w io.Writer, es []lockrun.FleetEntry) error {
	for _, e := range es {
		j := FleetJSON{ID: e.RunID, Key: e.Key, Node: e.Node, Status: e.Status, Exit: e.Exit,
			Signal: e.Signal, ScheduledFor: utcOrNull(e.ScheduledFor()),
			StartedAt: e.Started().Format(time.RFC3339Nano), FinishedAt: utcOrNull(e.Finished()),
			DurationMS: e.DurationMS, Tries: e.Tries, FencingToken: e.Fence, Error: e.Error,
			Skips: e.Skips, Duplicate: e.Duplicate, DataLoss: e.DataLoss, ScheduleWas: e.ScheduleWas,
			ScheduleFlip: e.Flip, NeverFired: e.NeverFired, Count: e.Count, LastAt: utcOrNull(usTime(e.LastUS)), Version: e.Version,
			TakeoverOf: e.TakeoverOf}
		if e.TickUS != 0 {
			j.TickAttempt = max(e.Attempt, 1)
		}
		if e.NeverFiredTo != 0 {
			j.NeverFiredFrom = utcOrNull(time.UnixMicro(e.NeverFiredFrom))
			j.NeverFiredTo = utcOrNull(time.UnixMicro(e.NeverFiredTo))
		}
		// The record is written by every host.
		if err := WriteJSONLine(w, j); err != nil {
			return err
		}
	}
	return nil
}

// WriteFleetTable prints the entries for people; every string from the record is escaped.
// The ID column is the shortest start of each run id that no other entry listed shares:
// the record cannot be searched by a prefix, so it is unique among these runs, and
// `history show` on the run's node takes it (or more of the id, should that host's file
// hold another run that starts the same).
func WriteFleetTable(w io.Writer, es []lockrun.FleetEntry, o Options) error {
	loc := Zone(o.Loc, o.UTC)
	header := []string{"ID", "STARTED", "KEY", "NODE", "STATUS", "EXIT", "DURATION", "TICK", "NOTE"}
	const noteCol = 8
	rows := [][]string{header}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.RunID
	}
	short := history.ShortIDsAmong(ids)
	for i, e := range es {
		exit := "-"
		if e.Exit != nil {
			exit = strconv.Itoa(*e.Exit)
		}
		dur := "-"
		if e.EndUS != 0 {
			dur = Duration(time.Duration(e.DurationMS) * time.Millisecond)
		}
		tick := "-"
		if t := e.ScheduledFor(); !t.IsZero() {
			tick = t.In(loc).Format("2006-01-02 15:04 MST")
		}
		var note []string
		if e.TakeoverOf != "" {
			note = append(note, takeoverNote(e, es))
		}
		if e.Duplicate {
			note = append(note, "DUPLICATE")
		}
		if e.DataLoss {
			note = append(note, "DATA LOSS before this claim: the tick may have run twice")
		}
		if e.Flip {
			note = append(note, "SCHEDULE FLIP from "+e.ScheduleWas)
		} else if e.ScheduleWas != "" {
			note = append(note, "schedule changed from "+e.ScheduleWas)
		}
		if e.Status == lockrun.NeverFiredStatus {
			note = append(note, neverFiredNote(e, loc))
		}
		if e.Skips > 0 {
			note = append(note, fmt.Sprintf("%d skipped", e.Skips))
		}
		if e.Count > 1 && e.LastUS > 0 {
			note = append(note, fmt.Sprintf("%d times, the last at %s", e.Count, usTime(e.LastUS).In(loc).Format("2006-01-02 15:04:05 MST")))
		}
		if e.Error != "" {
			note = append(note, e.Error)
		}
		id := "-" // an entry of ticks nobody claimed is no run
		if e.RunID != "" {
			id = tty.Escape(short[i])
		}
		rows = append(rows, []string{
			id, e.Started().In(loc).Format("2006-01-02 15:04:05 MST"),
			tty.Escape(e.Key), tty.Escape(e.Node), tty.Escape(e.Status), exit, dur, tick,
			tty.Escape(strings.Join(note, "; ")),
		})
	}
	_, err := io.WriteString(w, table.Format(rows, table.Options{Width: o.Width, Cut: []int{noteCol}}))
	return err
}

// neverFiredNote says which ticks nobody claimed.
func neverFiredNote(e lockrun.FleetEntry, loc *time.Location) string {
	from := time.UnixMicro(e.NeverFiredFrom).In(loc).Format("2006-01-02 15:04 MST")
	to := time.UnixMicro(e.NeverFiredTo).In(loc).Format("2006-01-02 15:04 MST")
	switch {
	case e.NeverFired == 1:
		return "1 tick never fired: " + to
	case e.NeverFired > 1:
		return fmt.Sprintf("%d ticks never fired: %s to %s", e.NeverFired, from, to)
	}
	return "ticks never fired up to " + to
}

// usTime is a ledger time (µs); zero for 0.
func usTime(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// takeoverNote says which lost run a standby's attempt took its tick from:
// "attempt 2: takeover of run R on vmA (abandoned)", with what the record shows of R.
func takeoverNote(e lockrun.FleetEntry, es []lockrun.FleetEntry) string {
	s := fmt.Sprintf("attempt %d: takeover of run %s", max(e.Attempt, 1), e.TakeoverOf)
	for _, o := range es {
		if o.RunID == e.TakeoverOf && o.Key == e.Key {
			s += fmt.Sprintf(" on %s (%s)", o.Node, o.Status)
			break
		}
	}
	return s
}
