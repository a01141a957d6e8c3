package cmd

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/schedule"
	"cronlock/table"
	"cronlock/tty"
)

// fleetKeysPerCall is how many keys' records one pipelined call reads when --fleet has
// no --key: each call has its own deadline, as status's walk has.
const fleetKeysPerCall = 200

// openFleet connects to the Redis or etcd that holds the fleet's record, from the backend
// flags and settings alone: a monitoring box needs only the URL.
func openFleet(c *cobra.Command, bo *backendOptions) (lockrun.FleetStore, error) {
	if err := bo.load(c); err != nil {
		return nil, err
	}
	if bo.Backend != "redis" && bo.Backend != "etcd" {
		return nil, &usageError{fmt.Errorf("--fleet reads the fleet's record in Redis or etcd: give --redis or CRONLOCK_REDIS_URL, or --etcd or CRONLOCK_ETCD_ENDPOINTS (the local backend has only this machine's history)")}
	}
	l, err := bo.open()
	if err != nil {
		return nil, exitf(ExitFailed, "%v", err)
	}
	return l.(lockrun.FleetStore), nil
}

// readFleet returns the entries of key (every key with a record when ""), newest first;
// per key at most limit (0 = all kept). Each key's entries are marked DUPLICATE.
func readFleet(l lockrun.FleetStore, key string, limit int) ([]lockrun.FleetEntry, error) {
	ctx := context.Background()
	if key != "" {
		es, err := l.Fleet(ctx, key, limit)
		if err != nil {
			return nil, exitf(ExitFailed, "%v", err)
		}
		countNeverFired(l, es)
		return es, nil
	}
	keys, err := l.FleetKeys(ctx)
	if err != nil {
		return nil, exitf(ExitFailed, "%v", err)
	}
	var all []lockrun.FleetEntry
	for i := 0; i < len(keys); i += fleetKeysPerCall {
		m, err := l.FleetAll(ctx, keys[i:min(i+fleetKeysPerCall, len(keys))], limit)
		if err != nil {
			return nil, exitf(ExitFailed, "%v", err)
		}
		for _, es := range m {
			all = append(all, es...)
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].StartUS > all[b].StartUS })
	countNeverFired(l, all)
	return all, nil
}

// countNeverFired turns the range of each never_fired entry (from just after the last
// claimed tick to the last tick nobody claimed: the acquire script cannot read a
// schedule) into its first tick and count, with the key's schedule from its tick record
// (the claim that found them had the same schedule). One read per key that has such an
// entry; an entry whose schedule cannot be read keeps its range and a count of 0.
func countNeverFired(l lockrun.FleetStore, es []lockrun.FleetEntry) {
	scheds := map[string]*schedule.Schedule{}
	for i := range es {
		e := &es[i]
		if e.Status != lockrun.NeverFiredStatus || e.NeverFired > 0 || e.NeverFiredTo == 0 {
			continue
		}
		s, seen := scheds[e.Key]
		if !seen {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if tr, err := l.TickRecord(ctx, e.Key); err == nil && tr != nil {
				s, _ = schedule.Parse(tr.Expr, tr.TZ)
			}
			cancel()
			scheds[e.Key] = s
		}
		if s == nil {
			continue
		}
		if n, first := s.Count(time.UnixMicro(e.NeverFiredFrom), time.UnixMicro(e.NeverFiredTo), 1000000); n > 0 {
			e.NeverFiredFrom, e.NeverFired = first.UnixMicro(), n
		}
	}
}

// historyFleetRun is `cronlock history --fleet`: every host's runs from the record in
// Redis, with node, tick and DUPLICATE marks.
func historyFleetRun(c *cobra.Command, o *historyOptions, bo *backendOptions) error {
	l, err := openFleet(c, bo)
	if err != nil {
		return err
	}
	defer l.Close()
	// Filters other than the key are applied here, so the whole kept record is read
	// for them; without, the newest --limit of each key is all that travels.
	filtered := o.Status != "" || o.Node != "" || !o.Since.IsZero() || !o.Until.IsZero()
	per := o.Limit
	if filtered {
		per = 0
	}
	es, err := readFleet(l, o.Key, per)
	if err != nil {
		return err
	}
	var out []lockrun.FleetEntry
	for _, e := range es {
		st := e.Started()
		switch {
		case o.Status != "" && e.Status != o.Status, o.Node != "" && e.Node != o.Node,
			!o.Since.IsZero() && st.Before(o.Since), !o.Until.IsZero() && !st.Before(o.Until):
			continue
		}
		out = append(out, e)
	}
	more := o.Limit > 0 && len(out) > o.Limit
	if more {
		out = out[:o.Limit]
	}
	if len(out) == 0 {
		if len(es) == 0 {
			return noRuns(o, "no runs in the fleet's record on "+l.Describe())
		}
		return noRuns(o, "no runs match")
	}
	if o.JSON {
		return writeFleetJSON(o.Stdout, out)
	}
	if err := writeFleetTable(o, out); err != nil {
		return err
	}
	if more || (o.Key == "" && o.Limit > 0 && len(out) == o.Limit) {
		fmt.Fprintf(o.Stderr, "cronlock: the newest %d runs shown; --limit 0 shows every run the record keeps\n", len(out))
	}
	return nil
}

// fleetJSON is one line of `cronlock history --fleet --json`; the names are an interface
// (README, "The fleet's record").
type fleetJSON struct {
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
}

