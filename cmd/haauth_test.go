package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// Passwords and ACL users on the Cluster form, and the ACL rule --min-replicas needs,
// through the built binary.

const clusterPass = "cl-pass-6610"

// TestClusterPassword: a Cluster whose every node needs a password (requirepass, and
// masterauth for replicas) runs, hands a lock to a waiter, shows it in status and
// unlocks it; a wrong password is exit 125 and one line that never shows it.
func TestClusterPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterReplicas(t, 0, "--requirepass", clusterPass, "--masterauth", clusterPass)
	hosts := strings.TrimPrefix(cl.URL(), "redis-cluster://")
	exerciseCLI(t, newCLI(t, "redis-cluster://:"+clusterPass+"@"+hosts))

	const wrong = "Wr0ng-" + clusterPass
	c := newCLI(t, "redis-cluster://"+hosts)
	pwFile := filepath.Join(c.dir, "pw")
	if err := os.WriteFile(pwFile, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, "CRONLOCK_REDIS_PASSWORD_FILE="+pwFile)
	code, _, errs := c.run("run", "-k", "pw", "--redis-timeout", "1s", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "authentication failed") || strings.Contains(errs, clusterPass) {
		t.Fatalf("a wrong password from the file: exit %d, stderr %q; want 125 and one line saying authentication failed, without the password", code, errs)
	}
	// In the URL it earns the ps warning too, and still never shows.
	code, _, errs = c.run("run", "-k", "pw", "--redis-timeout", "1s", "--redis", "redis-cluster://:"+wrong+"@"+hosts, "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 2 || !strings.Contains(errs, "authentication failed") || strings.Contains(errs, clusterPass) {
		t.Fatalf("a wrong password in --redis: exit %d, stderr %q; want 125, the ps warning and one line, without the password", code, errs)
	}
	for _, cmd := range [][]string{{"status"}, {"unlock", "-k", "pw"}, {"history", "--fleet"}} {
		code, _, errs := c.run(cmd...)
		if code == 0 || strings.Count(errs, "\n") != 1 || strings.Contains(errs, clusterPass) {
			t.Errorf("%s with a wrong password: exit %d, stderr %q; want a failure in one line without the password", cmd[0], code, errs)
		}
	}
	for _, f := range []string{"history.db", "history.db-wal"} {
		if b, _ := os.ReadFile(filepath.Join(c.dir, f)); bytes.Contains(b, []byte(clusterPass)) {
			t.Fatalf("the password is in %s", f)
		}
	}
}

// TestClusterPasswordRoundTrips: with a password, each connection a short run opens
// starts with AUTH in a turn of its own: one connection (AUTH, CLUSTER SLOTS, then the
// scripts) when the node the run asks first serves the lock's slot, two otherwise.
func TestClusterPasswordRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterReplicas(t, 0, "--requirepass", clusterPass)
	proxies, seeds := clusterBehindProxies(t, cl)
	const key = "crtpw"
	owner := -1
	for i, s := range cl.Nodes {
		if _, err := s.Do("EXISTS", "{"+key+"}"); err == nil {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no node serves the key's slot")
	}
	other := (owner + 1) % len(cl.Nodes)
	for _, tc := range []struct {
		seed int
		want string // the turns of each connection, connections sorted
	}{
		{owner, "AUTH CLUSTER EVALSHA EVALSHA"},
		{other, "AUTH CLUSTER / AUTH EVALSHA EVALSHA"},
	} {
		c := newCLI(t, "redis-cluster://:"+clusterPass+"@"+seeds[tc.seed])
		// The first run from the owner's seed fills the owner's script cache; every
		// run after it is counted.
		for run := 0; run < 2; run++ {
			before := make([]int, len(proxies))
			for i, p := range proxies {
				before[i] = len(p.Turns())
			}
			if code, _, errs := c.run("run", "-k", key, "--", "true"); code != 0 {
				t.Fatalf("seed %d, run %d: exit %d: %s", tc.seed, run, code, errs)
			}
			var conns []string
			for i, p := range proxies {
				byConn := map[int][]string{}
				var order []int
				for _, tu := range p.Turns()[before[i]:] {
					if _, ok := byConn[tu.Conn]; !ok {
						order = append(order, tu.Conn)
					}
					byConn[tu.Conn] = append(byConn[tu.Conn], turnCommands(t, []faultproxy.Turn{tu})...)
				}
				for _, n := range order {
					conns = append(conns, strings.Join(byConn[n], " "))
				}
			}
			sort.Strings(conns)
			if got := strings.Join(conns, " / "); got != tc.want && (tc.seed != owner || run > 0) {
				t.Fatalf("seed %d (the slot's master is %d), run %d: connections %q, want %q", tc.seed, owner, run, got, tc.want)
			}
		}
	}
}

