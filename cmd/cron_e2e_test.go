package cmd

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRealCronRunsWrappedCrontab puts a crontab made by `crontab wrap --write` in front
// of Debian's cron: the same every-minute line twice, as two hosts sharing one lock
// would have it. For each minute tick, one copy runs and the other is skipped.
func TestRealCronRunsWrappedCrontab(t *testing.T) {
	cronBin := needRealCron(t, "cron reads /etc/cron.d only from root-owned files", "waits for two minute ticks of a real cron; scripts/test.sh runs it")
	c := newCLI(t, "")
	dir := c.dir
	rnd := make([]byte, 4)
	rand.Read(rnd)
	file := "/etc/cron.d/cronlock-e2e-" + hex.EncodeToString(rnd)
	t.Cleanup(func() { os.Remove(file) })
	line := "* * * * * root echo tick >> " + filepath.Join(dir, "ticks.log")
	text := strings.Join([]string{
		"SHELL=/bin/sh",
		`MAILTO=""`,
		"HOME=" + dir,
		"CRONLOCK_CONFIG=" + os.DevNull,
		"CRONLOCK_HISTORY=" + filepath.Join(dir, "history.db"),
		"CRONLOCK_LOCK_DIR=" + filepath.Join(dir, "locks"),
		"CRONLOCK_NODE=e2e",
		line, line, "",
	}, "\n")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("crontab", "wrap", "--write", "--cronlock", cronlockBin, "--backup-dir", filepath.Join(dir, "backups"), file)
	if code != 0 {
		t.Fatalf("wrap --write: exit %d: %s%s", code, out, errs)
	}
	wrapped, _ := os.ReadFile(file)
	m := regexp.MustCompile(`run --key (\S+) --schedule '\* \* \* \* \*' --backend local -- `).FindAllStringSubmatch(string(wrapped), -1)
	if len(m) != 2 || m[0][1] != m[1][1] {
		t.Fatalf("wrapped file:\n%s", wrapped)
	}
	key := m[0][1]

	if !cronRunning() {
		d := exec.Command(cronBin, "-f")
		d.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-d.Process.Pid, syscall.SIGTERM)
			d.Wait()
		})
	}

	// Two full ticks: a tick counts once both copies have a finished row for it.
	type row struct {
		Status       string  `json:"status"`
		ScheduledFor *string `json:"scheduled_for"`
		FinishedAt   *string `json:"finished_at"`
	}
	var ticks map[string][]string
	deadline := time.Now().Add(150 * time.Second)
	for {
		ticks = map[string][]string{}
		_, out, _ := c.run("history", "--json", "--limit", "100", "--key", key)
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var r row
			if l == "" || json.Unmarshal([]byte(l), &r) != nil || r.ScheduledFor == nil {
				continue
			}
			ticks[*r.ScheduledFor] = append(ticks[*r.ScheduledFor], r.Status)
		}
		full := 0
		for _, s := range ticks {
			if len(s) >= 2 {
				full++
			}
		}
		if full >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 150 s, runs per tick: %v (is cron running? %v)", ticks, cronRunning())
		}
		time.Sleep(2 * time.Second)
	}
	for tick, s := range ticks {
		if len(s) < 2 {
			continue // the tick still under way when the loop stopped
		}
		slices.Sort(s)
		got := strings.Join(s, ",")
		if got != "skipped,succeeded" {
			t.Errorf("tick %s: runs %s, want one succeeded and one skipped", tick, got)
		}
	}
}

// cronRunning reports whether a cron daemon runs on this machine.
func cronRunning() bool {
	ds, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range ds {
		if b, err := os.ReadFile(d); err == nil && (string(b) == "cron\n" || string(b) == "crond\n") {
			return true
		}
	}
	return false
}
