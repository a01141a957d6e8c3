package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// jsonRun is the shape of one line of `cronlock history --json`, whose fields the README
// lists. Pointers are null when there is no value: exit_code without an exit of the child,
// exit while running, for abandoned runs and rows from before it was recorded, signal
// without a signal, finished_at and duration_ms while the end is unknown, scheduled_for
// without --schedule.
type jsonRun struct {
	ID           string   `json:"id"`
	Key          string   `json:"key"`
	Node         string   `json:"node"`
	PID          int      `json:"pid"`
	Command      []string `json:"command"`
	Status       string   `json:"status"`
	ExitCode     *int     `json:"exit_code"`
	Signal       *string  `json:"signal"`
	ScheduledFor *string  `json:"scheduled_for"` // before started_at: the tick, then when the run began
	StartedAt    string   `json:"started_at"`
	FinishedAt   *string  `json:"finished_at"`
	DurationMS   *int64   `json:"duration_ms"`
	Error        string   `json:"error"`
	Holder       string   `json:"holder"`
	FencingToken uint64   `json:"fencing_token"`
	Exit         *int     `json:"exit"`
	Backend      string   `json:"backend"`
	Attempt      int      `json:"attempt"`
	RunID        string   `json:"run_id"` // the first try's id; id itself for a run of one try
	Try          int      `json:"try"`
	TickAttempt  *int     `json:"tick_attempt"` // null without --schedule
	TakeoverOf   *string  `json:"takeover_of"`  // null unless a standby took the tick over
}

// MarshalJSON encodes r in the documented JSON shape: times in RFC 3339 UTC, nulls for
// missing values, command always an array. Output is not included (it is binary).
func (r Run) MarshalJSON() ([]byte, error) {
	j := jsonRun{
		ID: r.ID, Key: r.Key, Node: r.Node, PID: r.PID, Command: r.Command,
		Status: r.Status, ExitCode: r.ExitCode, StartedAt: r.StartedAt.UTC().Format(time.RFC3339Nano),
		Error: r.Error, Holder: r.Holder, FencingToken: r.FencingToken, Backend: r.Backend,
		Attempt: max(r.Attempt, 1), Exit: r.Exit, RunID: r.RunID, Try: max(r.Try, 1),
	}
	if j.RunID == "" {
		j.RunID = r.ID
	}
	if j.Command == nil {
		j.Command = []string{}
	}
	if !r.ScheduledFor.IsZero() {
		t := r.ScheduledFor.UTC().Format(time.RFC3339)
		j.ScheduledFor = &t
	}
	if !r.ScheduledFor.IsZero() {
		at := max(r.TickAttempt, 1)
		j.TickAttempt = &at
	}
	if r.TakeoverOf != "" {
		to := r.TakeoverOf
		j.TakeoverOf = &to
	}
	if r.Signal != "" {
		sig := r.Signal
		j.Signal = &sig
	}
	if !r.FinishedAt.IsZero() {
		fin := r.FinishedAt.UTC().Format(time.RFC3339Nano)
		j.FinishedAt = &fin
		ms := Millis(r.Duration())
		j.DurationMS = &ms
	}
	// Commands are full of & < >: keep them readable rather than \u0026.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return EscapeControls(bytes.TrimRight(b.Bytes(), "\n")), nil
}

// EscapeControls writes DEL and the C1 controls (U+0080–U+009F, which some terminals
// obey like ESC [), both left raw by encoding/json, as \u escapes: a JSON line read on a
// terminal must not drive it either. b is encoding/json's output, valid UTF-8, in which
// 0xC2 can only start a two-byte character inside a string.
func EscapeControls(b []byte) []byte {
	var out []byte // nil while nothing needs escaping
	for i := 0; i < len(b); i++ {
		c := b[i]
		r := -1
		switch {
		case c == 0x7f:
			r = 0x7f
		case c == 0xc2 && i+1 < len(b) && 0x80 <= b[i+1] && b[i+1] <= 0x9f:
			r = int(b[i+1])
		}
		if r < 0 {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		out = fmt.Appendf(out, `\u%04x`, r)
		if c == 0xc2 {
			i++
		}
	}
	if out == nil {
		return b
	}
	return out
}

// Millis is d in whole milliseconds, rounded to the nearest as the tables round it: a
// 12.6ms run is 13ms in the table and must not be 12 in --json.
func Millis(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }
