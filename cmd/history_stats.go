package cmd

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"cronlock/history"
	"cronlock/logline"
	"cronlock/runview"
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
	return writeStats(o, stats)
}

// writeStats prints stats as o asks: JSON lines, or a table.
func writeStats(o *historyStatsOptions, stats []history.KeyStats) error {
	if o.JSON {
		return runview.WriteStatsJSON(o.Stdout, stats)
	}
	return runview.WriteStatsTable(o.Stdout, stats, runview.Options{Loc: o.Loc, UTC: o.UTC, Color: o.Color, Spark: o.Spark})
}
