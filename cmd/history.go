package cmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cronlock/history"
	"cronlock/logline"
	"cronlock/runstatus"
	"cronlock/runview"
	"cronlock/tty"
)

// historyOptions are the settings of `cronlock history`.
type historyOptions struct {
	Path     string // the history file, resolved (historyPath)
	ThisNode string // this machine's node name: Reap marks its dead runs abandoned

	Key, Status, Node string    // filters; "" = any
	Limit             int       // newest N rows; 0 = all
	Since, Until      time.Time // started at or after Since, before Until; zero = no bound

	JSON  bool           // one JSON object per line, fields as README "History" lists them
	UTC   bool           // table times in UTC instead of local time
	Color bool           // colour statuses (only for a terminal without NO_COLOR)
	Width int            // cut COMMAND and NOTE so that table lines fit this many columns; 0 = never
	Loc   *time.Location // local zone of the table; nil = time.Local

	LogFormat      string // of cronlock's own lines on stderr (--log-format); "" = text
	Stdout, Stderr io.Writer
}

// historyTwins maps history's flags to their environment/config names.
var historyTwins = twins("history")

func newHistoryCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &historyOptions{Limit: 20, Stdout: stdout, Stderr: stderr}
	var flagPath, since, until string
	var fleet, wide bool
	bo := &backendOptions{}
	c := &cobra.Command{
		Use:   "history [flags]",
		Short: "List recorded runs, newest first",
		Long: `List recorded runs, newest first. Runs whose cronlock died are marked abandoned first.

The table shows local times with their zone (--utc for UTC); --json prints one JSON object
per line with id, key, node, pid, command, status, exit_code, signal, started_at,
finished_at (RFC 3339, UTC), duration_ms, error, holder, fencing_token, backend, exit,
attempt (how many times the run asked for the lock) and scheduled_for (the --schedule
tick, RFC 3339 UTC, null without one). The newest 20 runs are shown unless
--limit says otherwise; when older ones match too, a line on stderr says so.

The ID column is the shortest start of each run id (7 characters or more) that no other
run in the file shares: history show takes it, or any longer part of the id.

On a terminal, COMMAND and NOTE are cut with "…" so that each line fits its width
(COLUMNS when set, else the terminal's own); --wide shows them whole. Through a pipe
or into a file nothing is cut unless COLUMNS is set, as ps does.

EXIT (exit in JSON) is the code cronlock returned, what cron saw: the job's own, 124 for
a timeout, 127 for a missing command, the conflict code for a skip. exit_code is the
job's own code, null when it died of a signal or never started.

--since and --until select runs by start time (--since inclusive, --until exclusive); each
takes a duration ago (36h, 90m, 7d, 1d12h) or a time (2025-06-01, 2025-06-01 15:04,
2025-06-01T15:04:05, RFC 3339), in local time or UTC with --utc.

--fleet lists every host's runs from the fleet's record in Redis (or etcd) instead of this
machine's file: any host with the Redis URL can read it. Its table shows each run's tick
and marks DUPLICATE two runs of one key that claimed the same tick or held the lock at
overlapping times (on the Redis clock); --json adds "duplicate", "skips", "tries". A
claimed tick whose lock expired without an entry shows as abandoned, a run still holding
the lock as running.`,
		Args: subcommandArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if !wide {
				o.Width = tableWidth(stdout)
			}
			if fleet {
				return historyFleetCmd(c, o, bo, since, until)
			}
			s, path, err := historySettings(c, &flagPath)
			if err != nil {
				return err
			}
			if o.Limit < 0 {
				return &usageError{fmt.Errorf("--limit must be 0 (all) or more, not %d", o.Limit)}
			}
			if o.Status != "" && !runstatus.Valid(o.Status) {
				return &usageError{fmt.Errorf("--status %q is not one of %s", o.Status, strings.Join(runstatus.All, ", "))}
			}
			if o.Since, o.Until, err = parseSinceUntil(since, until, o.UTC, time.Now()); err != nil {
				return err
			}
			o.LogFormat = logFormatOf(c)
			if path == "" {
				logline.Print(stderr, o.LogFormat, logline.Warn, historyOff)
				return nil
			}
			o.Path = path
			o.ThisNode = s.thisNode()
			o.Color = wantColor(stdout)
			return historyRun(o)
		},
	}
	f := c.Flags()
	f.StringVar(&flagPath, "history", "", "SQLite history file (env CRONLOCK_HISTORY; default per user)")
	f.StringVarP(&o.Key, "key", "k", "", "only runs of this key")
	f.IntVarP(&o.Limit, "limit", "n", o.Limit, "newest N runs; 0 = all")
	f.StringVar(&o.Status, "status", "", "only runs with this status ("+strings.Join(runstatus.All, ", ")+")")
	f.StringVar(&o.Node, "node", "", "only runs of this node")
	f.BoolVar(&o.JSON, "json", false, "one JSON object per line")
	f.BoolVar(&o.UTC, "utc", false, "show times in UTC")
	f.StringVar(&since, "since", "", "only runs started at or after this time or this long ago (2025-06-01, 7d, 36h)")
	f.StringVar(&until, "until", "", "only runs started before this time or this long ago")
	f.BoolVar(&fleet, "fleet", false, "every host's runs, from the fleet's record in Redis or etcd")
	f.BoolVar(&wide, "wide", false, "never cut COMMAND or NOTE to fit the terminal")
	bo.addFlags(f)
	c.AddCommand(newHistoryShowCmd(stdout))
	c.AddCommand(newHistoryStatsCmd(stdout, stderr))
	c.AddCommand(newHistoryPruneCmd(stdout, stderr))
	return c
}

