package crontab

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNextTicks: lint's next tick of each line: a plain line's fields in the daemon's
// zone (or a CRON_TZ= line cronie honours), a wrapped line's --schedule in the zone
// cronlock run reads it in, with the daylight-saving note; none for lines nobody can
// read, @reboot, or env lines.
func TestNextTicks(t *testing.T) {
	text := strings.Join([]string{
		"PATH=/usr/bin:/bin",
		"30 2 * * * /usr/bin/true",
		"30 1 * * * " + goldenCronlock + " run --key k --schedule '30 1 * * *' --tz America/New_York -- /bin/sh -c true",
		"0 0 29 2 * " + goldenCronlock + " run --key k --schedule 'CRON_TZ=UTC 0 0 29 2 *' -- /bin/true",
		"*/5 * * * * " + goldenCronlock + " run --key k -- /bin/true",
		"@reboot /usr/bin/true",
		"5/10 * * * * /usr/bin/true",
		"CRON_TZ=Asia/Tokyo",
		"30 2 * * * /usr/bin/true",
		"",
	}, "\n")
	now := time.Date(2026, 3, 29, 0, 10, 0, 0, time.UTC) // 01:10 in Berlin, the spring day
	for _, c := range []struct {
		cronie bool
		want   string
	}{
		{false, `
2: next tick Sun 2026-03-29 03:00 CEST (01:00 UTC), in 50m; 02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00
3: next tick of --schedule Sun 2026-03-29 01:30 EDT (05:30 UTC), in 5h 20m
4: next tick of --schedule Tue 2028-02-29 00:00 UTC, in 1y 336d
5: next tick Sun 2026-03-29 01:15 CET (00:15 UTC), in 5m
9: next tick Sun 2026-03-29 03:00 CEST (01:00 UTC), in 50m; 02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00
`},
		{true, `
2: next tick Sun 2026-03-29 03:00 CEST (01:00 UTC), in 50m; 02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00
3: next tick of --schedule Sun 2026-03-29 01:30 EDT (05:30 UTC), in 5h 20m
4: next tick of --schedule Tue 2028-02-29 00:00 UTC, in 1y 336d
5: next tick Sun 2026-03-29 01:15 CET (00:15 UTC), in 5m
9: next tick Mon 2026-03-30 02:30 JST (2026-03-29 17:30 UTC), in 17h 20m
`},
	} {
		o := Options{Cronlock: goldenCronlock, DaemonZone: "Europe/Berlin", CronTZ: c.cronie}
		var b strings.Builder
		for _, f := range NextTicks(Parse(text, false), o, now) {
			b.WriteString(strconv.Itoa(f.Line) + ": " + f.Msg + "\n")
		}
		if got, want := b.String(), strings.TrimPrefix(c.want, "\n"); got != want {
			t.Errorf("cronie %v:\n got:\n%s\nwant:\n%s", c.cronie, got, want)
		}
	}
}