func writeFleetJSON(w io.Writer, es []lockrun.FleetEntry) error {
	when := func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format(time.RFC3339Nano)
		return &s
	}
	for _, e := range es {
		j := fleetJSON{ID: e.RunID, Key: e.Key, Node: e.Node, Status: e.Status, Exit: e.Exit,
			Signal: e.Signal, ScheduledFor: when(e.ScheduledFor()),
			StartedAt: e.Started().Format(time.RFC3339Nano), FinishedAt: when(e.Finished()),
			DurationMS: e.DurationMS, Tries: e.Tries, FencingToken: e.Fence, Error: e.Error,
			Skips: e.Skips, Duplicate: e.Duplicate, DataLoss: e.DataLoss, ScheduleWas: e.ScheduleWas,
			ScheduleFlip: e.Flip, NeverFired: e.NeverFired, Count: e.Count, LastAt: when(usTime(e.LastUS)), Version: e.Version}
		if e.NeverFiredTo != 0 {
			j.NeverFiredFrom = when(time.UnixMicro(e.NeverFiredFrom))
			j.NeverFiredTo = when(time.UnixMicro(e.NeverFiredTo))
		}
		// The record is written by every host.
		if err := writeJSONLine(w, j); err != nil {
			return err
		}
	}
	return nil
}

// writeFleetTable prints the entries for people; every string from the record is escaped.
// The ID column is the shortest start of each run id that no other entry listed shares:
// the record cannot be searched by a prefix, so it is unique among these runs, and
// `history show` on the run's node takes it (or more of the id, should that host's file
// hold another run that starts the same).
func writeFleetTable(o *historyOptions, es []lockrun.FleetEntry) error {
	loc := displayZone(o.Loc, o.UTC)
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
			dur = statsDuration(time.Duration(e.DurationMS) * time.Millisecond)
		}
		tick := "-"
		if t := e.ScheduledFor(); !t.IsZero() {
			tick = t.In(loc).Format("2006-01-02 15:04 MST")
		}
		var note []string
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
	_, err := io.WriteString(o.Stdout, table.Format(rows, table.Options{Width: o.Width, Cut: []int{noteCol}}))
	return err
}

// historyStatsFleetRun is `cronlock history stats --fleet`: per-key stats of the
// fleet's record, in the format of history stats.
func historyStatsFleetRun(c *cobra.Command, o *historyStatsOptions, bo *backendOptions) error {
	l, err := openFleet(c, bo)
	if err != nil {
		return err
	}
	defer l.Close()
	es, err := readFleet(l, o.Filter.Key, 0)
	if err != nil {
		return err
	}
	byKey := map[string][]history.RunTimes{}
	var keys []string
	truncated := map[string]bool{}
	for _, e := range es {
		st := e.Started()
		switch {
		case o.Filter.Node != "" && e.Node != o.Filter.Node,
			!o.Filter.Since.IsZero() && st.Before(o.Filter.Since),
			!o.Filter.Until.IsZero() && !st.Before(o.Filter.Until):
			continue
		}
		if e.Status == lockrun.NeverFiredStatus {
			continue // not a run
		}
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		if o.Filter.Last > 0 && len(byKey[e.Key]) >= o.Filter.Last {
			truncated[e.Key] = true
			continue
		}
		rt := history.RunTimes{Status: e.Status, Started: st}
		if e.EndUS != 0 {
			rt.Finished = st.Add(time.Duration(e.DurationMS) * time.Millisecond)
		}
		byKey[e.Key] = append(byKey[e.Key], rt)
	}
	sort.Strings(keys)
	var stats []history.KeyStats
	var days map[string][]lockrun.DayCount
	if dc, ok := l.(fleetDayCounter); ok && o.Filter.Node == "" && len(keys) > 0 {
		if days, err = dc.FleetDays(context.Background(), keys); err != nil {
			return exitf(ExitFailed, "%v", err)
		}
	}
	for _, k := range keys {
		ks := history.Summarise(k, byKey[k], truncated[k])
		countBeyondEntries(&ks, days[k], o.Filter.Since, o.Filter.Until)
		stats = append(stats, ks)
	}
	hist := &historyOptions{JSON: o.JSON, Stdout: o.Stdout, Stderr: o.Stderr, LogFormat: o.LogFormat}
	if len(stats) == 0 {
		return noRuns(hist, "no runs match in the fleet's record on "+l.Describe())
	}
	if o.JSON {
		return writeStatsJSON(o.Stdout, stats)
	}
	return writeStatsTable(o, stats)
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

// fleetDayCounter is a fleet store that keeps per-day counters of each key's runs.
type fleetDayCounter interface {
	FleetDays(ctx context.Context, keys []string) (map[string][]lockrun.DayCount, error)
}

// countBeyondEntries replaces the counts of ks, made from the entries the ledger keeps,
// with the key's per-day counters over the days from since to until (whole days of the
// backend's clock, UTC), when those count more runs: the success rate then covers up to
// 400 days, not only the newest CRONLOCK_FLEET_KEEP entries. Durations, the last success
// and failure and the streak stay the entries'. A run the counters saw claimed and never
// complete (killed, lost) counts as a failure, as abandoned does.
func countBeyondEntries(ks *history.KeyStats, days []lockrun.DayCount, since, until time.Time) {
	var c lockrun.DayCount
	for _, d := range days {
		if !since.IsZero() && d.Day.Before(since.UTC().Truncate(24*time.Hour)) || !until.IsZero() && !d.Day.Before(until) {
			continue
		}
		c.Runs += d.Runs
		c.Succeeded += d.Succeeded
		c.Interrupted += d.Interrupted
	}
	if c.Runs <= ks.Runs {
		return
	}
	ks.Runs, ks.Succeeded, ks.Interrupted = c.Runs, c.Succeeded, c.Interrupted
	ks.Failed = max(c.Runs-c.Succeeded-c.Interrupted-ks.Running, 0)
	ks.Truncated = false // the counts cover every run of those days
}
