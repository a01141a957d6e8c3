package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
		if got := strings.Contains(out, at+strings.Fields(l)[0]+": cron refuses a descriptor that is not in lower case (\"bad time specifier\")"); got != bad {
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
	if !strings.Contains(out, "+@hourly ") || strings.Count(errs, "bad time specifier") != len(upperDescriptors) {
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
