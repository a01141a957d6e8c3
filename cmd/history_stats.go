package cmd

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/spf13/cobra"

	"cronlock/history"
	"cronlock/logline"
	"cronlock/runstatus"
	"cronlock/tty"
)

// historyStatsOptions are the settings of `cronlock history stats`.
type historyStatsOptions struct {
	Path     string // the history file, resolved
	ThisNode string // this machine's node name: Reap marks its dead runs abandoned first

	Filter history.StatsFilter

	JSON  bool           // one JSON object per key per line
	UTC   bool           // table times in UTC instead of local time
	Spark bool           // a sparkline of the recent runs (only for a terminal)
	Color bool           // colours (only for a terminal without NO_COLOR)
	Loc   *time.Location // local zone of the table; nil = time.Local

	LogFormat      string // of cronlock's own lines on stderr (--log-format); "" = text
	Stdout, Stderr io.Writer
}

func newHistoryStatsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &historyStatsOptions{Stdout: stdout, Stderr: stderr}
	var flagPath, since, until string
	last := history.DefaultStatsLast
	var fleet bool
	bo := &backendOptions{}
	c := &cobra.Command{
		Use:   "stats [flags]",
		Short: "Per key: counts, success rate, durations, last success and failure",
		Long: `Per key: counts, success rate, durations, last success and failure, failure streak.

Each key is summarised over its window: its newest --last matching runs (default 1000;
0 = every matching run), so stats stay fast on a history of millions of runs. The
success rate is succeeded / (runs - skipped - running); failed, timeout, lock_lost, error
and abandoned count as failures; interrupted runs count in the rate but not as failures.
p50, p95 and max are the durations of the finished, non-skipped runs of the window. The
last success and last failure are looked up among all matching runs, not only the window.
The streak counts the newest failures back to the last success ("1000+": the whole window
failed).

On a terminal, RECENT draws the newest 20 runs, oldest first, newest at the right: a bar
as high as the run was long, coloured by its outcome; without colours (NO_COLOR) failures
show as x and interrupted runs as !. Skipped runs are ·, running runs ?.

--since and --until take a duration ago (36h, 90m, 7d, 1d12h) or a time (2025-06-01,
2025-06-01 15:04, 2025-06-01T15:04:05, RFC 3339), in local time or UTC with --utc; they
select runs by start time, --since inclusive, --until exclusive.

--fleet summarises every host's runs from the fleet's record in Redis or etcd (at most the
CRONLOCK_FLEET_KEEP newest runs of each key are kept there; on Redis the counts and the
success rate come from per-day counters of up to 400 days when those cover more runs,
except with --node).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if last < 0 {
				return &usageError{fmt.Errorf("--last must be 0 (every run) or more, not %d", last)}
			}
			if fleet {
				if c.Flags().Changed("history") {
					return &usageError{fmt.Errorf("--history and --fleet do not go together: --fleet reads the record in Redis or etcd, not a file")}
				}
				if o.Filter.Key != "" {
					if err := checkKey(o.Filter.Key); err != nil {
						return err
					}
				}
				var err error
				if o.Filter.Since, o.Filter.Until, err = parseSinceUntil(since, until, o.UTC, time.Now()); err != nil {
					return err
				}
				o.Filter.Last = last // 0 = every entry kept
				o.LogFormat = logFormatOf(c)
				f, _ := stdout.(*os.File)
				o.Spark, o.Color = tty.IsTerminal(f), wantColor(stdout)
				return historyStatsFleetRun(c, o, bo)
			}
			s, path, err := historySettings(c, &flagPath)
			if err != nil {
				return err
			}
			o.Filter.Last = last
			if last == 0 {
				o.Filter.Last = -1 // history.StatsFilter: < 0 = every run
			}
			if o.Filter.Since, o.Filter.Until, err = parseSinceUntil(since, until, o.UTC, time.Now()); err != nil {
				return err
			}
			o.LogFormat = logFormatOf(c)
			if path == "" {
				logline.Print(stderr, o.LogFormat, logline.Warn, historyOff)
				return nil
			}
			o.Path = path
			o.ThisNode = s.thisNode()
			f, _ := stdout.(*os.File)
			o.Spark = tty.IsTerminal(f) // the sparkline is for people only
			o.Color = wantColor(stdout)
			return historyStatsRun(o)
		},
	}
	f := c.Flags()
	f.StringVar(&flagPath, "history", "", "SQLite history file (env CRONLOCK_HISTORY; default per user)")
	f.StringVarP(&o.Filter.Key, "key", "k", "", "only this key")
	f.StringVar(&o.Filter.Node, "node", "", "only runs of this node")
	f.StringVar(&since, "since", "", "only runs started at or after this time or this long ago (2025-06-01, 7d, 36h)")
	f.StringVar(&until, "until", "", "only runs started before this time or this long ago")
	f.IntVarP(&last, "last", "n", last, "window: the newest N matching runs of each key; 0 = all")
	f.BoolVar(&o.JSON, "json", false, "one JSON object per key per line")
	f.BoolVar(&o.UTC, "utc", false, "show and read times in UTC")
	f.BoolVar(&fleet, "fleet", false, "every host's runs, from the fleet's record in Redis or etcd")
	bo.addFlags(f)
	return c
}

// historyStatsRun prints the stats of the runs of o.Path that o.Filter selects.
func historyStatsRun(o *historyStatsOptions) error {
	hist := &historyOptions{JSON: o.JSON, Stdout: o.Stdout, Stderr: o.Stderr, LogFormat: o.LogFormat} // for noRuns
	if noHistory(o.Path) {
		return noRuns(hist, "no runs recorded yet in "+tty.Escape(o.Path))
	}
	// Dead runs of this machine then count as abandoned (failures), not running.
	s, err := openReaped(o.Path, o.ThisNode, o.Stderr, o.LogFormat, history.OpenRead)
	if err != nil {
		return err
	}
	defer s.Close()
	stats, err := s.Stats(o.Filter)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	if len(stats) == 0 {
		return noRuns(hist, "no runs match")
	}
	if o.JSON {
		return writeStatsJSON(o.Stdout, stats)
	}
	return writeStatsTable(o, stats)
}

// statsJSON is one line of `cronlock history stats --json`. The field names are an
// interface (README, "History"); nulls mark values that do not exist.
type statsJSON struct {
	Key                 string   `json:"key"`
	Runs                int      `json:"runs"`
	Succeeded           int      `json:"succeeded"`
	Failed              int      `json:"failed"`
	Skipped             int      `json:"skipped"`
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

func newStatsJSON(k history.KeyStats) statsJSON {
	j := statsJSON{
		Key: k.Key, Runs: k.Runs, Succeeded: k.Succeeded, Failed: k.Failed, Skipped: k.Skipped,
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
	when := func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format(time.RFC3339Nano)
		return &s
	}
	j.LastSuccess, j.LastFailure = when(k.LastSuccess), when(k.LastFailure)
	return j
}

func writeStatsJSON(w io.Writer, stats []history.KeyStats) error {
	for _, k := range stats {
		if err := writeJSONLine(w, newStatsJSON(k)); err != nil {
			return err
		}
	}
	return nil
}

// writeStatsTable prints one line per key for people; keys are escaped so that a job's
// name cannot drive the reader's terminal.
func writeStatsTable(o *historyStatsOptions, stats []history.KeyStats) error {
	loc := displayZone(o.Loc, o.UTC)
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(loc).Format("2006-01-02 15:04:05 MST")
	}
	header := []string{"KEY", "RUNS", "OK", "FAILED", "SKIPPED", "RATE", "P50", "P95", "MAX", "LAST SUCCESS", "LAST FAILURE", "STREAK"}
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
			p50, p95, mx = statsDuration(k.P50), statsDuration(k.P95), statsDuration(k.Max)
		}
		streak := strconv.Itoa(k.FailureStreak)
		if k.StreakCapped {
			streak += "+"
		}
		row := []string{tty.Escape(k.Key), strconv.Itoa(k.Runs), strconv.Itoa(k.Succeeded),
			strconv.Itoa(k.Failed), strconv.Itoa(k.Skipped), rate, p50, p95, mx,
			when(k.LastSuccess), when(k.LastFailure), streak}
		if o.Spark {
			row = append(row, sparkline(k.Recent, o.Color))
		}
		rows = append(rows, row)
	}
	// Numbers are right-aligned; the sparkline is last, so its colour codes never
	// confuse the widths.
	right := map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 11: true}
	_, err := io.WriteString(o.Stdout, formatTable(rows, right, nil))
	return err
}

// statsDuration: "850ms", "12.3s", "4m5s".
func statsDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// sparkBars are the heights of a run in the sparkline, shortest first.
var sparkBars = []rune("▁▂▃▄▅▆▇█")

// sparkline draws recent (oldest first) right-aligned in history.RecentRuns cells, so
// that the newest run is always in the last column. A finished run is a bar as high as
// it was long (relative to the longest run shown); colour tells the outcome. Without
// colour, only successes keep their bars and the other outcomes get marks that read
// without colour: x failure, ! interrupted. Skipped (·) and running (?) runs are marks in
// both cases, since their duration says nothing about the job.
func sparkline(recent []history.Outcome, useColor bool) string {
	var longest time.Duration
	for _, r := range recent {
		if r.Finished && r.Status != runstatus.Skipped {
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
		case r.Status == runstatus.Skipped:
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
