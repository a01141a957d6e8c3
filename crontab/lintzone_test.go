package crontab

import (
	"strings"
	"testing"
	"time"
)

// TestLintZoneMismatch: a wrapped line whose --schedule reads like
// its crontab schedule but is read in another zone than cron fires the line in is
// reported with both zones and where each came from; zones that differ only by name
// (UTC, Etc/UTC) are no mismatch.
func TestLintZoneMismatch(t *testing.T) {
	const cl = "/usr/local/bin/cronlock"
	job := func(args string) string { return "0 9 * * * " + cl + " run --key k " + args + " -- /opt/job\n" }
	cases := []struct {
		name string
		text string
		o    Options
		want string // "" = no finding
	}{
		{"--tz against the daemon's zone", job("--schedule '0 9 * * *' --tz Europe/Berlin"), Options{DaemonZone: "UTC"},
			`--schedule "0 9 * * *" is read in Europe/Berlin (its --tz) but cron fires the line in UTC (the cron daemon's zone, /etc/localtime)`},
		{"--tz that is the daemon's zone", job("--schedule '0 9 * * *' --tz Europe/Berlin"), Options{DaemonZone: "Europe/Berlin"}, ""},
		{"UTC and Etc/UTC", job("--schedule '0 9 * * *' --tz UTC"), Options{DaemonZone: "Etc/UTC"}, ""},
		{"cronie's CRON_TZ line, no zone on the run", "CRON_TZ=America/New_York\n" + job("--schedule '0 9 * * *'"), Options{DaemonZone: "UTC", CronTZ: true},
			`--schedule "0 9 * * *" is read in UTC (cronlock's default, /etc/localtime) but cron fires the line in America/New_York (its CRON_TZ= line)`},
		{"CRON_TZ prefix under Debian's cron", job("--schedule 'CRON_TZ=Europe/Berlin 0 9 * * *'"), Options{DaemonZone: "UTC"},
			`is read in Europe/Berlin (its CRON_TZ= prefix) but cron fires the line in UTC (the cron daemon's zone, /etc/localtime)`},
		{"CRONLOCK_TZ line of the crontab", "CRONLOCK_TZ=Asia/Kolkata\n" + job("--schedule '0 9 * * *'"), Options{DaemonZone: "UTC"},
			`is read in Asia/Kolkata (the crontab's CRONLOCK_TZ= line) but cron fires the line in UTC`},
		{"CRONLOCK_TZ of the settings", job("--schedule '0 9 * * *'"), Options{DaemonZone: "Europe/Berlin", RunZone: "UTC", RunZoneFrom: "CRONLOCK_TZ in /etc/cronlock/cronlock.conf"},
			`is read in UTC (CRONLOCK_TZ in /etc/cronlock/cronlock.conf) but cron fires the line in Europe/Berlin`},
		{"another schedule and another zone", job("--schedule '0 8 * * *' --tz Europe/Berlin"), Options{DaemonZone: "UTC"},
			`--schedule "0 8 * * *" in Europe/Berlin (its --tz) is not the line's schedule "0 9 * * *" in UTC (the cron daemon's zone, /etc/localtime)`},
		{"another schedule, the same zone", job("--schedule '0 8 * * *'"), Options{DaemonZone: "UTC"},
			`--schedule "0 8 * * *" is not the line's schedule "0 9 * * *": cronlock would count ticks cron never fires`},
		{"the same schedule written otherwise", job("--schedule '@daily'"), Options{DaemonZone: "UTC"},
			`--schedule "@daily" is not the line's schedule "0 9 * * *"`},
		{"the same", job("--schedule '0 9 * * *'"), Options{DaemonZone: "Europe/Berlin"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Cronlock = cl
			got := lintText(c.text, c.o)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("lint:\n%s\nwant a finding with %q", got, c.want)
			}
			if c.want != "" && strings.Count(got, "\n") != 1 {
				t.Fatalf("lint:\n%s\nwant one finding", got)
			}
		})
	}
}

func TestSameZone(t *testing.T) {
	load := func(name string) *time.Location {
		l, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"UTC", "Etc/UTC", true},
		{"Europe/Berlin", "Europe/Berlin", true},
		{"Europe/Berlin", "Europe/Paris", false},  // 1970s: Paris had summer time from 1976, Berlin from 1980
		{"Europe/Berlin", "Europe/London", false}, // an hour apart
		{"America/New_York", "US/Eastern", true},  // a link
		{"Asia/Kolkata", "Asia/Calcutta", true},
	} {
		if got := sameZone(load(c.a), load(c.b)); got != c.want {
			t.Errorf("sameZone(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
