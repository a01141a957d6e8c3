package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cronlock/schedview"
)

// TestScheduleCommand: `cronlock schedule` through the built binary, with the zone and
// --from given (never the machine's zone or clock): the table's lines with the
// daylight-saving notes on both change days, --json's objects, and one line with exit
// 125 for each bad input.
func TestScheduleCommand(t *testing.T) {
	c := newCLI(t, "")
	code, out, errs := c.run("schedule", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28 00:00", "--next", "3")
	want := `30 2 * * * in Europe/Berlin, after Sat 2026-03-28 00:00:00 CET
#  LOCAL                      UTC                       IN
1  Sat 2026-03-28 02:30 CET   Sat 2026-03-28 01:30 UTC  2h 30m
2  Sun 2026-03-29 03:00 CEST  Sun 2026-03-29 01:00 UTC  1d 2h
   02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00
3  Mon 2026-03-30 02:30 CEST  Mon 2026-03-30 00:30 UTC  2d 1h
`
	if code != 0 || out != want || errs != "" {
		t.Errorf("schedule: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errs, out, want)
	}

	// Autumn, from an RFC 3339 instant; the zone from a CRON_TZ= prefix, as run reads it.
	code, out, errs = c.run("schedule", "CRON_TZ=America/New_York */30 1 * * *", "--from", "2026-11-01T04:00:00Z", "--json")
	var ticks []schedview.Tick
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var tk schedview.Tick
		if err := json.Unmarshal([]byte(l), &tk); err != nil {
			t.Fatalf("--json line %q: %v (stderr %q)", l, err, errs)
		}
		ticks = append(ticks, tk)
	}
	if code != 0 || len(ticks) != 5 {
		t.Fatalf("--json: exit %d, %d objects, want 0 and 5: %s%s", code, len(ticks), out, errs)
	}
	for i, w := range []struct{ local, utc, dst string }{
		{"2026-11-01T01:00:00-04:00", "2026-11-01T05:00:00Z", "runs at both; this is the first"},
		{"2026-11-01T01:30:00-04:00", "2026-11-01T05:30:00Z", "runs at both; this is the first"},
		{"2026-11-01T01:00:00-05:00", "2026-11-01T06:00:00Z", "runs at both; this is the second"},
		{"2026-11-01T01:30:00-05:00", "2026-11-01T06:30:00Z", "runs at both; this is the second"},
		{"2026-11-02T01:00:00-05:00", "2026-11-02T06:00:00Z", ""},
	} {
		tk := ticks[i]
		if tk.N != i+1 || tk.Zone != "America/New_York" || tk.Expr != "*/30 1 * * *" || tk.Local != w.local || tk.UTC != w.utc ||
			!strings.HasSuffix(tk.DST, w.dst) || (w.dst == "") != (tk.DST == "") {
			t.Errorf("tick %d: %+v; want local %s, utc %s, dst ending %q", i+1, tk, w.local, w.utc, w.dst)
		}
	}
	if ticks[0].InSeconds != 3600 {
		t.Errorf("in_seconds of the first tick: %d, want 3600 (from 00:00 EDT)", ticks[0].InSeconds)
	}
	// A fixed time in the repeated hour runs once, as run --schedule counts it.
	_, out, _ = c.run("schedule", "30 1 * * *", "--tz", "America/New_York", "--from", "2026-11-01", "-n", "1")
	if !strings.Contains(out, "01:30 happens twice on 2026-11-01 in America/New_York (EDT, then EST): runs once, at the first") {
		t.Errorf("fixed time in the repeated hour:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule", "5/10 * * * *"}, `schedule "5/10 * * * *": minute field "5/10": a step needs a range`},
		{[]string{"schedule", "@reboot"}, `schedule "@reboot": `},
		{[]string{"schedule", "* * * * *", "--tz", "Mars/Olympus"}, `time zone "Mars/Olympus" (--tz or CRONLOCK_TZ): unknown time zone`},
		{[]string{"schedule", "CRON_TZ=Nowhere 0 9 * * *"}, `CRON_TZ zone "Nowhere": unknown time zone`},
		{[]string{"schedule", "* * * * *", "--tz", "UTC", "--next", "0"}, "--next 0: give 1 to 1000 ticks"},
		{[]string{"schedule", "* * * * *", "--tz", "UTC", "--next", "1001"}, "--next 1001: give 1 to 1000 ticks"},
		{[]string{"schedule", "* * * * *", "--tz", "UTC", "--next", "x"}, `"x"`},
		{[]string{"schedule", "* * * * *", "--tz", "UTC", "--from", "yesterday"}, `--from "yesterday": use now, an RFC 3339 time`},
		{[]string{"schedule"}, "accepts 1 arg"},
	} {
		code, out, errs := c.run(tc.args...)
		if code != ExitFailed || out != "" || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "panic") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and one line with %q", tc.args, code, out, errs, ExitFailed, tc.want)
		}
	}
}

// TestCrontabLintNextTick: lint shows a line's next tick with schedule's function, and a
// next tick is not a finding (exit 0 on a clean file). The zone is the line's own
// (cronie's CRON_TZ= line, the --schedule's prefix), not the machine's.
func TestCrontabLintNextTick(t *testing.T) {
	c := newCLI(t, "")
	file := filepath.Join(c.dir, "jobs")
	text := "PATH=/usr/bin:/bin\nCRON_TZ=Asia/Tokyo\n0 0 29 2 */7 " + cronlockBin + " run --key leap --schedule 'CRON_TZ=Asia/Tokyo 0 0 29 2 */7' -- /bin/true\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("crontab", "lint", "--format", "user", "--cron-daemon", "cronie", file)
	want := file + ":3: next tick of --schedule Sun 2032-02-29 00:00 JST (2032-02-28 15:00 UTC), in "
	if code != 0 || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("lint: exit %d, stdout %q, stderr %q; want 0 and one line %q…", code, out, errs, want)
	}
}
