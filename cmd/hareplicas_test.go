package cmd

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

// TestMinReplicasScriptsBySHA: with --min-replicas the acquire goes by SHA1 in the same
// round trip as its WAIT, as every other script does; a server whose script cache is
// empty (new, restarted, failed over, SCRIPT FLUSH) answers NOSCRIPT, and the body
// follows with a WAIT of its own, one more round trip, once. INFO replication rides in
// the acquire's round trip (the majority warning), never in one of its own.
func TestMinReplicasScriptsBySHA(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port), "--repl-diskless-sync-delay", "0")
	waitUntil(t, 10*time.Second, "the master to count its replica online", func() bool {
		info, err := master.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "state=online")
	})
	p, err := faultproxy.Start(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := newCLI(t, "redis://"+p.Addr+"/0")
	// The release's WAIT: the completion of the run's ledger entry is acknowledged too.
	cold := "EVALSHA WAIT INFO | EVAL WAIT INFO | EVALSHA WAIT | EVAL WAIT"
	for i, want := range []string{cold, "EVALSHA WAIT INFO | EVALSHA WAIT", "flush", cold} {
		if want == "flush" {
			if _, err := master.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		before := len(p.Turns())
		if code, _, errs := c.run("run", "-k", "sha"+strconv.Itoa(i), "--min-replicas", "1", "--", "true"); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errs)
		}
		if got := strings.Join(turnCommands(t, p.Turns()[before:]), " | "); got != want {
			t.Fatalf("run %d sent the turns %q, want %q", i, got, want)
		}
	}

	// An ACL written for an older cronlock (no +evalsha): the body goes with its WAIT,
	// and the rest of the run sends bodies only.
	if _, err := master.Do("ACL", "SETUSER", "old", "on", ">old-pw-31", "~*", "&*", "+@all", "-evalsha"); err != nil {
		t.Fatal(err)
	}
	c = newCLI(t, "redis://old:old-pw-31@"+p.Addr+"/0")
	before := len(p.Turns())
	if code, _, errs := c.run("run", "-k", "acl", "--min-replicas", "1", "--", "true"); code != 0 {
		t.Fatalf("run without +evalsha: exit %d: %s", code, errs)
	}
	want := "AUTH | EVALSHA WAIT INFO | EVAL WAIT INFO | EVAL WAIT"
	if got := strings.Join(turnCommands(t, p.Turns()[before:]), " | "); got != want {
		t.Fatalf("a run without +evalsha sent the turns %q, want %q", got, want)
	}
}

// TestMinReplicasLossSaysWhy: a run whose only replica stops acknowledging (SIGSTOP)
// is stopped at the end of its lease, and its one line says why and what to check,
// without -v.
func TestMinReplicasLossSaysWhy(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port), "--repl-diskless-sync-delay", "0")
	// WAIT counts a replica once its first acknowledgement came in: a non-zero offset,
	// once the master has written something.
	ackedOffset := regexp.MustCompile(`state=online,offset=[1-9]`)
	waitUntil(t, 10*time.Second, "the master to count its replica's acknowledgement", func() bool {
		master.Do("SET", "written", "1")
		info, err := master.Do("INFO", "replication")
		return err == nil && ackedOffset.MatchString(info)
	})
	c := newCLI(t, "redis://"+master.Addr)
	started := filepath.Join(c.dir, "started")
	run := c.command("run", "-k", "lag", "--ttl", "3s", "--min-replicas", "1", "--redis-timeout", "1s", "--grace", "100ms",
		"--", "sh", "-c", "touch "+started+"; exec sleep 30")
	var errb strings.Builder
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, started)
	replica.Stop()
	defer replica.Cont()
	code := c.exitCode(run.Wait())
	if code != 125 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "replicas acknowledged the renewal") ||
		!strings.Contains(errb.String(), "--min-replicas") {
		t.Fatalf("exit %d, stderr %q: want 125 and one line that names the replicas and --min-replicas", code, errb.String())
	}
}
