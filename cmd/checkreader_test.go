package cmd

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A monitoring user runs check against root's lock folder and a copy of root's history:
// check only reads the tick record there, so the folder's owner is no reason to refuse,
// and "remove it" (the advice to a run that would take a lock in it) must never be said.
func TestCheckAsMonitoringUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give the lock folder another owner than the checking user")
	}
	c := newCLI(t, "")
	if code, _, errs := c.run("run", "--key", "billing", "--backend", "local", "--schedule", "* * * * *", "--", "true"); code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	// The copy a monitoring user may read, as the README suggests.
	shared, err := os.MkdirTemp("", "cronlock-check-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	copyDB := filepath.Join(shared, "history.db")
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("VACUUM INTO ?", copyDB)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{shared: 0o755, copyDB: 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	cred, bin := durabAsNobody(t, newCLI(t, ""))
	check := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"check", "--key", "billing", "--backend", "local", "--history", copyDB}, args...)...)
		cmd.Env = append(inheritedEnv(), "CRONLOCK_CONFIG="+os.DevNull, "CRONLOCK_LOCK_DIR="+filepath.Join(c.dir, "locks"))
		cmd.Dir = shared
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var out bytes.Buffer
		cmd.Stdout = &out
		return c.exitCode(cmd.Run()), out.String()
	}
	if code, out := check("--schedule", "* * * * *"); code != 0 {
		t.Errorf("check --schedule as nobody: exit %d %q; want 0 OK", code, out)
	}
	// Root's folder is 0700: the recorded schedule cannot be read, and the line says
	// what to give instead.
	if code, out := check(); code != 3 || !strings.Contains(out, "give --schedule") || strings.Contains(out, "remove it") {
		t.Errorf("check as nobody without --schedule: exit %d %q; want 3 UNKNOWN asking for --schedule", code, out)
	}
}

// A backend that cannot be reached is UNKNOWN for that reason, never taken for a key
// without runs.
func TestCheckUnreachableRedis(t *testing.T) {
	c := newCLI(t, "redis://127.0.0.1:1/0")
	code, out, _ := c.run("check", "--key", "billing", "--max-age", "1h", "--redis-timeout", "1s")
	if code != 3 || !strings.Contains(out, "unreachable") {
		t.Errorf("check with Redis down: exit %d %q; want 3 UNKNOWN saying Redis is unreachable", code, out)
	}
}
