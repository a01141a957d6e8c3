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
	if code, out, _ := c.run("crontab", "lint", "--format", "system", file); code != 0 || lintFindings(out) != "" || !strings.Contains(out, "jobs:6: next tick of --schedule ") {
		t.Errorf("lint of the wrapped file: exit %d, %q; want only next ticks", code, out)
	}
}

// lintFindings is lint's output without the next-tick lines, which are not findings.
func lintFindings(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.Contains(l, ": next tick ") {
			b.WriteString(l)
		}
	}
	return b.String()
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
		found := lintFindings(out)
		if tc.want == "" && (code != 0 || found != "") || tc.want != "" && (code != 1 || !strings.Contains(found, tc.want) || strings.Count(found, "\n") != 1) {
			t.Errorf("lint of a line with%q and %q: exit %d %q %q; want %q", tc.tz, tc.env, code, out, errs, tc.want)
		}
	}
}

// debianCrontab returns a function that asks Debian's crontab(1) whether it would
// install a user crontab: `crontab -n FILE` (check only, Debian 12), or where -n is
// unknown, a real install into a spool of its own (a tmpfs over
// /var/spool/cron/crontabs in a private mount namespace, so the machine's spool is
// left as it was). Without either it skips, or fails under CI.
func debianCrontab(t *testing.T) func(file string) (bool, string) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if exec.Command("crontab", "-n", empty).Run() == nil {
		return func(file string) (bool, string) {
			out, err := exec.Command("crontab", "-n", file).CombinedOutput()
			return err == nil, string(out)
		}
	}
	private := func(file string) (bool, string) {
		out, err := exec.Command("unshare", "-m", "sh", "-c",
			`mount -t tmpfs tmpfs /var/spool/cron/crontabs && crontab "$1"`, "sh", file).CombinedOutput()
		return err == nil, string(out)
	}
	if ok, out := private(empty); !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Debian's crontab(1) cannot check a file here (no -n, no private spool: %s): scripts/test.sh installs cron and runs as root", out)
		}
		t.Skipf("no Debian crontab(1) to ask: %s", out)
	}
	return private
}

