package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// A short restart of a Redis with AOF keeps the lock: it must not cost a running
// job its lease, nor a --wait waiter its turn, although go-redis's dial circuit breaker
// may answer renewals with a cached "connection refused" for up to a second after the
// server is back.

// startHeld starts `cronlock run` whose job touches a marker and then sleeps, and waits
// until the job runs (so the lock is held).
func startHeld(t *testing.T, c *cli, key string, extra []string, sleep string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	mark := filepath.Join(c.dir, key+".started")
	args := append([]string{"run", "-k", key}, extra...)
	args = append(args, "--", "sh", "-c", "touch "+mark+"; exec sleep "+sleep)
	cmd := c.command(args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(mark); err == nil {
			return cmd, &errb
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the job of %s did not start within 20 s; stderr %q", key, errb.String())
		}
	}
}

// lockKeyOf is the Redis key of key's lock under c's prefix.
func lockKeyOf(c *cli, key string) string {
	var prefix string
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "CRONLOCK_PREFIX="); ok {
			prefix = v
		}
	}
	return prefix + "{" + key + "}:lock"
}

// lockPTTL reads the remaining lease of key's lock on srv, in ms (-2: no such key).
func lockPTTL(t *testing.T, c *cli, srv *redistest.Server, key string) int {
	t.Helper()
	s, err := srv.Do("PTTL", lockKeyOf(c, key))
	if err != nil {
		t.Fatalf("PTTL of %s: %v", key, err)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("PTTL of %s: %q", key, s)
	}
	return n
}

// nextRenewal watches key's lock value until a renewal lands (its renewed_us changes) and
// returns when the one after it is due, on the wall clock: renewals come every ttl/3.
func nextRenewal(t *testing.T, c *cli, srv *redistest.Server, key string, ttl time.Duration) time.Time {
	t.Helper()
	renewed := func() string {
		v, err := srv.Do("GET", lockKeyOf(c, key))
		if err != nil {
			t.Fatalf("GET the lock of %s: %v", key, err)
		}
		var lv struct {
			RenewedUS string `json:"renewed_us"`
		}
		json.Unmarshal([]byte(v), &lv)
		return lv.RenewedUS
	}
	first := renewed()
	for deadline := time.Now().Add(ttl); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if r := renewed(); r != first && r != "" {
			us, err := strconv.ParseInt(r, 10, 64)
			if err != nil {
				t.Fatalf("renewed_us %q of %s", r, key)
			}
			return time.UnixMicro(us).Add(ttl / 3)
		}
	}
	t.Fatalf("no renewal of %s seen within its TTL", key)
	return time.Time{}
}

// TestShortRestartKeepsLease: four holders with --ttl 3s running a 5 s job ride out kill -9
// + restarts 0.2–0.3 s long and end succeeded, exit 0. Each restart is aimed a few ms before
// a renewal of one holder (a renewal sent into the outage is what tripped go-redis's dial
// breaker before), and the other holders see it at other points of their renewal cycles.
func TestShortRestartKeepsLease(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	const ttl = 3 * time.Second
	downs := []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
	cmds := make([]*exec.Cmd, len(downs))
	errs := make([]*bytes.Buffer, len(downs))
	for i, down := range downs {
		key := fmt.Sprintf("hold%d", i)
		cmds[i], errs[i] = startHeld(t, c, key, []string{"--ttl", ttl.String()}, "5")
		due := nextRenewal(t, c, srv, key, ttl)
		time.Sleep(time.Until(due.Add(-time.Duration(5+10*i) * time.Millisecond)))
		shortRestart(srv, down)
		// The test proves something only if the AOF kept the lock.
		if ms := lockPTTL(t, c, srv, key); ms <= 0 {
			t.Fatalf("after the restart the lock of %s is gone (PTTL %d): AOF did not keep it", key, ms)
		}
	}
	for i, cmd := range cmds {
		err := cmd.Wait()
		key := fmt.Sprintf("hold%d", i)
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d (%v), want 0: a %v restart that kept the lock killed the job; stderr %q",
				key, code, err, downs[i], errs[i].String())
		}
		if rows := c.history(key); len(rows) != 1 || rows[0].Status != runstatus.Succeeded {
			t.Errorf("%s: history %+v, want one succeeded run", key, rows)
		}
	}
}

// TestShortRestartWaiter: --wait 60s waiters ride out a 0.3 s restart (an error while
// waiting is retried until the wait ends), then run one after the other once the holder
// ends. Four waiters started a quarter of their polling period apart: one of them polls
// during the outage whenever it comes.
func TestShortRestartWaiter(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	holder, herr := startHeld(t, c, "w", []string{"--ttl", "3s"}, "3")
	const waiters = 4
	cmds := make([]*exec.Cmd, waiters)
	errs := make([]*bytes.Buffer, waiters)
	for i := range waiters {
		cmds[i] = c.command("run", "-k", "w", "--ttl", "3s", "--wait", "60s", "--", "true")
		errs[i] = &bytes.Buffer{}
		cmds[i].Stderr = errs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	shortRestart(srv, 300*time.Millisecond)
	if ms := lockPTTL(t, c, srv, "w"); ms <= 0 {
		t.Fatalf("after the restart the lock is gone (PTTL %d): AOF did not keep it", ms)
	}
	holder.Wait()
	if code := holder.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the holder exited %d, want 0; stderr %q", code, herr.String())
	}
	for i, cmd := range cmds {
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("waiter %d exited %d, want 0: it did not ride out the restart; stderr %q", i, code, errs[i].String())
		}
	}
	var ok int
	rows := c.history("w")
	for _, r := range rows {
		if r.Status == runstatus.Succeeded {
			ok++
		}
	}
	if ok != 1+waiters {
		t.Errorf("history %+v, want %d succeeded runs (the holder, then each waiter)", rows, 1+waiters)
	}
}
