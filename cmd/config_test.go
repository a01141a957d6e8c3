package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cronlock/internal/redistest"
)

// TestConfigShow: cronlock config prints every setting in force with where it came
// from (default, file:PATH:LINE, env, flag), secrets masked, and which backend runs lock
// on; --json says the same per line.
func TestConfigShow(t *testing.T) {
	c := newCLI(t, "")
	conf := filepath.Join(c.dir, "cronlock.conf")
	os.WriteFile(conf, []byte("# fleet\nCRONLOCK_BACKEND=redis\nCRONLOCK_REDIS_URL=redis://cronlock:s3cret@127.0.0.1:6399/0\n"), 0o644)
	c.env = append(c.env, "CRONLOCK_CONFIG="+conf, "CRONLOCK_PING_URL=https://hc.example/pingkey123/{key}?create=1")
	code, out, errs := c.run("config", "--prefix", "p:")
	if code != 0 || errs != "" {
		t.Fatalf("config: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		`(?m)^default +CRONLOCK_TTL=60s$`,
		`(?m)^file:` + regexp.QuoteMeta(conf) + `:2 +CRONLOCK_BACKEND=redis$`,
		`(?m)^file:` + regexp.QuoteMeta(conf) + `:3 +CRONLOCK_REDIS_URL=redis://cronlock:xxxxx@127\.0\.0\.1:6399/0$`,
		`(?m)^env +CRONLOCK_PING_URL=https://hc\.example/xxxxx/\{key\}\?create=1$`,
		`(?m)^flag:--prefix +CRONLOCK_PREFIX=p:$`,
		`(?m)^env +CRONLOCK_NODE=clinode$`,
		`(?m)^# runs lock on: redis 127\.0\.0\.1:6399/0$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("config output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "pingkey123") {
		t.Errorf("a secret shows:\n%s", out)
	}
	code, out, _ = c.run("config", "--json")
	var url struct {
		Name, Value, Origin, File string
		Line                      int
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Name, Value, Origin, File string
			Line                      int
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("config --json line %q: %v", line, err)
		}
		if e.Name == "CRONLOCK_REDIS_URL" {
			url = e
		}
	}
	if code != 0 || url.Origin != "file" || url.File != conf || url.Line != 3 || strings.Contains(url.Value, "s3cret") {
		t.Fatalf("config --json: exit %d, CRONLOCK_REDIS_URL %+v", code, url)
	}

	// A host that sets no server is told that it locks alone.
	alone := newCLI(t, "")
	if code, out, _ := alone.run("config"); code != 0 || !strings.Contains(out, "# runs lock on: local "+filepath.Join(alone.dir, "locks")+" (no Redis URL or etcd endpoints are set: this host locks alone") {
		t.Fatalf("config without a server: exit %d:\n%s", code, out)
	}
	// A typo in the environment is a problem: exit 1, one line.
	alone.env = append(alone.env, "CRONLOCK_REDIS_ULR=redis://h/0")
	if code, _, errs := alone.run("config"); code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "did you mean CRONLOCK_REDIS_URL?") {
		t.Fatalf("config with a typo: exit %d, stderr %q; want 1 and one line", code, errs)
	}
}

// TestFleetRecipeBackendRedis: the README's fleet set-up puts CRONLOCK_BACKEND=redis in
// the config file, so a host whose crontab and file lack the URL fails loudly, naming
// where the backend was chosen, instead of locking alone.
func TestFleetRecipeBackendRedis(t *testing.T) {
	c := newCLI(t, "")
	conf := filepath.Join(c.dir, "cronlock.conf")
	os.WriteFile(conf, []byte("CRONLOCK_BACKEND=redis\n"), 0o644)
	c.env = append(c.env, "CRONLOCK_CONFIG="+conf)
	code, out, errs := c.run("run", "-k", "billing", "--", "echo", "ran")
	if code != 125 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "CRONLOCK_REDIS_URL is required") || !strings.Contains(errs, "CRONLOCK_BACKEND in "+conf+" line 1") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 125, no job, one line naming the config file's line", code, out, errs)
	}
}

// TestConfigCheck: config check tries a real Redis with the README's ACL user and says
// all is fine (0); each fault is one line on stderr and exit 1: an ACL without EVALSHA,
// a server that evicts keys (allkeys-lru), a clock an hour off, an unreachable server,
// a lock folder others can write, a world-readable password file.
func TestConfigCheck(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do(readmeACL(t, "acl-pass-7731")...); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, "redis://cronlock:acl-pass-7731@"+srv.Addr+"/0")
	c.env = append(c.env, "CRONLOCK_PREFIX=cronlock:")
	code, out, errs := c.run("config", "check")
	if code != 0 || errs != "" {
		t.Fatalf("config check with the README's ACL: exit %d, stdout %q, stderr %q; want 0", code, out, errs)
	}
	for _, want := range []string{"ok: redis " + srv.Addr + "/0 answers", "ok: the ACL user may run every command cronlock sends on cronlock:*",
		"ok: the server never evicts keys (maxmemory-policy noeviction", "ok: this host's clock is", "ok: lock folder", "ok: history file", "ok: runs lock on redis " + srv.Addr + "/0"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	problem := func(name, want string, env ...string) {
		t.Helper()
		saved := c.env
		c.env = append(append([]string(nil), c.env...), env...)
		defer func() { c.env = saved }()
		code, out, errs := c.run("config", "check")
		if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1 and one line holding %q", name, code, out, errs, want)
		}
	}
	problem("clock an hour ahead", "this host's clock is 1h0m0s ahead of redis "+srv.Addr+"/0's, more than --max-skew / CRONLOCK_MAX_SKEW 30s", "CRONLOCK_TEST_CLOCK_OFFSET=1h")
	if _, err := srv.Do("ACL", "SETUSER", "cronlock", "-evalsha"); err != nil {
		t.Fatal(err)
	}
	problem("no EVALSHA", "the ACL user may not run EVALSHA on the keys and channels cronlock:*")
	if _, err := srv.Do("ACL", "SETUSER", "cronlock", "+evalsha"); err != nil {
		t.Fatal(err)
	}

	lru := redistest.Start(t, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	problem("allkeys-lru", "can evict keys (maxmemory-policy allkeys-lru, maxmemory 100mb)", "CRONLOCK_REDIS_URL=redis://"+lru.Addr+"/0")
	down := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	problem("unreachable", "redis "+down+" unreachable", "CRONLOCK_REDIS_URL=redis://"+down+"/0")

	open := filepath.Join(c.dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	problem("lock folder others can write", "is writable by group or others", "CRONLOCK_LOCK_DIR="+open)
	pw := filepath.Join(c.dir, "pw")
	os.WriteFile(pw, []byte("acl-pass-7731\n"), 0o644)
	problem("password file world-readable", "the password file "+pw+" (CRONLOCK_REDIS_PASSWORD_FILE) can be read by every user", "CRONLOCK_REDIS_PASSWORD_FILE="+pw)
}

// TestConfigCheckHA: config check tries the Sentinel and Cluster forms too, through the
// master that the Sentinels name and the node of the probe's slot, and asks Cluster
// users for CLUSTER SLOTS.
func TestConfigCheckHA(t *testing.T) {
	for _, form := range []string{"sentinel", "cluster"} {
		t.Run(form, func(t *testing.T) {
			var url string
			if form == "sentinel" {
				url = redistest.StartSentinel(t).URL()
			} else {
				url = redistest.StartCluster(t).URL()
			}
			c := newCLI(t, url)
			code, out, errs := c.run("config", "check")
			if code != 0 || errs != "" || !strings.Contains(out, "ok: the ACL user may run every command") || !strings.Contains(out, "ok: the server never evicts keys") {
				t.Fatalf("config check on %s: exit %d, stdout %q, stderr %q", form, code, out, errs)
			}
		})
	}
}
