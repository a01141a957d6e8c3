package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCronMailHasNoPingURL follows the docs' ping recipe (docs/crontab.md) under Debian's real cron: the
// URL in the config file with {key}, the crontab line naming only the key. The failing
// job's mail (caught by a stub sendmail) holds its output and cronlock's line, and not
// the URL: not in the Subject (cron's copy of the command line), not in an X-Cron-Env
// header. A second line written the old way (--ping URL on the line) shows the check
// is real: its mail does leak the URL. cron runs in a private mount namespace where
// /usr/sbin holds only cron and the stub, and /etc/cron.d, /etc/crontab, the spool and
// /run are private, so neither the machine's jobs nor another cron take part.
func TestCronMailHasNoPingURL(t *testing.T) {
	cronBin := needRealCron(t, "a mount namespace, and cron reads /etc/cron.d only from root-owned files", "waits for a minute tick of a real cron")
	// The docs' recipe itself: the URL in the config file, no crontab line with --ping URL.
	readme, err := os.ReadFile("../docs/crontab.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "\n    CRONLOCK_PING_URL=https://hc-ping.com/PING_KEY/{key}?create=1\n") {
		t.Error("docs/crontab.md has no config-file line CRONLOCK_PING_URL=https://hc-ping.com/PING_KEY/{key}?create=1")
	}
	if m := regexp.MustCompile(`(?m)^    (\S+ ){5}\S*cronlock run .*--ping https?://`).FindString(string(readme)); m != "" {
		t.Errorf("docs/crontab.md has a crontab line with the ping URL on it: %q", m)
	}

	c := newCLI(t, "")
	hc := newHC(t)
	dir := c.dir
	mails := filepath.Join(dir, "mails")
	sbin := filepath.Join(dir, "sbin")
	for _, d := range []string{mails, sbin, filepath.Join(dir, "cron.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, text string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(sbin, "sendmail"), "#!/bin/sh\ncat > "+mails+"/mail.$$\n", 0o755)
	cronCopy, _ := os.ReadFile(cronBin)
	write(filepath.Join(sbin, "cron"), string(cronCopy), 0o755)
	conf := filepath.Join(dir, "cronlock.conf")
	write(conf, "CRONLOCK_PING_URL="+hc.url()+"/{key}?create=1\nCRONLOCK_OUTPUT=on-failure\n", 0o644)
	write(filepath.Join(dir, "crontab"), "", 0o644)
	job := ` -- sh -c 'echo job output; exit 3'`
	write(filepath.Join(dir, "cron.d", "cronlock-mail"), strings.Join([]string{
		"SHELL=/bin/sh",
		"MAILTO=root",
		"HOME=" + dir,
		"CRONLOCK_CONFIG=" + conf,
		"CRONLOCK_HISTORY=" + filepath.Join(dir, "history.db"),
		"CRONLOCK_LOCK_DIR=" + filepath.Join(dir, "locks"),
		"* * * * * root " + cronlockBin + " run --key mail-job" + job,
		"* * * * * root " + cronlockBin + " run --key leaky --ping " + hc.url() + job,
		"",
	}, "\n"), 0o644)

	script := `set -e
mount -t tmpfs cronlock-sbin /usr/sbin && cp "$1"/sbin/cron "$1"/sbin/sendmail /usr/sbin/
mount --bind "$1"/cron.d /etc/cron.d
mount --bind "$1"/crontab /etc/crontab
mount -t tmpfs cronlock-spool /var/spool/cron
mkdir -p /var/spool/cron/crontabs
mount -t tmpfs cronlock-run /run
exec /usr/sbin/cron -f`
	d := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", dir)
	d.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var cronErr strings.Builder
	d.Stderr = &cronErr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-d.Process.Pid, syscall.SIGTERM)
		d.Wait()
	})

	var good, leaky string
	waitUntil(t, 150*time.Second, "cron's two mails", func() bool {
		ms, _ := filepath.Glob(filepath.Join(mails, "mail.*"))
		for _, m := range ms {
			b, _ := os.ReadFile(m)
			switch s := string(b); {
			case strings.Contains(s, "cronlock: mail-job: "):
				good = s
			case strings.Contains(s, "cronlock: leaky: "):
				leaky = s
			}
		}
		return good != "" && leaky != ""
	})
	t.Logf("the recipe's mail:\n%s", good)
	if !strings.Contains(good, "Subject: Cron <root@") || !strings.Contains(good, "X-Cron-Env: <CRONLOCK_CONFIG="+conf+">") {
		t.Fatalf("not cron's mail (no Subject, no X-Cron-Env):\n%s (cron said %q)", good, cronErr.String())
	}
	if !strings.Contains(good, "job output\ncronlock: mail-job: failed, exit 3, 1 try, ") {
		t.Errorf("the mail has not the job's output and cronlock's line:\n%s", good)
	}
	noSecret(t, "the recipe's mail", good)
	if !strings.Contains(leaky, pingSecret) {
		t.Errorf("the --ping-on-the-line mail holds no URL: the check cannot see a leak\n%s", leaky)
	}
	var paths []string
	for _, p := range hc.got() {
		paths = append(paths, strings.TrimPrefix(p.Path, "/"+pingSecret))
	}
	if got := strings.Join(paths, " "); !strings.Contains(got, "/mail-job/start") || !strings.Contains(got, "/mail-job/3") {
		t.Errorf("pings %s; want the recipe's start and /3 under the key's slug", got)
	}
}