// TestCrontabLintAgreesWithDebianCrontab writes crontabs that Debian's cron refuses
// (and ignores whole) or accepts, asks Debian's own crontab(1), and runs lint on each:
// lint says the file is ignored exactly when crontab(1) refuses it.
func TestCrontabLintAgreesWithDebianCrontab(t *testing.T) {
	accepts := debianCrontab(t)
	c := newCLI(t, "")
	long := func(n int) string { return "/bin/echo " + strings.Repeat("x", n-len("/bin/echo ")) }
	job := "* * * * * /bin/true\n"
	for _, tc := range []struct {
		name, text string
	}{
		{"empty MAILTO", "MAILTO=\n" + job},
		{"quoted empty MAILTO", "MAILTO=\"\"\n" + job},
		{"two addresses", "MAILTO=ops@example.com, dev@example.com\n" + job},
		{"comment after MAILTO", "MAILTO=\"\" # no mail\n" + job},
		{"unterminated quote", "FOO=\"bar\n" + job},
		{"text after the quote", "FOO=\"a\"b\n" + job},
		{"blanks around =", "FOO = \"a b\" \n" + job},
		{"quoted name", "'FOO'=a\n" + job},
		{"= in a quoted name", "\"FO=O\"=a\n" + job},
		{"no final newline", "MAILTO=\"\"\n* * * * * /bin/true"},
		{"final comment without newline", job + "# the end"},
		{"command of 998 bytes", "* * * * * " + long(998) + "\n"},
		{"command of 999 bytes", "* * * * * " + long(999) + "\n"},
		{"upper-case descriptor", "@HOURLY /bin/true\n"},
		{"six fields", "0 * * * * * /bin/true\n"},
		{"step without range", "5/10 * * * * /bin/true\n"},
		{"minute 60", "60 * * * * /bin/true\n"},
		{"names", "0 9 * jan-jun mon-fri /bin/true\n"},
		{"day-of-week 8", "0 9 * * 8 /bin/true\n"},
		{"four fields", "0 9 * * \n"},
		{"long quoted value", "FOO=\"" + strings.Repeat("v", 993) + "\"\n" + job},
	} {
		file := filepath.Join(c.dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		ok, why := accepts(file)
		code, out, errs := c.run("crontab", "lint", "--format", "user", "--cron-daemon", "debian", file)
		ignored := strings.Contains(out, "cron refuses it and then ignores the whole file")
		if ok && ignored && tc.name == "empty MAILTO" {
			continue // a newer Debian's cron takes it; lint reports it for Debian 12's
		}
		if code == ExitFailed || ignored == ok {
			t.Errorf("%s: crontab(1) accepts it: %v (%s); lint exit %d:\n%s%s", tc.name, ok, strings.TrimSpace(why), code, out, errs)
		}
	}
}

// TestCrontabWrapKeepsLinesCronCanRead wraps a user crontab whose first job has a
// 920-byte command: wrapped, it would pass the 998 bytes Debian's cron takes, and cron
// would ignore the whole file. wrap leaves that line as it is and says so, wraps the
// other line, and Debian's crontab(1) accepts the result.
func TestCrontabWrapKeepsLinesCronCanRead(t *testing.T) {
	accepts := debianCrontab(t)
	c := newCLI(t, "")
	longLine := "*/5 * * * * /usr/bin/rsync -a " + strings.Repeat("/srv/data/part ", 60) + "/backup/"
	longLine = longLine[:len("*/5 * * * * ")+920]
	text := "SHELL=/bin/sh\n" + longLine + "\n17 3 * * * /usr/bin/find /tmp -mtime +7 -delete\n"
	cmd := c.command("crontab", "wrap", "--cronlock", "/usr/local/bin/cronlock", "-")
	cmd.Stdin = strings.NewReader(text)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wrap: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 3 || lines[1] != longLine || !strings.Contains(lines[2], "/usr/local/bin/cronlock run --key find-") {
		t.Errorf("wrapped crontab:\n%s", out)
	}
	if !strings.Contains(stderr.String(), `(stdin):2: wrapped, the command would be 1`) || !strings.Contains(stderr.String(), `takes at most 998 ("command too long")`) {
		t.Errorf("wrap's notes: %q", stderr.String())
	}
	file := filepath.Join(c.dir, "wrapped")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, why := accepts(file); !ok {
		t.Errorf("Debian's crontab(1) refuses wrap's output: %s\n%s", why, out)
	}
}

// TestCrontabWrapLeavesBackgroundWork: Debian's own anacron line (invoke-rc.d anacron
// start) and a `sleep 300 &` line start something that must outlive the line's shell,
// which cronlock's leftover-process cleanup would stop: wrap leaves both as they are
// and says why, wraps the other line, and lint names both, and a line that was wrapped
// anyway.
func TestCrontabWrapLeavesBackgroundWork(t *testing.T) {
	c := newCLI(t, "")
	anacron := "30 7-23 * * *   root\t[ -x /etc/init.d/anacron ] && if [ ! -d /run/systemd/system ]; then /usr/sbin/invoke-rc.d anacron start >/dev/null; fi"
	sleeper := "*/10 * * * * root sleep 300 &"
	other := "0 4 * * * root /usr/sbin/logrotate /etc/logrotate.conf"
	file := filepath.Join(c.dir, "anacron")
	text := "SHELL=/bin/sh\nPATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin\n\n" + anacron + "\n" + sleeper + "\n" + other + "\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--format", "system", "--cronlock", "/usr/local/bin/cronlock"}
	code, _, errs := c.run(append([]string{"crontab", "wrap", "--write", "--backup-dir", filepath.Join(c.dir, "bk")}, append(args, file)...)...)
	if code != 0 {
		t.Fatalf("wrap --write: exit %d: %s", code, errs)
	}
	got, _ := os.ReadFile(file)
	lines := strings.Split(string(got), "\n")
	if lines[3] != anacron || lines[4] != sleeper || !strings.Contains(lines[5], "cronlock run --key logrotate-") {
		t.Errorf("wrapped file:\n%s", got)
	}
	for _, want := range []string{"anacron:4: starts a service or leaves work in the background (`/usr/sbin/invoke-rc.d anacron start`)", "anacron:5: starts a service or leaves work in the background (a command put in the background with &)"} {
		if !strings.Contains(errs, want) || !strings.Contains(errs, "leftover-process cleanup") {
			t.Errorf("wrap's notes lack %q:\n%s", want, errs)
		}
	}
	wrappedSleeper := "*/10 * * * * root /usr/local/bin/cronlock run --key sleep-0 --schedule '*/10 * * * *' --backend local -- /bin/sh -c 'sleep 300 &'"
	if err := os.WriteFile(file, []byte(string(got)+wrappedSleeper+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := c.run("crontab", "lint", "--format", "system", "--cron-daemon", "debian", file)
	for _, n := range []string{"4", "5", "7"} {
		if code != 1 || !strings.Contains(out, "anacron:"+n+": starts a service or leaves work in the background") {
			t.Errorf("lint does not name line %s: exit %d\n%s", n, code, out)
		}
	}
}

// TestCrontabLintLooksInsideWrappedLines wraps Debian's /etc/cron.d/cacti (cacti
// 1.2.24, Debian 12), whose job runs `php` with no PATH= line: cron's PATH is
// /usr/bin:/bin, and cronlock runs the wrapped command with that PATH too, so lint of
// the wrapped file still names the relative command. (The line's user is root here:
// lint refuses a system line whose user this machine lacks, and says no more of it.)
func TestCrontabLintLooksInsideWrappedLines(t *testing.T) {
	c := newCLI(t, "")
	php := "php"
	for _, d := range []string{"/usr/bin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, php)); err == nil {
			php = "php-not-installed" // lint names only what cron's PATH does not hold
		}
	}
	file := filepath.Join(c.dir, "cacti")
	text := "MAILTO=root\n*/5 * * * * root " + php + " /usr/share/cacti/site/poller.php 2>&1 >/dev/null | if [ -f /usr/bin/ts ] ; then ts ; else tee ; fi >> /var/log/cacti/poller-error.log\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	lint := []string{"crontab", "lint", "--format", "system", "--cron-daemon", "debian", file}
	want := `cacti:2: relative command "` + php + `" and no PATH= line above it`
	if code, out, _ := c.run(lint...); code != 1 || !strings.Contains(out, want) {
		t.Fatalf("lint before wrapping: exit %d\n%s", code, out)
	}
	if code, _, errs := c.run("crontab", "wrap", "--format", "system", "--write", "--backup-dir", filepath.Join(c.dir, "bk"), file); code != 0 {
		t.Fatalf("wrap --write: exit %d: %s", code, errs)
	}
	code, out, _ := c.run(lint...)
	if code != 1 || !strings.Contains(out, want) || strings.Contains(out, "not under cronlock") {
		t.Errorf("lint of the wrapped file: exit %d\n%s", code, out)
	}
}
