package cmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"cronlock/history"
	"cronlock/tty"
)

// historyPruneOptions are the settings of `cronlock history prune`.
type historyPruneOptions struct {
	Path     string // the history file, resolved
	ThisNode string // this machine's node name: its dead runs are marked abandoned first

	OlderThan time.Duration // finished runs that started longer ago than this; 0 = no age limit
	Keep      int           // all but the newest Keep runs of each key; 0 = no count limit
	DryRun    bool          // only count
	Now       time.Time     // the present; zero = time.Now()

	LogFormat      string // of cronlock's own lines on stderr (--log-format); "" = text
	Stdout, Stderr io.Writer
}

func newHistoryPruneCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &historyPruneOptions{Stdout: stdout, Stderr: stderr}
	var flagPath string
	c := &cobra.Command{
		Use:   "prune (--older-than D | --keep N) [flags]",
		Short: "Delete old runs and their output",
		Long: `Delete old runs and their output tails. --older-than D deletes runs that started more
than D ago; --keep N deletes all but the newest N runs of each key; with both, a run goes
when either says so. Never deleted: running runs, and the last success and the last
failure of each key, however old.

D is a Go duration with an optional day part: 90d, 1d12h, 36h.

cronlock run also prunes by itself, at most once a day: runs older than
CRONLOCK_HISTORY_RETENTION (default 90d; off keeps every run).`,
		Example: `  cronlock history prune --older-than 30d
  cronlock history prune --keep 1000 --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			f := c.Flags()
			if !f.Changed("older-than") && !f.Changed("keep") {
				return &usageError{errors.New("say what to delete: --older-than D (e.g. 90d), --keep N (runs per key), or both")}
			}
			if f.Changed("keep") && o.Keep < 1 {
				return &usageError{fmt.Errorf("--keep must be 1 or more, not %d (the newest runs of each key to keep)", o.Keep)}
			}
			s, path, err := historySettings(c, &flagPath)
			if err != nil {
				return err
			}
			if path == "" {
				return exitf(ExitFailed, historyOff)
			}
			o.Path = path
			o.ThisNode = s.thisNode()
			o.LogFormat = logFormatOf(c)
			return historyPruneRun(o)
		},
	}
	f := c.Flags()
	f.StringVar(&flagPath, "history", "", "SQLite history file (env CRONLOCK_HISTORY; default per user)")
	f.Var(ageValue{&o.OlderThan}, "older-than", "delete runs that started longer ago than this (90d, 36h)")
	f.IntVar(&o.Keep, "keep", 0, "delete all but the newest N runs of each key")
	f.BoolVar(&o.DryRun, "dry-run", false, "only count what would be deleted")
	return c
}

// historyPruneRun deletes what o asks and says how much in one line.
func historyPruneRun(o *historyPruneOptions) error {
	if _, err := os.Stat(o.Path); errors.Is(err, fs.ErrNotExist) {
		_, err := fmt.Fprintf(o.Stdout, "nothing to prune: no runs recorded yet in %s\n", tty.Escape(o.Path))
		return err
	}
	// Runs whose cronlock died are still "running" until reaped, and running runs are
	// never pruned.
	st, err := openReaped(o.Path, o.ThisNode, o.Stderr, o.LogFormat, history.Open)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := st.Prune(history.PruneOptions{OlderThan: o.OlderThan, Keep: o.Keep, Now: o.Now, DryRun: o.DryRun})
	if err != nil {
		return exitf(ExitFailed, "%v (%d runs were removed before it; run the command again to go on)", err, res.Runs)
	}
	verb := "removed"
	if o.DryRun {
		verb = "would remove"
	}
	_, err = fmt.Fprintf(o.Stdout, "%s %s (and %s) from %s\n", verb, pluralCount(res.Runs, "run"),
		pluralCount(res.Outputs, "output tail"), tty.Escape(o.Path))
	return err
}

// pluralCount is "1 run", "2 runs".
func pluralCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
