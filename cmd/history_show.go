package cmd

import (
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"cronlock/history"
	"cronlock/runview"
	"cronlock/tty"
)

// historyShowOptions are the settings of `cronlock history show`.
type historyShowOptions struct {
	Path   string // the history file, resolved
	ID     string
	UTC    bool
	Loc    *time.Location // nil = time.Local
	Color  bool           // colour stderr lines (only for a terminal without NO_COLOR)
	Stdout io.Writer
}

func newHistoryShowCmd(stdout io.Writer) *cobra.Command {
	o := &historyShowOptions{Stdout: stdout, Color: wantColor(stdout)}
	var flagPath string
	c := &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show one run in full, with its captured output",
		Long: `Show one run in full, with its captured output.

RUN_ID is a run's id, or the start of one: the ID column of cronlock history shows the
shortest start that names one run. Exit status: 0 shown, 1 no run has that id (or an id
that starts so), 2 the start is ambiguous (several runs' ids start so; the line says how
many), 125 the history could not be read.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return &usageError{errors.New("give one run id, as `cronlock history` or $CRONLOCK_RUN_ID shows it")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			_, path, err := historySettings(c, &flagPath)
			if err != nil {
				return err
			}
			if path == "" {
				return exitf(ExitFailed, historyOff)
			}
			o.Path = path
			o.ID = args[0]
			return historyShowRun(o)
		},
	}
	c.Flags().StringVar(&flagPath, "history", "", "SQLite history file (env CRONLOCK_HISTORY; default per user)")
	c.Flags().BoolVar(&o.UTC, "utc", false, "show times in UTC")
	return c
}

// ExitNoSuchRun is the exit code of `history show` for a run id the history does not hold.
const ExitNoSuchRun = 1

// ExitAmbiguousRun is the exit code of `history show` for the start of a run id that
// several runs' ids start with.
const ExitAmbiguousRun = 2

// historyShowRun finds one run by its id or the start of it and shows it in full
// (runview.WriteDetail); the id comes from the user, so it is escaped in messages.
func historyShowRun(o *historyShowOptions) error {
	if noHistory(o.Path) {
		return exitf(ExitNoSuchRun, "no run %s: no runs recorded yet in %s", tty.Escape(o.ID), tty.Escape(o.Path))
	}
	st, err := history.OpenRead(o.Path)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	defer st.Close()
	// A run in its first second has no row yet (see startRowDelay). Should this fail, the
	// lookup below says the run is not there, which is all a failure here could hide. A
	// reader that may not write the file cannot add it.
	if !st.ReadOnly() {
		_, _ = st.AddLive()
	}
	id, err := st.Resolve(o.ID)
	var amb *history.AmbiguousError
	if errors.As(err, &amb) {
		many := strconv.Itoa(amb.Matches)
		if amb.More {
			many = "more than " + many
		}
		return exitf(ExitAmbiguousRun, "run id prefix %s matches %s runs in %s; give more of the id (the ID column of cronlock history names one run each)",
			tty.Escape(o.ID), many, tty.Escape(o.Path))
	}
	var r history.Run
	if err == nil {
		r, err = st.Get(id)
	}
	if errors.Is(err, history.ErrNotFound) {
		return exitf(ExitNoSuchRun, "no run %s in %s (cronlock history lists the ids)", tty.Escape(o.ID), tty.Escape(o.Path))
	}
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	return runview.WriteDetail(o.Stdout, r, runview.Options{Loc: o.Loc, UTC: o.UTC, Color: o.Color})
}
