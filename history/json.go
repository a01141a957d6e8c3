package history

import (
	"bytes"
	"encoding/json"
	"time"
)

// jsonRun is the shape of one line of `cronlock history --json` (SPEC §6). Pointers are
// null when there is no value: exit_code without an exit, signal without a signal,
// finished_at and duration_ms while the end is unknown.
type jsonRun struct {
	ID           string   `json:"id"`
	Key          string   `json:"key"`
	Node         string   `json:"node"`
	PID          int      `json:"pid"`
	Command      []string `json:"command"`
	Status       string   `json:"status"`
	ExitCode     *int     `json:"exit_code"`
	Signal       *string  `json:"signal"`
	StartedAt    string   `json:"started_at"`
	FinishedAt   *string  `json:"finished_at"`
	DurationMS   *int64   `json:"duration_ms"`
	Error        string   `json:"error"`
	Holder       string   `json:"holder"`
	FencingToken uint64   `json:"fencing_token"`
	Backend      string   `json:"backend"`
}

// MarshalJSON encodes r in the documented JSON shape: times in RFC 3339 UTC, nulls for
// missing values, command always an array. Output is not included (it is binary).
func (r Run) MarshalJSON() ([]byte, error) {
	j := jsonRun{
		ID: r.ID, Key: r.Key, Node: r.Node, PID: r.PID, Command: r.Command,
		Status: r.Status, ExitCode: r.ExitCode, StartedAt: r.StartedAt.UTC().Format(time.RFC3339Nano),
		Error: r.Error, Holder: r.Holder, FencingToken: r.FencingToken, Backend: r.Backend,
	}
	if j.Command == nil {
		j.Command = []string{}
	}
	if r.Signal != "" {
		sig := r.Signal
		j.Signal = &sig
	}
	if !r.FinishedAt.IsZero() {
		fin := r.FinishedAt.UTC().Format(time.RFC3339Nano)
		j.FinishedAt = &fin
		ms := r.Duration().Milliseconds()
		j.DurationMS = &ms
	}
	// Commands are full of & < >: keep them readable rather than \u0026.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
