package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"cronlock/fleetview"
	"cronlock/history"
	"cronlock/lockrun/local"
	"cronlock/logline"
	"cronlock/tty"
)

// ExitUnknownKey is jobs's exit code for a --key the backend knows nothing of, as
// history show's for an unknown run.
const ExitUnknownKey = ExitNoSuchRun

func newJobsCmd(stdout, stderr io.Writer) *cobra.Command {
	bo := &backendOptions{}
	var key, flagPath string
	var asJSON, scan bool
	c := &cobra.Command{
		Use:   "jobs [--key KEY] [--json]",
		Short: "List every key: schedule, last and next run, what runs now, 7-day success rate",
		Example: `  cronlock jobs
  cronlock jobs --key daily-billing --json
  cronlock jobs --scan`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("key") {
				if err := checkKey(key); err != nil {
					return err
				}
			}
			if err := bo.load(c); err != nil {
				return err
			}
			s, path, err := historySettings(c, &flagPath)
			if err != nil {
				return err
			}
			l, err := bo.open()
			if err != nil {
				return exitf(ExitFailed, "%v", err)
			}
			defer l.Close()
			var src fleetview.Source
			if ll, ok := l.(*local.Locker); ok {
				var h *history.Store
				if path != "" && !noHistory(path) {
					if h, err = openReaped(path, s.thisNode(), stderr, logFormatOf(c), history.OpenRead); err != nil {
						return err
					}
					defer h.Close()
				}
				src = fleetview.FromLocal(ll, h)
			} else if src, err = fleetview.FromBackend(l, scan); err != nil {
				return exitf(ExitFailed, "%v", err)
			}
			jobs, err := fleetview.Read(src, fleetview.Options{Key: key})
			var unknown *fleetview.UnknownKeyError
			switch {
			case errors.As(err, &unknown):
				return exitf(ExitUnknownKey, "%v", err)
			case err != nil:
				return exitf(ExitFailed, "%v", err)
			}
			if err := fleetview.AddSuspensions(c.Context(), l, jobs, time.Now()); err != nil {
				return exitf(ExitFailed, "%v", err)
			}
			if fleetview.Scanned(src) && !scan {
				logline.Print(stderr, logFormatOf(c), logline.Verbose, fmt.Sprintf("%s has no index of known keys yet (written by every claim of this version): the keys were found by walking the whole database", l.Describe()))
			}
			if asJSON {
				return fleetview.WriteJSON(stdout, jobs)
			}
			if len(jobs) == 0 {
				_, err := fmt.Fprintf(stdout, "no keys known on %s\n", l.Describe())
				return err
			}
			return fleetview.WriteTable(stdout, jobs, fleetview.View{Width: tty.Columns(os.Stdout)})
		},
	}
	c.Flags().StringVarP(&key, "key", "k", "", "show only this key")
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per key and line, for scripts")
	c.Flags().BoolVar(&scan, "scan", false, "find keys by walking the whole Redis database (SCAN), not its index: keys last claimed by an older cronlock")
	c.Flags().StringVar(&flagPath, "history", "", "local backend: SQLite history file to read (env CRONLOCK_HISTORY; default per user)")
	bo.addFlags(c.Flags())
	return c
}
