package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// Reaching Redis through the built binary: passwords, the README's ACL line, the config
// file that names the fleet's server.

// TestWrongRedisPassword: 125, one line, and the password appears nowhere.
func TestWrongRedisPassword(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "right-pass-938")
	const secret = "Wr0ngPa55-7731"
	url := "redis://:" + secret + "@" + srv.Addr + "/0"
	c := newCLI(t, url)
	code, _, stderr := c.run("run", "-k", "pw", "--", "true")
	if code != 125 {
		t.Fatalf("exit %d, want 125 (stderr %q)", code, stderr)
	}
	if strings.Contains(stderr, secret) {
		t.Fatalf("the password is in stderr: %q", stderr)
	}
	if !strings.Contains(stderr, "cronlock: ") || !strings.Contains(strings.ToLower(stderr), "auth") {
		t.Fatalf("stderr %q does not say authentication failed", stderr)
	}
	// In the flag (visible in ps) it earns a warning, and still never appears.
	code, _, stderr = c.run("run", "-k", "pw", "--redis", url, "--", "true")
	if code != 125 || strings.Contains(stderr, secret) || !strings.Contains(stderr, "visible") {
		t.Fatalf("with --redis: exit %d, stderr %q; want 125, a ps warning, no password", code, stderr)
	}
	db, err := os.ReadFile(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(filepath.Join(c.dir, "history.db-wal"))
	if bytes.Contains(db, []byte(secret)) || bytes.Contains(wal, []byte(secret)) {
		t.Fatal("the password is in the history file")
	}
	rows := c.history("pw")
	if len(rows) != 2 || rows[0].Status != runstatus.Error {
		t.Fatalf("history %+v, want two error rows", rows)
	}
	// The right password from a file works.
	pwf := filepath.Join(c.dir, "pw")
	os.WriteFile(pwf, []byte("right-pass-938\n"), 0o600)
	c.env = append(c.env, "CRONLOCK_REDIS_PASSWORD_FILE="+pwf)
	if code, _, stderr := c.run("run", "-k", "pw", "--", "true"); code != 0 {
		t.Fatalf("with the password file: exit %d, stderr %q", code, stderr)
	}
}

// TestConfigFilePointsAtRedis: a crontab that forgot CRONLOCK_REDIS_URL still locks
// on the fleet's Redis when the config file names it.
func TestConfigFilePointsAtRedis(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "")
	conf := filepath.Join(c.dir, "cronlock.conf")
	os.WriteFile(conf, []byte("# fleet settings\nCRONLOCK_REDIS_URL=redis://"+addr+"/0\nCRONLOCK_TTL=5s\n"), 0o644)
	c.env = append(c.env, "CRONLOCK_CONFIG="+conf)
	if code, _, stderr := c.run("run", "-k", "conf", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := c.history("conf")
	if len(rows) != 1 {
		t.Fatalf("history %+v", rows)
	}
	code, out, _ := c.run("history", "--json", "--key", "conf")
	if code != 0 || !strings.Contains(out, `"backend":"redis `+addr) {
		t.Fatalf("the run did not use the Redis from the config file: %s", out)
	}
}

// TestReadmeACL: a Redis user with exactly the ACL rules the README gives (read from the
// README itself) can run, wait, list, unlock and keep checkpoints, on database 0 and another one, with the
// eviction check working (no warning that INFO is forbidden). Without +select, only
// database 0 works: the rule is needed.
func TestReadmeACL(t *testing.T) {
	rules := readmeACL(t, "acl-pass-5521")
	for _, db := range []string{"0", "3"} {
		t.Run("db"+db, func(t *testing.T) {
			srv := redistest.Start(t)
			if _, err := srv.Do(rules...); err != nil {
				t.Fatalf("%v: %v", rules, err)
			}
			c := newCLI(t, "redis://cronlock:acl-pass-5521@"+srv.Addr+"/"+db)
			c.env = append(c.env, "CRONLOCK_PREFIX=cronlock:")
			if code, out, errs := c.run("run", "-k", "acl", "--", "echo", "ran"); code != 0 || out != "ran\n" || errs != "" {
				t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if code, _, errs := c.run("run", "-k", "acl", "--wait", "2s", "--min-hold", "10s", "--", "true"); code != 0 || errs != "" {
				t.Fatalf("run --wait --min-hold: exit %d, stderr %q", code, errs)
			}
			if code, out, errs := c.run("history", "--fleet", "--key", "acl"); code != 0 || strings.Count(out, "succeeded") != 2 || errs != "" {
				t.Fatalf("history --fleet: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if code, out, errs := c.run("status"); code != 0 || !strings.Contains(out, "acl") || errs != "" {
				t.Fatalf("status: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if code, out, errs := c.run("jobs"); code != 0 || !strings.Contains(out, "acl ") || errs != "" {
				t.Fatalf("jobs: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			// A job's checkpoints, saved, loaded, marked, shown and reset.
			c.env = append(c.env, "CL="+cronlockBin)
			if code, out, errs := c.run("run", "-k", "aclck", "--", "sh", "-c", `"$CL" checkpoint save pos && "$CL" checkpoint load`); code != 0 || out != "pos" || errs != "" {
				t.Fatalf("checkpoint save and load: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if code, out, errs := c.run("checkpoint", "reset", "-k", "aclck"); code != 0 || !strings.Contains(out, "removed 2") {
				t.Fatalf("checkpoint reset: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if code, out, errs := c.run("unlock", "-k", "acl", "--force"); code != 0 || !strings.Contains(out, "removed acl") {
				t.Fatalf("unlock: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if db == "0" {
				return
			}
			if _, err := srv.Do("ACL", "SETUSER", "cronlock", "-select"); err != nil {
				t.Fatal(err)
			}
			if code, _, errs := c.run("run", "-k", "acl", "--", "true"); code != 125 || !strings.Contains(errs, "SELECT") {
				t.Fatalf("without +select on db %s: exit %d, stderr %q; want 125 naming SELECT", db, code, errs)
			}
		})
	}
}
