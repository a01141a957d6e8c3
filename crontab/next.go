package crontab

import (
	"time"

	"cronlock/schedule"
)

// NextTicks returns, for each job line whose schedule cronlock can read, one line that
// says when it next fires after now, with schedule.Upcoming (the function `cronlock
// schedule` and `cronlock run --schedule` use): a wrapped line's --schedule in the zone
// cronlock run reads it in, any other line's own fields as the cron daemon reads them
// (a CRON_TZ= line only where the daemon honours it, else o.DaemonZone). They are not
// findings: lint's exit code does not count them. Lines cron or cronlock cannot read,
// @reboot lines and env lines get none; Lint says what is wrong with the first.
func NextTicks(lines []Line, o Options, now time.Time) []Finding {
	lines = ownWrapped(lines, o)
	var out []Finding
	for i := range lines {
		l := &lines[i]
		if l.Kind != Job && l.Kind != Wrapped || refused(l, o) != "" {
			continue
		}
		expr, zone, _ := cronSchedule(l, o)
		what := "next tick"
		if got, gotZone, _, have := runSchedule(l, o); have && l.Kind == Wrapped {
			expr, zone, what = got, gotZone, "next tick of --schedule"
		}
		s, err := schedule.Parse(expr, zone)
		if err != nil {
			continue
		}
		u := s.Upcoming(now, 1)
		if len(u) == 0 {
			continue
		}
		msg := what + " " + u[0].Local.Format("Mon 2006-01-02 15:04 MST")
		if _, off := u[0].Local.Zone(); off != 0 {
			layout := "15:04 UTC"
			if u[0].Local.Day() != u[0].Tick.Day() {
				layout = "2006-01-02 15:04 UTC"
			}
			msg += " (" + u[0].Tick.Format(layout) + ")"
		}
		msg += ", in " + schedule.FormatIn(u[0].In)
		if u[0].DST != "" {
			msg += "; " + u[0].DST
		}
		out = append(out, Finding{l.Num, msg})
	}
	return out
}
