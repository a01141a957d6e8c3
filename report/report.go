// Package report draws runs as one self-contained HTML page: a timeline with a lane per
// key and node, a bar per run coloured and patterned by status (colour is never the only
// cue), the key's ticks as marks, DUPLICATE, missed, never-fired, takeover and suspension
// marked, and a hover card per run. The page needs no network and no server: CSS, SVG
// and a small script are inline, so it opens from a file or a mail.
//
// It reads nothing itself: it is handed runs, made from the fleet's record (FromFleet)
// or a host's history (FromHistory). It never puts checkpoint values or output on the
// page (the page gets mailed), and every text that comes from a run is escaped.
package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/runstatus"
)

// Run is one bar of the timeline, or with NeverFired > 0 the ticks nobody claimed.
type Run struct {
	ID, Key, Node string
	Status        string    // a runstatus name
	Tick          time.Time // the tick the run was for; zero without --schedule
	Start, End    time.Time // End zero: still running, or unknown (abandoned)
	Duration      time.Duration
	Exit          *int // the code cronlock returned; nil when unknown
	Error         string
	Attempt       int    // attempt of its tick (1, 2 after a takeover…); 0 = unknown
	TakeoverOf    string // the run id this attempt took over
	Duplicate     bool   // lockrun.MarkDuplicates: the job ran twice for a tick or at once
	Count         int    // repeated non-run outcomes of one host collapsed into one; 0 = 1
	// NeverFired > 0 makes this not a run but the ticks of Key that no host claimed:
	// NeverFired of them, the first at Start, the last at End.
	NeverFired int
}

// FromFleet turns entries of the fleet's record (fleetrecord.Read: DUPLICATE marked,
// never-fired ticks counted) into runs. A never_fired entry whose count is unknown (its
// key's schedule could not be read) becomes one mark over its range with a count of 1.
func FromFleet(es []lockrun.FleetEntry) []Run {
	out := make([]Run, 0, len(es))
	for _, e := range es {
		r := Run{ID: e.RunID, Key: e.Key, Node: e.Node, Status: e.Status, Tick: e.ScheduledFor(),
			Start: e.Started(), End: e.Finished(), Duration: time.Duration(e.DurationMS) * time.Millisecond,
			Exit: e.Exit, Error: e.Error, Attempt: e.Attempt, TakeoverOf: e.TakeoverOf,
			Duplicate: e.Duplicate, Count: e.Count}
		if e.Status == lockrun.NeverFiredStatus {
			r.NeverFired = max(e.NeverFired, 1)
			r.Start, r.End = time.UnixMicro(e.NeverFiredFrom).UTC(), time.UnixMicro(e.NeverFiredTo).UTC()
		}
		out = append(out, r)
	}
	return out
}

// FromHistory turns rows of a host's history into runs, marking DUPLICATE with the
// fleet's rule (lockrun.MarkDuplicates) on this host's clock. Skipped rows are left out:
// they are not runs of the job, and a host skips every tick another host runs.
func FromHistory(rs []history.Run) []Run {
	es := make([]lockrun.FleetEntry, 0, len(rs))
	out := make([]Run, 0, len(rs))
	for _, h := range rs {
		if h.Status == runstatus.Skipped {
			continue
		}
		r := Run{ID: h.ID, Key: h.Key, Node: h.Node, Status: h.Status, Tick: h.ScheduledFor,
			Start: h.StartedAt, End: h.FinishedAt, Duration: h.Duration(), Exit: h.Exit,
			Error: h.Error, Attempt: h.TickAttempt, TakeoverOf: h.TakeoverOf}
		out = append(out, r)
		e := lockrun.FleetEntry{RunID: h.RunID, Key: h.Key, Node: h.Node, Status: h.Status,
			StartUS: us(h.StartedAt), EndUS: us(h.FinishedAt), TickUS: us(h.ScheduledFor), TakeoverOf: h.TakeoverOf}
		if e.RunID == "" {
			e.RunID = h.ID
		}
		es = append(es, e)
	}
	lockrun.MarkDuplicates(es)
	for i := range out {
		out[i].Duplicate = es[i].Duplicate
	}
	return out
}

func us(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// Options say what the page is about.
type Options struct {
	// Source names where the runs came from, for the page's heading: "the fleet's record
	// on redis 127.0.0.1:6379/0". Never a password (it is printed as given).
	Source string
	// Since is the start of the window shown; zero = the first run's start.
	Since time.Time
	// Now is when the page is made: the end of running bars and of the window. Zero =
	// time.Now().
	Now time.Time
}

// Write writes the page of runs to w. Its only errors are w's.
func Write(w io.Writer, runs []Run, o Options) error {
	return writePage(w, layout(runs, o))
}

// WriteFile writes the page to path through a temporary file beside it, renamed over
// path once complete: a reader never sees half a page, and a failed write leaves an old
// page as it was. The file is private (0600), as every file cronlock creates; path's
// folder must exist.
func WriteFile(path string, runs []Run, o Options) error {
	var buf bytes.Buffer
	if err := Write(&buf, runs, o); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp") // 0600
	if err != nil {
		return fmt.Errorf("write the report %s: %w", path, unwrapPath(err))
	}
	tmp := f.Name()
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the report %s: %w", path, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the temporary file's name from a *PathError or *LinkError: the user
// named path, not the temporary file.
func unwrapPath(err error) error {
	switch e := err.(type) {
	case *os.PathError:
		return e.Err
	case *os.LinkError:
		return e.Err
	}
	return err
}

// Statuses are the statuses the legend shows, in its order; a run with another status
// is drawn as "other".
var Statuses = []string{runstatus.Succeeded, runstatus.Failed, runstatus.Timeout, runstatus.LockLost,
	runstatus.Interrupted, runstatus.Error, runstatus.Abandoned, runstatus.Missed, runstatus.Suspended,
	runstatus.Retried, runstatus.Running}

// statusClass is the CSS class of a bar of status s.
func statusClass(s string) string {
	if slices.Contains(Statuses, s) {
		return "s-" + s
	}
	return "s-other"
}

// formatting of the card's and the axis's times: UTC, since the page is read anywhere.
const cardTime = "2006-01-02 15:04:05Z"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(cardTime)
}

func fmtExit(x *int) string {
	if x == nil {
		return ""
	}
	return strconv.Itoa(*x)
}
