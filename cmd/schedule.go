package cmd

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"cronlock/jobrun"
	"cronlock/schedule"
	"cronlock/schedview"
)

// scheduleOptions are the settings of `cronlock schedule`.
type scheduleOptions struct {
	Expr, TZ, From string // TZ: --tz / CRONLOCK_TZ, as run reads --schedule; From "" = now
	Next           int
	JSON           bool
	Now            time.Time
	Stdout         io.Writer
}

func newScheduleCmd(stdout io.Writer) *cobra.Command {
	o := &scheduleOptions{Stdout: stdout}
	c := &cobra.Command{
		Use:   "schedule EXPR [--tz ZONE] [--next N] [--from TIME] [--json]",
		Short: "Show the next ticks of a crontab schedule, with what daylight saving does to them",
		Long: `Show the next N ticks of EXPR as cronlock run --schedule counts them (its zone: a
CRON_TZ= prefix, else --tz, else /etc/localtime's), in that zone and in UTC, how long
until each, and a line for each tick daylight saving moves, skips or repeats.
--from: now, an RFC 3339 time, or 2026-03-29 01:30 (with :SS, or a date) in EXPR's zone.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions, // EXPR is no file
		RunE: func(c *cobra.Command, args []string) error {
			o.Expr, o.Now = args[0], jobrun.Now()
			if o.Next < 1 || o.Next > schedule.MaxUpcoming {
				return &usageError{fmt.Errorf("--next %d: give 1 to %d ticks", o.Next, schedule.MaxUpcoming)}
			}
			st, err := loadSettings()
			if err == nil {
				err = st.apply(c.Flags(), map[string]string{"tz": "CRONLOCK_TZ"})
			}
			if err != nil {
				return err
			}
			return scheduleRun(o)
		},
	}
	c.Flags().StringVar(&o.TZ, "tz", "", "zone of EXPR (env CRONLOCK_TZ; default the zone of /etc/localtime, as cron uses; never $TZ)")
	c.Flags().IntVarP(&o.Next, "next", "n", 5, "how many ticks to show (1 to "+strconv.Itoa(schedule.MaxUpcoming)+")")
	c.Flags().StringVar(&o.From, "from", "", "list the ticks after this time (default now)")
	c.Flags().BoolVar(&o.JSON, "json", false, "one JSON object per tick and line, for scripts")
	return c
}

func scheduleRun(o *scheduleOptions) error {
	s, err := schedule.Parse(o.Expr, o.TZ)
	if err != nil {
		return exitf(ExitFailed, "schedule %q: %v", o.Expr, err)
	}
	from, err := schedule.ParseFrom(o.From, s.Location(), o.Now)
	if err != nil {
		return &usageError{fmt.Errorf("--from %q: %v", o.From, err)}
	}
	if o.JSON {
		return schedview.JSON(o.Stdout, s, from, s.Upcoming(from, o.Next))
	}
	return schedview.Text(o.Stdout, s, from, s.Upcoming(from, o.Next))
}