// historyFleetCmd checks history's flags for --fleet and runs it.
func historyFleetCmd(c *cobra.Command, o *historyOptions, bo *backendOptions, since, until string) error {
	if c.Flags().Changed("history") {
		return &usageError{fmt.Errorf("--history and --fleet do not go together: --fleet reads the record in Redis or etcd, not a file")}
	}
	if o.Limit < 0 {
		return &usageError{fmt.Errorf("--limit must be 0 (all) or more, not %d", o.Limit)}
	}
	if o.Status != "" && !runstatus.Valid(o.Status) {
		return &usageError{fmt.Errorf("--status %q is not one of %s", o.Status, strings.Join(runstatus.All, ", "))}
	}
	if o.Key != "" {
		if err := checkKey(o.Key); err != nil {
			return err
		}
	}
	var err error
	if o.Since, o.Until, err = parseSinceUntil(since, until, o.UTC, time.Now()); err != nil {
		return err
	}
	o.LogFormat = logFormatOf(c)
	return historyFleetRun(c, o, bo)
}

// historyOff says why a history command has nothing to read.
const historyOff = `the history is off (--history or CRONLOCK_HISTORY is "off")`

// historySettings reads the settings of a history command and resolves its file:
// --history (bound to *flagPath), then CRONLOCK_HISTORY from the environment or the
// config file, then the per-user default. An empty path means the history is off.
func historySettings(c *cobra.Command, flagPath *string) (*settings, string, error) {
	s, err := loadSettings()
	if err != nil {
		return nil, "", exitf(ExitFailed, "%v", err)
	}
	if err := s.apply(c.Flags(), historyTwins); err != nil {
		return nil, "", &usageError{err}
	}
	if !isOff(*flagPath) {
		if err := s.checkAbsPath(c.Flags(), "history", "CRONLOCK_HISTORY", *flagPath, "/var/lib/cronlock/history.db"); err != nil {
			return nil, "", exitf(ExitFailed, "%v", err)
		}
	}
	path, err := historyPath(*flagPath)
	if err != nil {
		return nil, "", exitf(ExitFailed, "%v", err)
	}
	return s, path, nil
}

// wantColor: colours only on a terminal, and never with NO_COLOR (https://no-color.org:
// set and not empty).
func wantColor(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	return tty.IsTerminal(f)
}

// historyRun lists the runs of o.Path as o asks.
func historyRun(o *historyOptions) error {
	if noHistory(o.Path) {
		return noRuns(o, "no runs recorded yet in "+tty.Escape(o.Path))
	}
	s, err := openReaped(o.Path, o.ThisNode, o.Stderr, o.LogFormat, history.OpenRead)
	if err != nil {
		return err
	}
	defer s.Close()
	f := history.Filter{Key: o.Key, Status: o.Status, Node: o.Node, Limit: o.Limit, Since: o.Since, Until: o.Until}
	if o.Limit > 0 {
		// One more than shown says whether older runs exist; counting them all would
		// cost a walk of every matching row, a million on a busy host.
		f.Limit++
	}
	runs, err := s.List(f)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	older := o.Limit > 0 && len(runs) > o.Limit
	if older {
		runs = runs[:o.Limit]
	}
	if len(runs) == 0 {
		if o.Key == "" && o.Status == "" && o.Node == "" && o.Since.IsZero() && o.Until.IsZero() {
			return noRuns(o, "no runs recorded yet in "+tty.Escape(o.Path))
		}
		return noRuns(o, "no runs match")
	}
	if o.JSON {
		return runview.WriteRunsJSON(o.Stdout, runs)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	short, err := s.ShortIDs(ids)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	if err := runview.WriteRunsTable(o.Stdout, runs, short, o.view()); err != nil {
		return err
	}
	// The default view is the newest 20: say when there are older ones, or a reader
	// takes the table for the whole history. On stderr, so that a script reading the
	// table gets rows only.
	if older {
		fmt.Fprintf(o.Stderr, "cronlock: the newest %d runs shown, older ones exist; --limit 0 shows all, --limit N the newest N\n", len(runs))
	}
	return nil
}

// tableWidth is the width a table on w should fit (tty.Columns): COLUMNS, else the
// terminal's; 0 (no limit) for a pipe or a file.
func tableWidth(w io.Writer) int {
	f, _ := w.(*os.File)
	return tty.Columns(f)
}

// view is how o lays a table out.
func (o *historyOptions) view() runview.Options {
	return runview.Options{Loc: o.Loc, UTC: o.UTC, Color: o.Color, Width: o.Width}
}

// noRuns says there is nothing to list: on stdout for people, on stderr with --json so
// that the output stays valid JSON lines (none).
func noRuns(o *historyOptions, msg string) error {
	if o.JSON {
		logline.Print(o.Stderr, o.LogFormat, logline.Verbose, msg)
		return nil
	}
	_, err := fmt.Fprintln(o.Stdout, msg)
	return err
}

// openReaped is history.OpenReaped for a history command: a failure to open exits
// ExitFailed, and the warnings go to stderr in format.
func openReaped(path, thisNode string, stderr io.Writer, format string, open func(string) (*history.Store, error)) (*history.Store, error) {
	s, err := history.OpenReaped(path, thisNode, open, func(msg string) { logline.Print(stderr, format, logline.Warn, msg) })
	if err != nil {
		return nil, exitf(ExitFailed, "%v", err)
	}
	return s, nil
}

// noHistory reports whether there is nothing to read at path (history.Exists).
func noHistory(path string) bool { return !history.Exists(path) }

// historyPath resolves the history file: --history, CRONLOCK_HISTORY (environment or
// config file), then the per-user default. "" with nil error means recording is off.
func historyPath(flag string) (string, error) {
	if isOff(flag) {
		return "", nil
	}
	if flag == "" {
		return history.DefaultPath()
	}
	return flag, nil
}
