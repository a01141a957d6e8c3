// Package schedview shows a schedule's upcoming ticks, as `cronlock schedule` prints
// them: a table for people (each tick in the schedule's zone and in UTC, how long until
// it, and its daylight-saving note on a line of its own) and one JSON object per tick
// for scripts. It only lays out what schedule.Upcoming found; it decides no tick.
package schedview

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"cronlock/schedule"
	"cronlock/table"
)

// Tick is one line of `cronlock schedule --json`; the names are an interface (README,
// "Schedules").
type Tick struct {
	Expr      string `json:"expr"` // normalised, without a CRON_TZ= prefix
	Zone      string `json:"zone"`
	N         int    `json:"n"`          // 1 for the first tick
	Local     string `json:"local"`      // RFC 3339 with the zone's offset
	UTC       string `json:"utc"`        // RFC 3339 in UTC
	InSeconds int64  `json:"in_seconds"` // from --from (or now)
	DST       string `json:"dst"`        // what daylight saving does to it; "" = nothing
}

// JSON writes one Tick per line; from is the time the ticks follow. in_seconds counts
// from it in whole seconds, also beyond the 292 years a time.Duration holds.
func JSON(w io.Writer, s *schedule.Schedule, from time.Time, ticks []schedule.Upcoming) error {
	enc := json.NewEncoder(w)
	for i, u := range ticks {
		err := enc.Encode(Tick{Expr: s.String(), Zone: s.Zone(), N: i + 1,
			Local: u.Local.Format(time.RFC3339), UTC: u.Tick.Format(time.RFC3339),
			InSeconds: u.Tick.Unix() - from.Unix(), DST: u.DST})
		if err != nil {
			return err
		}
	}
	return nil
}

// Text writes a header line (the expression, its zone and from) and a table of ticks,
// each daylight-saving note on the line below its tick.
func Text(w io.Writer, s *schedule.Schedule, from time.Time, ticks []schedule.Upcoming) error {
	const layout = "Mon 2006-01-02 15:04 MST"
	var b strings.Builder
	fmt.Fprintf(&b, "%s in %s, after %s\n", s.String(), s.Zone(), from.In(s.Location()).Format("Mon 2006-01-02 15:04:05 MST"))
	rows := [][]string{{"#", "LOCAL", "UTC", "IN"}}
	for i, u := range ticks {
		rows = append(rows, []string{strconv.Itoa(i + 1), u.Local.Format(layout), u.Tick.Format(layout), schedule.FormatIn(u.In)})
	}
	lines := strings.Split(strings.TrimSuffix(table.Format(rows, table.Options{Right: map[int]bool{0: true}}), "\n"), "\n")
	for i, l := range lines {
		b.WriteString(l + "\n")
		if i > 0 && ticks[i-1].DST != "" {
			b.WriteString("   " + ticks[i-1].DST + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
