package runview

import (
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fatih/color"

	"cronlock/history"
	"cronlock/runstatus"
	"cronlock/table"
	"cronlock/tty"
)

// StatsJSON is one line of `cronlock history stats --json`. The field names are an
// interface (README, "History"); nulls mark values that do not exist.
type StatsJSON struct {
	Key                 string   `json:"key"`
	Runs                int      `json:"runs"`
	Succeeded           int      `json:"succeeded"`
	Failed              int      `json:"failed"`
	Skipped             int      `json:"skipped"`
	Suspended           int      `json:"suspended"`
	Interrupted         int      `json:"interrupted"`
	Running             int      `json:"running"`
	SuccessRate         *float64 `json:"success_rate"`
	P50MS               *int64   `json:"p50_ms"`
	P95MS               *int64   `json:"p95_ms"`
	MaxMS               *int64   `json:"max_ms"`
	LastSuccess         *string  `json:"last_success"`
	LastFailure         *string  `json:"last_failure"`
	FailureStreak       int      `json:"failure_streak"`
	FailureStreakCapped bool     `json:"failure_streak_capped"`
	OldestStartedAt     string   `json:"oldest_started_at"`
	NewestStartedAt     string   `json:"newest_started_at"`
	Truncated           bool     `json:"truncated"`
}

// NewStatsJSON is k as one line of stats --json.
func NewStatsJSON(k history.KeyStats) StatsJSON {
	j := StatsJSON{
		Key: k.Key, Runs: k.Runs, Succeeded: k.Succeeded, Failed: k.Failed, Skipped: k.Skipped,
		Suspended:   k.Suspended,
		Interrupted: k.Interrupted, Running: k.Running,
		FailureStreak: k.FailureStreak, FailureStreakCapped: k.StreakCapped,
		OldestStartedAt: k.Oldest.UTC().Format(time.RFC3339Nano),
		NewestStartedAt: k.Newest.UTC().Format(time.RFC3339Nano),
		Truncated:       k.Truncated,
	}
	if r, ok := k.SuccessRate(); ok {
		j.SuccessRate = &r
	}
	if k.Timed > 0 {
		ms := func(d time.Duration) *int64 { v := history.Millis(d); return &v }
		j.P50MS, j.P95MS, j.MaxMS = ms(k.P50), ms(k.P95), ms(k.Max)
	}
	j.LastSuccess, j.LastFailure = utcOrNull(k.LastSuccess), utcOrNull(k.LastFailure)
	return j
}

// utcOrNull is t in RFC 3339 UTC for JSON, nil (null) for the zero time.
func utcOrNull(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// WriteStatsJSON prints one JSON line per key.
func WriteStatsJSON(w io.Writer, stats []history.KeyStats) error {
	for _, k := range stats {
		if err := WriteJSONLine(w, NewStatsJSON(k)); err != nil {
			return err
		}
	}
	return nil
}

// WriteStatsTable prints one line per key for people, with a RECENT sparkline when
// o.Spark; keys are escaped so that a job's name cannot drive the reader's terminal.
func WriteStatsTable(w io.Writer, stats []history.KeyStats, o Options) error {
	loc := Zone(o.Loc, o.UTC)
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(loc).Format("2006-01-02 15:04:05 MST")
	}
	header := []string{"KEY", "RUNS", "OK", "FAILED", "SKIPPED", "RATE", "P50", "P95", "MAX", "LAST SUCCESS", "LAST FAILURE", "STREAK"}
	// Runs of a suspended key are shown in SKIPPED as "N+Ms" (M suspended): neither
	// counts in the rate, and a key that was never suspended reads as before.
	skipped := func(k history.KeyStats) string {
		if k.Suspended == 0 {
			return strconv.Itoa(k.Skipped)
		}
		return strconv.Itoa(k.Skipped) + "+" + strconv.Itoa(k.Suspended) + "s"
	}
	if o.Spark {
		header = append(header, "RECENT")
	}
	rows := [][]string{header}
	for _, k := range stats {
		rate := "-"
		if r, ok := k.SuccessRate(); ok {
			rate = strconv.FormatFloat(100*r, 'f', 1, 64) + "%"
		}
		p50, p95, mx := "-", "-", "-"
		if k.Timed > 0 {
			p50, p95, mx = Duration(k.P50), Duration(k.P95), Duration(k.Max)
		}
		streak := strconv.Itoa(k.FailureStreak)
		if k.StreakCapped {
			streak += "+"
		}
		row := []string{tty.Escape(k.Key), strconv.Itoa(k.Runs), strconv.Itoa(k.Succeeded),
			strconv.Itoa(k.Failed), skipped(k), rate, p50, p95, mx,
			when(k.LastSuccess), when(k.LastFailure), streak}
		if o.Spark {
			row = append(row, Sparkline(k.Recent, o.Color))
		}
		rows = append(rows, row)
	}
	// Numbers are right-aligned; the sparkline is last, so its colour codes never
	// confuse the widths.
	right := map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 11: true}
	_, err := io.WriteString(w, table.Format(rows, table.Options{Right: right}))
	return err
}

// sparkBars are the heights of a run in the sparkline, shortest first.
var sparkBars = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws recent (oldest first) right-aligned in history.RecentRuns cells, so
// that the newest run is always in the last column. A finished run is a bar as high as
// it was long (relative to the longest run shown); colour tells the outcome. Without
// colour, only successes keep their bars and the other outcomes get marks that read
// without colour: x failure, ! interrupted. Skipped (·) and running (?) runs are marks in
// both cases, since their duration says nothing about the job.
func Sparkline(recent []history.Outcome, useColor bool) string {
	var longest time.Duration
	for _, r := range recent {
		if r.Finished && r.Status != runstatus.Skipped && r.Status != runstatus.Suspended {
			longest = max(longest, r.Duration)
		}
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", max(history.RecentRuns-len(recent), 0)))
	for _, r := range recent {
		bar := sparkBars[0]
		if longest > 0 {
			i := int(math.Ceil(float64(r.Duration)/float64(longest)*float64(len(sparkBars)))) - 1
			bar = sparkBars[min(max(i, 0), len(sparkBars)-1)]
		}
		mark := string(bar)
		attr := statusColors[r.Status]
		switch {
		case r.Status == runstatus.Skipped || r.Status == runstatus.Suspended:
			mark = "·"
		case r.Status == runstatus.Running:
			mark = "?"
		case !r.Finished || !useColor && runstatus.CountsAsFailure(r.Status):
			mark = "x" // abandoned has no duration to draw
		case !useColor && r.Status == runstatus.Interrupted:
			mark = "!"
		}
		if useColor && attr != 0 {
			c := color.New(attr)
			c.EnableColor() // useColor already decided; the package default looks at os.Stdout
			mark = c.Sprint(mark)
		}
		b.WriteString(mark)
	}
	return b.String()
}
