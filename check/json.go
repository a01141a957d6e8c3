package check

import (
	"bytes"
	"encoding/json"
	"time"
)

// JSON is the verdict as check --json prints it: one line, for scripts, safe from what a
// Nagios does to a plugin's output (see pluginSafeJSON).
func (r Result) JSON() ([]byte, error) {
	b, err := json.Marshal(r.jsonObject())
	if err != nil {
		return nil, err
	}
	return pluginSafeJSON(b), nil
}

// resultJSON is check's --json object.
type resultJSON struct {
	State       string     `json:"state"`
	ExitCode    int        `json:"exit_code"`
	Key         string     `json:"key"`
	Summary     string     `json:"summary"`
	Reasons     []string   `json:"reasons"`
	Due         *time.Time `json:"due"`          // null without a schedule
	LastSuccess *time.Time `json:"last_success"` // null when none is recorded
	AgeS        *int64     `json:"age_s"`        // null with last_success
	Failures    int        `json:"failures"`
	DurationS   *float64   `json:"duration_s"` // null when no finished run ran the job
	LatenessS   *float64   `json:"lateness_s"` // null when no run of a tick started its job
	Perfdata    string     `json:"perfdata"`
	Line        string     `json:"line"`
	Details     []string   `json:"details"`
}

// pluginSafeJSON writes the two characters a Nagios would damage in a plugin's output as
// JSON escapes, which every decoder reads back as they were: "|" (Nagios cuts the output
// there and reads the rest as perfdata) and ";" (it turns them into ":"). In JSON text
// both occur only inside strings, where \u007c and \u003b mean the same; the text stays
// one line, so Nagios keeps it whole as the plugin's output.
func pluginSafeJSON(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("|"), []byte(`\u007c`))
	return bytes.ReplaceAll(b, []byte(";"), []byte(`\u003b`))
}

func (r Result) jsonObject() resultJSON {
	j := resultJSON{State: r.State.String(), ExitCode: ExitCode(r.State), Key: r.Key,
		Summary: r.Summary(), Reasons: r.Reasons, Failures: r.Failures, Line: r.Line(), Details: r.Details}
	if j.Reasons == nil {
		j.Reasons = []string{}
	}
	if j.Details == nil {
		j.Details = []string{}
	}
	if r.Duration != nil {
		s := r.Duration.Round(time.Millisecond).Seconds()
		j.DurationS = &s
	}
	if r.Lateness != nil {
		s := r.Lateness.Round(time.Millisecond).Seconds()
		j.LatenessS = &s
	}
	if !r.Due.IsZero() {
		d := r.Due.UTC()
		j.Due = &d
	}
	if !r.LastSuccess.IsZero() {
		t, age := r.LastSuccess.UTC(), int64(r.Age.Seconds())
		j.LastSuccess, j.AgeS = &t, &age
	}
	j.Perfdata = r.PerfData()
	return j
}
