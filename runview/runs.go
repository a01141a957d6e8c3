// Package runview shows recorded runs: this machine's history rows (as a table, or one
// run in full with its output tail), the entries of the fleet's record and per-key stats,
// as tables for people and as JSON lines for programs. Every string that comes from a job
// or another host is escaped on the way out, so that none can drive the reader's
// terminal. It reads no store and filters nothing: the commands hand it the rows to show
// and decide whether there is a terminal, colour and a width to fit.
package runview

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fatih/color"

	"cronlock/history"
	"cronlock/runstatus"
	"cronlock/table"
	"cronlock/tty"
)

// Options say how a table is laid out. The zero value shows local times, no colour, no
// sparkline, and never cuts a cell.
type Options struct {
	Loc   *time.Location // zone of the times shown; nil = time.Local
	UTC   bool           // times in UTC, whatever Loc is
	Color bool           // colour statuses (the caller decides: a terminal without NO_COLOR)
	Width int            // cut the free-text columns so that lines fit this many columns; 0 = never
	Spark bool           // stats only: a RECENT column with a sparkline of the newest runs
}

// Zone is the zone of times shown to people: loc (time.Local when nil), or UTC with utc.
func Zone(loc *time.Location, utc bool) *time.Location {
	if utc {
		return time.UTC
	}
	if loc == nil {
		return time.Local
	}
	return loc
}

// WriteJSONLine prints v as one line of JSON for `--json`. json.Marshal escapes the C0
// controls; DEL and the C1 controls, which it leaves as they are, are escaped too, so that
// strings from a job or another host cannot drive the reader's terminal.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(history.EscapeControls(b), '\n'))
	return err
}

// WriteRunsJSON prints one JSON line per run, fields as the README's "History" lists them.
func WriteRunsJSON(w io.Writer, runs []history.Run) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range runs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// statusColors: failures (runstatus.Failures) red, successes green, interrupted runs
// magenta, skips and retried tries yellow, live runs cyan.
var statusColors = func() map[string]color.Attribute {
	c := map[string]color.Attribute{
		runstatus.Succeeded:   color.FgGreen,
		runstatus.Interrupted: color.FgMagenta,
		runstatus.Skipped:     color.FgYellow,
		runstatus.Suspended:   color.FgYellow,
		runstatus.Retried:     color.FgYellow,
		runstatus.Running:     color.FgCyan,
	}
	for _, s := range runstatus.Failures {
		c[s] = color.FgRed
	}
	return c
}()

// WriteRunsTable prints runs for people, newest first as given; short maps a run id to
// the prefix shown in the ID column (the whole id when it has none). Columns are padded by
// hand because colour codes would confuse text/tabwriter's widths.
func WriteRunsTable(w io.Writer, runs []history.Run, short map[string]string, o Options) error {
	loc := Zone(o.Loc, o.UTC)
	header := []string{"ID", "STARTED", "KEY", "NODE", "STATUS", "EXIT", "DURATION", "COMMAND", "NOTE"}
	const statusCol, commandCol, noteCol = 4, 7, 8
	rows := [][]string{header}
	for _, r := range runs {
		// What cron saw; rows from before it was recorded fall back to the child's exit.
		exit := "-"
		switch {
		case r.Exit != nil:
			exit = strconv.Itoa(*r.Exit)
		case r.ExitCode != nil:
			exit = strconv.Itoa(*r.ExitCode)
		case r.Signal != "":
			exit = r.Signal
		}
		note := r.Error
		if r.Status == runstatus.Skipped && r.Holder != "" && r.Error == "" { // a tick skip says so in Error
			note = "held by " + r.Holder
		}
		if r.Try > 1 && r.Status != runstatus.Retried { // a retried try's error names its try
			note = strings.TrimSuffix("try "+strconv.Itoa(r.Try)+"; "+note, "; ")
		}
		id := short[r.ID]
		if id == "" {
			id = r.ID
		}
		rows = append(rows, []string{
			tty.Escape(id), r.StartedAt.In(loc).Format("2006-01-02 15:04:05 MST"),
			tty.Escape(r.Key), tty.Escape(r.Node), tty.Escape(r.Status), tty.Escape(exit),
			RunDuration(r), tty.Command(r.Command), tty.Escape(note),
		})
	}
	paint := func(n, col int, cell string) string {
		if col == statusCol && n > 0 && o.Color {
			if attr, ok := statusColors[runs[n-1].Status]; ok {
				c := color.New(attr)
				c.EnableColor() // o.Color already decided; the package default looks at os.Stdout
				return c.Sprint(cell)
			}
		}
		return cell
	}
	_, err := io.WriteString(w, table.Format(rows, table.Options{Paint: paint, Width: o.Width, Cut: []int{commandCol, noteCol}}))
	return err
}

// RunDuration is how long r took (Duration); "-" while the end is unknown.
func RunDuration(r history.Run) string {
	if r.FinishedAt.IsZero() {
		return "-"
	}
	return Duration(r.Duration())
}

// Duration is d for a table: "850ms", "12.3s", "4m5s".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// checkpointShown is how many bytes of a checkpoint history show prints; the rest is
// in history --json.
const checkpointShown = 200

// CheckpointLine is the checkpoint line of history show: "none", or the size of the run's
// last checkpoint, when it was saved, and its first bytes escaped like an output tail
// (a job's bytes must not drive the reader's terminal).
func CheckpointLine(r history.Run, when string) string {
	if r.CheckpointAt.IsZero() {
		return "none"
	}
	v := r.Checkpoint
	more := ""
	if len(v) > checkpointShown {
		n := checkpointShown
		for n > checkpointShown-4 && !utf8.RuneStart(v[n]) {
			n-- // not inside a character, which would show as \x escapes
		}
		v, more = v[:n], "…"
	}
	return fmt.Sprintf("%d bytes, saved %s: %s%s", len(r.Checkpoint), when, tty.Escape(string(v)), more)
}
