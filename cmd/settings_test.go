package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEnvTypoRefused: a misspelled CRONLOCK_ variable on a crontab line is refused by
// every command that reads settings (125; 3 with the status line in check), with one
// line that names it and what was meant, before any job runs on a lock of this machine
// alone. kvz/cronlock's names say what to write instead.
func TestEnvTypoRefused(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_REDIS_ULR=redis://:s3cret@127.0.0.1:1/0")
	code, out, errs := c.run("run", "-k", "billing", "--", "echo", "ran")
	if code != 125 || out != "" || strings.Count(errs, "\n") != 1 ||
		!strings.Contains(errs, "cronlock: unknown environment variable CRONLOCK_REDIS_ULR (did you mean CRONLOCK_REDIS_URL?)") || strings.Contains(errs, "s3cret") {
		t.Fatalf("run: exit %d, stdout %q, stderr %q; want 125, no job, one line naming the typo", code, out, errs)
	}
	for _, args := range [][]string{{"status"}, {"history"}, {"unlock", "-k", "billing"}, {"history", "stats"}} {
		if code, _, errs := c.run(args...); code != 125 || !strings.Contains(errs, "CRONLOCK_REDIS_ULR") {
			t.Errorf("%v: exit %d, stderr %q; want 125 naming the typo", args, code, errs)
		}
	}
	if code, out, _ := c.run("check", "-k", "billing", "--max-age", "1h"); code != 3 || !strings.Contains(out, "UNKNOWN") || !strings.Contains(out, "CRONLOCK_REDIS_ULR") {
		t.Errorf("check: exit %d, stdout %q; want 3 (UNKNOWN) naming the typo", code, out)
	}

	c.env = append(c.env, "CRONLOCK_LOG_FORMAT=json")
	if code, _, errs := c.run("run", "-k", "billing", "--", "true"); code != 125 || !strings.HasPrefix(errs, `{"time":`) || !strings.Contains(errs, "CRONLOCK_REDIS_ULR") {
		t.Errorf("with CRONLOCK_LOG_FORMAT=json: exit %d, stderr %q; want the line as JSON", code, errs)
	}

	k := newCLI(t, "")
	k.env = append(k.env, "CRONLOCK_HOST=redis.internal", "CRONLOCK_GRACE=40")
	code, _, errs = k.run("run", "-k", "billing", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "CRONLOCK_GRACE") || !strings.Contains(errs, "--min-hold") {
		t.Fatalf("kvz/cronlock's names: exit %d, stderr %q; want 125 and one line saying what to write", code, errs)
	}
	k.env = k.env[:len(k.env)-1]
	if _, _, errs = k.run("run", "-k", "billing", "--", "true"); !strings.Contains(errs, "write CRONLOCK_REDIS_URL=redis://HOST:PORT/0 instead") {
		t.Fatalf("CRONLOCK_HOST: stderr %q", errs)
	}
}

// TestNestedRun: a job that calls cronlock run itself passes on every name cronlock gave
// it (and a test hook's variable), and the inner run accepts them and gives its own.
func TestNestedRun(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_TEST_UNUSED=1")
	code, out, errs := c.run("run", "-k", "outer", "--schedule", "* * * * *", "--tz", "UTC", "--",
		cronlockBin, "run", "-k", "inner", "--", "sh", "-c", "echo inner=$CRONLOCK_KEY try=$CRONLOCK_TRY")
	if code != 0 || out != "inner=inner try=1\n" || errs != "" {
		t.Fatalf("nested run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestConfigFileUnreadable: a config file that a second user cannot read stops that
// user's runs with one line naming the file and the fix, and a folder it cannot search
// is named as such; made 0644 (the documented set-up), it is read.
func TestConfigFileUnreadable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run cronlock as a second user")
	}
	c := newCLI(t, "")
	cred, bin := durabAsNobody(t, c)
	conf := filepath.Join(filepath.Dir(bin), "cronlock.conf")
	durabWrite(t, conf, []byte("CRONLOCK_TTL=30s\n"), 0o600)
	private := filepath.Join(filepath.Dir(bin), "private")
	os.Mkdir(private, 0o700)
	durabWrite(t, filepath.Join(private, "cronlock.conf"), []byte("CRONLOCK_TTL=30s\n"), 0o644)
	run := func(confPath string, args ...string) (int, string) {
		if len(args) == 0 {
			args = []string{"run", "-k", "k", "--", "echo", "ran"}
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(c.env, "CRONLOCK_CONFIG="+confPath)
		cmd.Dir = c.dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := c.exitCode(cmd.Run())
		if code == 0 && out.String() != "ran\n" {
			t.Fatalf("exit 0 without the job's output: %q", out.String())
		}
		return code, errb.String()
	}
	code, errs := run(conf)
	want := "cronlock: config file " + conf + " cannot be read by nobody (uid 65534) (permission denied)"
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, want) || !strings.Contains(errs, "chmod 0644 "+conf) || !strings.Contains(errs, "CRONLOCK_REDIS_PASSWORD_FILE") {
		t.Fatalf("0600 config file as nobody: exit %d, stderr %q; want 125 and one line %q…chmod 0644…", code, errs, want)
	}
	if code, errs := run(conf, "config", "check"); code != 1 || !strings.HasPrefix(errs, want) {
		t.Fatalf("config check as nobody: exit %d, stderr %q; want 1 and the same line", code, errs)
	}
	code, errs = run(filepath.Join(private, "cronlock.conf"))
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "its folder "+private+" cannot be searched by nobody") || !strings.Contains(errs, "chmod 0755 "+private) {
		t.Fatalf("config file in a 0700 folder as nobody: exit %d, stderr %q", code, errs)
	}
	if err := os.Chmod(conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, errs = run(conf); code != 0 || errs != "" {
		t.Fatalf("0644 config file as nobody: exit %d, stderr %q", code, errs)
	}
}