// TestClusterACL: a user with the README's ACL line plus the two rules it names for the
// HA forms (+cluster|slots for the discovery, +wait for --min-replicas), set on every
// node, runs, waits, lists and unlocks on a Cluster with no warning; without
// +cluster|slots no run can find the lock's node, and says so in one line.
func TestClusterACL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	const pw = "acl-cl-pass-2207"
	rules := append(readmeACL(t, pw), "+cluster|slots", "+wait")
	setAll := func(rules ...string) {
		for _, s := range cl.Nodes {
			if _, err := s.Do(rules...); err != nil {
				t.Fatalf("%v: %v", rules, err)
			}
		}
	}
	setAll(rules...)
	c := newCLI(t, "redis-cluster://cronlock:"+pw+"@"+strings.TrimPrefix(cl.URL(), "redis-cluster://"))
	c.env = append(c.env, "CRONLOCK_PREFIX=cronlock:")
	if code, out, errs := c.run("run", "-k", "acl", "--", "echo", "ran"); code != 0 || out != "ran\n" || errs != "" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// A waiter takes the lock when the holder lets it go, and keeps it (--min-hold) for
	// status and unlock.
	holder := c.command("run", "-k", "acl", "--", "sleep", "1")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the holder to take the lock", func() bool {
		_, out, _ := c.run("status", "--json")
		return strings.Contains(out, `"key":"acl"`)
	})
	if code, _, errs := c.run("run", "-k", "acl", "--wait", "10s", "--min-hold", "30s", "--", "true"); code != 0 || errs != "" {
		t.Fatalf("run --wait: exit %d, stderr %q", code, errs)
	}
	if err := holder.Wait(); err != nil {
		t.Fatalf("the holder: %v", err)
	}
	if rows := c.history("acl"); len(rows) != 3 || rows[0].Attempt < 2 {
		t.Fatalf("rows %+v: want three runs, the newest after waiting", rows)
	}
	if code, out, errs := c.run("history", "--fleet", "--key", "acl"); code != 0 || strings.Count(out, "succeeded") != 3 || errs != "" {
		t.Fatalf("history --fleet: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := c.run("status"); code != 0 || !strings.Contains(out, "acl") || errs != "" {
		t.Fatalf("status: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := c.run("jobs"); code != 0 || !strings.Contains(out, "acl ") || errs != "" {
		t.Fatalf("jobs: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := c.run("unlock", "-k", "acl", "--force"); code != 0 || !strings.Contains(out, "removed acl") {
		t.Fatalf("unlock: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	setAll("ACL", "SETUSER", "cronlock", "-cluster|slots")
	code, _, errs := c.run("run", "-k", "acl", "--redis-timeout", "1s", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "add +cluster|slots") {
		t.Fatalf("without +cluster|slots: exit %d, stderr %q; want 125 and one line naming +cluster|slots", code, errs)
	}
}

// TestMinReplicasACL: --min-replicas sends WAIT, which the README's ACL line leaves out:
// a user without +wait gets one line naming the rule, the job does not run and the lock
// is not left behind; with +wait the run goes ahead.
func TestMinReplicasACL(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port), "--repl-diskless-sync-delay", "0")
	waitUntil(t, 10*time.Second, "the master to count its replica online", func() bool {
		info, err := master.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "state=online")
	})
	const pw = "acl-wait-pass-9124"
	if _, err := master.Do(readmeACL(t, pw)...); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, "redis://cronlock:"+pw+"@"+master.Addr+"/0")
	c.env = append(c.env, "CRONLOCK_PREFIX=cronlock:")
	marks := filepath.Join(c.dir, "marks")
	code, _, errs := c.run("run", "-k", "acked", "--min-replicas", "1", "--", "sh", "-c", "echo ran >> "+marks)
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "add +wait") {
		t.Fatalf("without +wait: exit %d, stderr %q; want 125 and one line naming +wait", code, errs)
	}
	if _, err := os.Stat(marks); err == nil {
		t.Fatal("the job ran although WAIT was refused")
	}
	if rows := c.history("acked"); len(rows) != 1 || rows[0].Status != runstatus.Error {
		t.Fatalf("rows %+v, want one error", rows)
	}
	// The lock was let go: a run without --min-replicas takes it at once.
	if code, _, errs := c.run("run", "-k", "acked", "--", "sh", "-c", "echo ran >> "+marks); code != 0 || errs != "" {
		t.Fatalf("the run after: exit %d, stderr %q", code, errs)
	}
	if b, _ := os.ReadFile(marks); string(b) != "ran\n" {
		t.Fatalf("marks %q: the run after the refused one was skipped (the lock was left held)", b)
	}
	if _, err := master.Do("ACL", "SETUSER", "cronlock", "+wait"); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c.run("run", "-k", "acked", "--min-replicas", "1", "--", "true"); code != 0 || errs != "" {
		t.Fatalf("with +wait: exit %d, stderr %q", code, errs)
	}
}
