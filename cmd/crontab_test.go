package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cronlock/schedule"
)

const sampleCrontab = `# nightly jobs
SHELL=/bin/sh
PATH=/usr/bin:/bin

17 * * * * root cd / && run-parts --report /etc/cron.hourly
0 9 * * * root echo "billing $((6*7))" | tr a-z A-Z && echo done
@reboot root echo boot
`

// TestCrontabWriteKeepsBackupAndMode wraps a system crontab in place: the diff applies
// with patch(1) to the same result as --write, the file keeps its mode, the backup is
// the original (0600, outside the cron folder), no temporary file is left, and a second
// --write changes nothing.
func TestCrontabWriteKeepsBackupAndMode(t *testing.T) {
	c := newCLI(t, "")
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs")
	if err := os.WriteFile(file, []byte(sampleCrontab), 0o640); err != nil {
		t.Fatal(err)
	}
	backups := filepath.Join(t.TempDir(), "backups")
	args := []string{"crontab", "wrap", "--format", "system", "--cronlock", "/usr/local/bin/cronlock", "--backup-dir", backups}

	code, diff, errs := c.run(append(args, file)...)
	if code != 0 || !strings.Contains(diff, "+0 9 * * * root /usr/local/bin/cronlock run --key ") {
		t.Fatalf("diff: exit %d\n%s\n%s", code, diff, errs)
	}
	if !strings.Contains(errs, ":5: run-parts line left as it is") {
		t.Errorf("no note for the run-parts line: %q", errs)
	}
	patched := filepath.Join(t.TempDir(), "patched")
	if err := os.WriteFile(patched, []byte(sampleCrontab), 0o644); err != nil {
		t.Fatal(err)
	}
	p := exec.Command("patch", "-s", patched)
	p.Stdin = strings.NewReader(diff)
	if out, err := p.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s", err, out)
	}

	code, out, errs := c.run(append(args, "--write", file)...)
	if code != 0 {
		t.Fatalf("--write: exit %d: %s", code, errs)
	}
	got, _ := os.ReadFile(file)
	want, _ := os.ReadFile(patched)
	if string(got) != string(want) {
		t.Errorf("--write wrote\n%s\nthe diff gives\n%s", got, want)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after --write, want 0640", st.Mode().Perm())
	}
	bs, _ := filepath.Glob(filepath.Join(backups, "*"))
	if len(bs) != 1 || !strings.Contains(out, bs[0]) {
		t.Fatalf("backups %v; output %q", bs, out)
	}
	if b, _ := os.ReadFile(bs[0]); string(b) != sampleCrontab {
		t.Errorf("backup holds %q", b)
	}
	if st, _ := os.Stat(bs[0]); st.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	code, out, _ = c.run(append(args, "--write", file)...)
	if again, _ := os.ReadFile(file); code != 0 || string(again) != string(got) || !strings.Contains(out, "nothing to wrap") {
		t.Errorf("second --write: exit %d, %q; file changed: %v", code, out, string(again) != string(got))
	}
	if bs2, _ := filepath.Glob(filepath.Join(backups, "*")); len(bs2) != 1 {
		t.Errorf("a write that changed nothing made a backup: %v", bs2)
	}
}

// TestCrontabWrapStdinRunsWithRealCronlock wraps a user crontab from stdin, as the
// crontab -l | ... | crontab - pipeline does, and runs the wrapped line's command
// through /bin/sh with the real cronlock: it prints what the original line printed.
func TestCrontabWrapStdinRunsWithRealCronlock(t *testing.T) {
	c := newCLI(t, "")
	line := `* * * * * echo 'it'"'"'s' "$GREETING" \$HOME a\\b "50\% off" | tr a-z A-Z; echo $((6*7))`
	cmd := c.command("crontab", "wrap", "--local", "--cronlock", cronlockBin, "-")
	cmd.Stdin = strings.NewReader("GREETING=hi there\n" + line + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wrap -: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "GREETING=hi there" || !strings.Contains(lines[1], " --backend local -- /bin/sh -c ") {
		t.Fatalf("wrapped crontab:\n%s", out)
	}
	asCron := func(l string) string {
		fields := strings.SplitN(l, " ", 6)
		sh := exec.Command("/bin/sh", "-c", strings.ReplaceAll(fields[5], `\%`, "%"))
		sh.Env = append(c.env, "GREETING=hi there", "HOME=/home/x")
		b, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", l, err, b)
		}
		return string(b)
	}
	want, got := asCron(line), asCron(lines[1])
	if got != want || want == "" {
		t.Errorf("the original printed %q, the wrapped line %q", want, got)
	}
}

