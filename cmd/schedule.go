package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cronlock/jobrun"
	"cronlock/schedule"
	"cronlock/table"
)

// scheduleOptions are the settings of `cronlock schedule`.
type scheduleOptions struct {
	Expr   string
	TZ     string // --tz / CRONLOCK_TZ, as run reads --schedule
	Next   int
	From   string // "" = now
	JSON   bool
	Now    time.Time
	Stdout io.Writer
	Stderr io.Writer
}

func newScheduleCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &scheduleOptions{Stdout: stdout, Stderr: stderr}
	c := &cobra.Command{
		Use:   "schedule EXPR [--tz ZONE] [--next N] [--from TIME] [--json]",
		Short: "Show the next ticks of a crontab schedule, with what daylight saving does to them",
		Long: `Show the next N ticks of a crontab schedule, as cronlock run --schedule counts them,
in its zone and in UTC, and how long until each, like systemd-analyze calendar
--iterations. A tick that daylight saving moves, skips or repeats gets a line that says
what happens ("02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00").

The zone is a CRON_TZ= prefix of EXPR, else --tz (CRONLOCK_TZ), else /etc/localtime's,
as for run --schedule; never $TZ. --from takes now, an RFC 3339 time
(2026-03-29T01:00:00Z), or a time in the schedule's zone: 2026-03-29 01:30,
2026-03-29 01:30:00, or a date (its midnight). A bad EXPR, zone or flag exits 125.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.Expr, o.Now = args[0], jobrun.Now()
			if o.Next < 1 || o.Next > schedule.MaxUpcoming {
				return &usageError{fmt.Errorf("--next %d: give 1 to %d ticks", o.Next, schedule.MaxUpcoming)}
			}
			st, err := loadSettings()
			if err != nil {
				return err
			}
			if err := st.apply(c.Flags(), map[string]string{"tz": "CRONLOCK_TZ"}); err != nil {
				return err
			}
			return scheduleRun(o)
		},
	}
	c.Flags().StringVar(&o.TZ, "tz", "", "zone of EXPR (env CRONLOCK_TZ; default the zone of /etc/localtime, as cron uses; never $TZ)")
	c.Flags().IntVarP(&o.Next, "next", "n", 5, "how many ticks to show (1 to "+strconv.Itoa(schedule.MaxUpcoming)+")")
	c.Flags().StringVar(&o.From, "from", "", "list the ticks after this time (default now; see above for the forms)")
	c.Flags().BoolVar(&o.JSON, "json", false, "one JSON object per tick and line, for scripts")
	return c
}

// scheduleTick is one tick as --json prints it.
type scheduleTick struct {
	Expr      string `json:"expr"`
	Zone      string `json:"zone"`
	N         int    `json:"n"`
	Local     string `json:"local"`      // RFC 3339 with the zone's offset
	UTC       string `json:"utc"`        // RFC 3339 in UTC
	InSeconds int64  `json:"in_seconds"` // from --from (or now)
	DST       string `json:"dst"`        // what daylight saving does to it; "" = nothing
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
	ticks := s.Upcoming(from, o.Next)
	if o.JSON {
		enc := json.NewEncoder(o.Stdout)
		for i, u := range ticks {
			err := enc.Encode(scheduleTick{Expr: s.String(), Zone: s.Zone(), N: i + 1,
				Local: u.Local.Format(time.RFC3339), UTC: u.Tick.Format(time.RFC3339),
				InSeconds: int64(u.In / time.Second), DST: u.DST})
			if err != nil {
				return err
			}
		}
		return nil
	}
	const layout = "Mon 2006-01-02 15:04 MST"
	fmt.Fprintf(o.Stdout, "%s in %s, after %s\n", s.String(), s.Zone(), from.In(s.Location()).Format("Mon 2006-01-02 15:04:05 MST"))
	rows := [][]string{{"#", "LOCAL", "UTC", "IN"}}
	for i, u := range ticks {
		rows = append(rows, []string{strconv.Itoa(i + 1), u.Local.Format(layout), u.Tick.Format(layout), schedule.FormatIn(u.In)})
	}
	lines := strings.Split(strings.TrimSuffix(table.Format(rows, table.Options{Right: map[int]bool{0: true}}), "\n"), "\n")
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l + "\n")
		if i > 0 && ticks[i-1].DST != "" {
			b.WriteString("   " + ticks[i-1].DST + "\n")
		}
	}
	_, err = io.WriteString(o.Stdout, b.String())
	return err
}
