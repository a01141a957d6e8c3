package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// upperDescriptors are descriptors in a case Debian's cron refuses ("bad time
// specifier"), with the descriptor each meant.
var upperDescriptors = map[string]string{"@HOURLY": "@hourly", "@Daily": "@daily", "@REBOOT": "@reboot", "@Midnight": "@midnight"}

// TestDescriptorCaseRefused: Debian's cron refuses a descriptor that is not in lower case
// and then ignores the whole crontab; cronlock must not read it as cron does not. Through
// the binary: --schedule refuses it (one line, exit 125, the job not started), check
// answers UNKNOWN, lint reports every such line (wrapped ones too), and wrap leaves such
// a line as it is instead of giving it a working schedule. Where root can ask Debian's
// own parser (crontab(1) on a private spool), it is asked too.
func TestDescriptorCaseRefused(t *testing.T) {
	c := newCLI(t, "")
	ran := filepath.Join(c.dir, "ran")
	for upper, lower := range upperDescriptors {
		if lower == "@reboot" {
			continue // refused by --schedule in any case: it has no tick
		}
		code, _, errs := c.run("run", "--backend", "local", "-k", "case", "--schedule", upper, "--", "touch", ran)
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `"bad time specifier"`) || !strings.Contains(errs, "write "+lower) {
			t.Errorf("--schedule %s: exit %d, stderr %q; want 125 and one line saying cron refuses it", upper, code, errs)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("--schedule %s: the job ran", upper)
		}
		code, out, _ := c.run("check", "--backend", "local", "-k", "case", "--schedule", upper)
		if code != 3 || !strings.Contains(out, "bad time specifier") {
			t.Errorf("check --schedule %s: exit %d, %q; want UNKNOWN (3) saying cron refuses it", upper, code, out)
		}
	}
	if code, _, errs := c.run("run", "--backend", "local", "-k", "case", "--schedule", "@hourly", "--", "touch", ran); code != 0 {
		t.Fatalf("--schedule @hourly: exit %d: %s", code, errs)
	}

	lines := []string{"SHELL=/bin/sh", "PATH=/usr/bin:/bin"}
	for upper := range upperDescriptors {
		lines = append(lines, upper+" /usr/bin/true")
	}
	lines = append(lines,
		"@HOURLY /usr/local/bin/cronlock run --key k --schedule @HOURLY -- /bin/sh -c /usr/bin/true",
		"@hourly /usr/bin/true")
	file := filepath.Join(c.dir, "jobs")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("crontab", "lint", file)
	if code != 1 {
		t.Fatalf("lint: exit %d, %q %q; want 1", code, out, errs)
	}
	for i, l := range lines {
		at := "jobs:" + strconv.Itoa(i+1) + ": "
		bad := !strings.HasPrefix(l, "@hourly") && strings.HasPrefix(l, "@")
		if got := strings.Contains(out, at+"\"bad time specifier\": cron reads "+strings.Fields(l)[0]+" only in lower case"); got != bad {
			t.Errorf("lint of line %d %q: reported %v, want %v; lint said:\n%s", i+1, l, got, bad, out)
		}
	}

	code, out, errs = c.run("crontab", "wrap", file)
	if code != 0 {
		t.Fatalf("wrap: exit %d: %s", code, errs)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "+@") && !strings.HasPrefix(l, "+@hourly") {
			t.Errorf("wrap gave a working schedule to a line cron refuses: %q", l)
		}
	}
	if !strings.Contains(out, "+@hourly ") || strings.Count(errs, "bad time specifier") != len(upperDescriptors)+1 { // the wrapped @HOURLY line too
		t.Errorf("wrap: diff %q, notes %q; want the @hourly line wrapped and one note per refused line", out, errs)
	}

	// Debian's parser itself: crontab(1) installing into a spool of this test's own.
	if os.Geteuid() != 0 {
		return
	}
	for _, bin := range []string{"crontab", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			return
		}
	}
	for upper, lower := range upperDescriptors {
		for _, d := range []string{upper, lower} {
			f := filepath.Join(c.dir, "one")
			os.WriteFile(f, []byte(d+" /usr/bin/true\n"), 0o644)
			sh := "mount -t tmpfs -o mode=1730 tmpfs /var/spool/cron/crontabs && crontab " + f
			b, err := exec.Command("unshare", "-m", "sh", "-c", sh).CombinedOutput()
			if refused := strings.Contains(string(b), "bad time specifier"); refused != (d == upper) || (err == nil) != (d == lower) {
				t.Errorf("Debian's crontab(1) on %q: %v %q; want it refused exactly when not lower case", d, err, b)
			}
		}
	}
}

// TestOddOffsetZoneTicks: in a zone whose offset was not a whole number of minutes
// (Africa/Monrovia, −0:44:30 until 1972-01-07), a run's tick is a minute boundary of the
// zone's wall clock, 30 s past a UTC minute; and the minute that the change to 0:00 cut
// (the wall clock jumped from 23:59:59.x to 00:44:30) ticks at the change, where Debian's
// cron runs it. The run's clock is the test build's CRONLOCK_TEST_CLOCK_OFFSET; each
// instant is 10 s or more after its tick, far more than a run takes to read its clock.
func TestOddOffsetZoneTicks(t *testing.T) {
	c := newCLI(t, "")
	for _, tc := range []struct{ now, tick string }{
		{"1971-06-01T11:00:45Z", "1971-06-01T11:00:30Z"},
		{"1972-01-07T00:44:20Z", "1972-01-06T23:59:00-00:44:30"},
		{"1972-01-07T00:44:40Z", "1972-01-07T00:44:30Z"},
		{"1972-01-07T00:45:10Z", "1972-01-07T00:45:00Z"},
	} {
		at, _ := time.Parse(time.RFC3339, tc.now)
		want, err := time.Parse("2006-01-02T15:04:05-07:00:00", tc.tick)
		if err != nil {
			want, _ = time.Parse(time.RFC3339, tc.tick)
		}
		cmd := c.command("run", "--backend", "local", "-k", "monrovia", "--schedule", "* * * * *", "--tz", "Africa/Monrovia",
			"--", "sh", "-c", "echo $CRONLOCK_SCHEDULED_FOR")
		cmd.Env = append(cmd.Env, "CRONLOCK_TEST_CLOCK_OFFSET="+time.Until(at).String())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("at %s: %v", tc.now, err)
		}
		got, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
		if err != nil || !got.Equal(want) {
			t.Errorf("at %s: tick %q (none: skipped, its tick had run), want %s", tc.now, out, want.UTC().Format(time.RFC3339))
		}
	}
}