// TestCrontabRefusals: bad input gets one line and exit 125; lint exits 1 on findings
// and 0 on a clean (wrapped) file.
func TestCrontabRefusals(t *testing.T) {
	c := newCLI(t, "")
	file := filepath.Join(c.dir, "jobs")
	if err := os.WriteFile(file, []byte(sampleCrontab), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"crontab", "wrap", "--write", "/var/spool/cron/crontabs/nobody"}, "crontab -l | cronlock crontab wrap - | crontab -"},
		{[]string{"crontab", "wrap", "--write", "-"}, "--write needs a FILE"},
		{[]string{"crontab", "wrap", "--write", "--backup-dir", "/etc/cron.d", file}, "is a cron folder"},
		{[]string{"crontab", "wrap", "--fleet", "--local", file}, "fleet"},
		{[]string{"crontab", "wrap", "--format", "bsd", file}, "--format \"bsd\""},
		{[]string{"crontab", "lint", "--cron-daemon", "fcron", file}, "--cron-daemon \"fcron\""},
		{[]string{"crontab", "lint", filepath.Join(c.dir, "missing")}, "cannot read the crontab"},
		{[]string{"crontab", "wrap", "--cronlock", "rel/cronlock", file}, "not absolute"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != ExitFailed || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "panic") {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line with %q", tc.args, code, errs, ExitFailed, tc.want)
		}
	}
	if got, _ := os.ReadFile(file); string(got) != sampleCrontab {
		t.Errorf("a refused command changed the file")
	}

	code, out, _ := c.run("crontab", "lint", "--format", "system", file)
	if code != 1 || !strings.Contains(out, "jobs:6: not under cronlock") {
		t.Errorf("lint: exit %d, %q", code, out)
	}
	if code, _, errs := c.run("crontab", "wrap", "--format", "system", "--write", "--backup-dir", filepath.Join(c.dir, "bk"), file); code != 0 {
		t.Fatalf("wrap --write: %d %s", code, errs)
	}
	if code, out, _ := c.run("crontab", "lint", "--format", "system", file); code != 0 || out != "" {
		t.Errorf("lint of the wrapped file: exit %d, %q", code, out)
	}
}

// TestCrontabLintNamesZones: a wrapped line whose --schedule reads
// like its crontab schedule but is read in another zone than cron fires it in is
// reported with both zones and where each came from: this machine's /etc/localtime for
// cron, --tz or CRONLOCK_TZ (the settings) for cronlock.
func TestCrontabLintNamesZones(t *testing.T) {
	local, err := schedule.Parse("* * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	other := "Asia/Kolkata"
	if local.Zone() == other {
		other = "Europe/Berlin"
	}
	c := newCLI(t, "")
	file := filepath.Join(c.dir, "jobs")
	line := "PATH=/usr/bin:/bin\n0 9 * * * " + cronlockBin + " run --key k --schedule '0 9 * * *'%s -- /bin/true\n"
	for _, tc := range []struct {
		tz, env, want string
	}{
		{" --tz " + other, "", `--schedule "0 9 * * *" is read in ` + other + ` (its --tz) but cron fires the line in ` + local.Zone() + ` (the cron daemon's zone, /etc/localtime)`},
		{"", "CRONLOCK_TZ=" + other, `--schedule "0 9 * * *" is read in ` + other + ` (CRONLOCK_TZ, environment variable CRONLOCK_TZ) but cron fires the line in ` + local.Zone()},
		{" --tz " + local.Zone(), "CRONLOCK_TZ=" + other, ""},
	} {
		if err := os.WriteFile(file, []byte(fmt.Sprintf(line, tc.tz)), 0o644); err != nil {
			t.Fatal(err)
		}
		saved := c.env
		c.env = append(append([]string(nil), c.env...), "CRONLOCK_TZ="+strings.TrimPrefix(tc.env, "CRONLOCK_TZ="))
		code, out, errs := c.run("crontab", "lint", "--format", "user", "--cron-daemon", "debian", file)
		c.env = saved
		if tc.want == "" && (code != 0 || out != "") || tc.want != "" && (code != 1 || !strings.Contains(out, tc.want) || strings.Count(out, "\n") != 1) {
			t.Errorf("lint of a line with%q and %q: exit %d %q %q; want %q", tc.tz, tc.env, code, out, errs, tc.want)
		}
	}
}
