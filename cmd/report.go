package cmd

import (
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"

	"cronlock/fleetrecord"
	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/logline"
	"cronlock/report"
	"cronlock/tty"
)

// reportOptions are the settings of `cronlock report`.
type reportOptions struct {
	HTML  string    // the page to write
	Key   string    // only this key; "" = every key
	Since time.Time // runs started at or after it
	Fleet bool      // from the fleet's record (Redis, etcd) rather than this machine's history

	LogFormat      string
	Stdout, Stderr io.Writer
}

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &reportOptions{Stdout: stdout, Stderr: stderr}
	var since, flagPath string
	bo := &backendOptions{}
	c := &cobra.Command{
		Use:   "report --html FILE [--since D] [--key K] [--fleet]",
		Short: "Draw a timeline of runs as one HTML page",
		Long: `Draw a timeline of runs as one self-contained HTML page (no network: CSS, SVG and a
small script inline), to open from a file or to mail: a lane per key and node, each run
a bar coloured and patterned by status, the ticks as marks, DUPLICATE, missed, never
fired, takeovers and suspensions marked, and a card per run on hover (id, node, tick,
duration, exit, error; never checkpoint values or output). Times are UTC.

--fleet draws every host's runs from the fleet's record in Redis or etcd; without it, or
on the local backend (which has no fleet's record: it says so), this machine's history.
--since takes a duration ago (7d, 36h) or a time; the default is 7d.

The page is written to a temporary file beside FILE and renamed over it, mode 0600.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if o.HTML == "" {
				return &usageError{errors.New("--html FILE is required: the page to write")}
			}
			if c.Flags().Changed("key") {
				if err := checkKey(o.Key); err != nil {
					return err
				}
			}
			var err error
			if o.Since, _, err = parseSinceUntil(since, "", false, time.Now()); err != nil {
				return err
			}
			o.LogFormat = logFormatOf(c)
			runs, source, err := reportRuns(c, o, bo, &flagPath)
			if err != nil {
				return err
			}
			if err := report.WriteFile(o.HTML, runs, report.Options{Source: source, Since: o.Since}); err != nil {
				return exitf(ExitFailed, "%v: give --html a file in a folder you can write", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.HTML, "html", "", "write the page to this file")
	f.StringVarP(&o.Key, "key", "k", "", "only runs of this key")
	f.StringVar(&since, "since", "7d", "only runs started at or after this time or this long ago (2025-06-01, 7d, 36h)")
	f.BoolVar(&o.Fleet, "fleet", false, "every host's runs, from the fleet's record in Redis or etcd")
	f.StringVar(&flagPath, "history", "", "SQLite history file, without --fleet (env CRONLOCK_HISTORY; default per user)")
	bo.addFlags(f)
	return c
}

// reportRuns reads the runs to draw, and names where they came from: the fleet's record
// with --fleet on Redis or etcd, else this machine's history.
func reportRuns(c *cobra.Command, o *reportOptions, bo *backendOptions, flagPath *string) ([]report.Run, string, error) {
	if o.Fleet {
		if err := bo.load(c); err != nil {
			return nil, "", err
		}
		if bo.Backend == "redis" || bo.Backend == "etcd" {
			l, err := bo.open()
			if err != nil {
				return nil, "", exitf(ExitFailed, "%v", err)
			}
			defer l.Close()
			es, err := fleetrecord.Read(l.(lockrun.FleetStore), o.Key, 0)
			if err != nil {
				return nil, "", exitf(ExitFailed, "%v", err)
			}
			kept := es[:0]
			for _, e := range es {
				if e.Started().Before(o.Since) && (e.Status != lockrun.NeverFiredStatus || e.NeverFiredTo < o.Since.UnixMicro()) {
					continue
				}
				kept = append(kept, e)
			}
			return report.FromFleet(kept), "the fleet's record on " + l.Describe(), nil
		}
		logline.Print(o.Stderr, o.LogFormat, logline.Warn, "the local backend has no fleet's record: the report is drawn from this machine's history")
	}
	s, path, err := historySettings(c, flagPath)
	if err != nil {
		return nil, "", err
	}
	if path == "" {
		return nil, "", exitf(ExitFailed, "%s: nothing to draw without --fleet", historyOff)
	}
	node := s.thisNode()
	source := "the history " + tty.Escape(path) + " of " + tty.Escape(node)
	if noHistory(path) {
		return nil, source, nil
	}
	st, err := openReaped(path, node, o.Stderr, o.LogFormat, history.OpenRead)
	if err != nil {
		return nil, "", err
	}
	defer st.Close()
	rows, err := st.List(history.Filter{Key: o.Key, Since: o.Since})
	if err != nil {
		return nil, "", exitf(ExitFailed, "%v", err)
	}
	return report.FromHistory(rows), source, nil
}
