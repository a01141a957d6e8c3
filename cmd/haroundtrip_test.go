package cmd

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
)

// The round trips of a short run (`run --schedule … -- true`, acquire with its tick and
// release with the fleet's record) on the Sentinel and Cluster forms, counted on the wire
// through internal/faultproxy: what each form's discovery adds to the plain form's two
// turns (TestShortRunRoundTrips).

// turnsSince are the commands of the turns after the first n of p, on connections
// numbered above conn (older ones belong to the servers' own traffic).
func turnsSince(t *testing.T, p *faultproxy.Proxy, n, conn int) []string {
	t.Helper()
	var mine []faultproxy.Turn
	for _, tu := range p.Turns()[n:] {
		if tu.Conn > conn {
			mine = append(mine, tu)
		}
	}
	return turnCommands(t, mine)
}

// lastConn is the number of the newest connection p has seen a turn on.
func lastConn(p *faultproxy.Proxy) int {
	n := 0
	for _, tu := range p.Turns() {
		n = max(n, tu.Conn)
	}
	return n
}

func proxyPort(t *testing.T, p *faultproxy.Proxy) string {
	_, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestSentinelShortRunRoundTrips: the Sentinel costs a short run one connection and one
// turn (SENTINEL GET-MASTER-ADDR-BY-NAME; go-redis's HELLO is answered without being
// sent, as on the data connection), then the master gets what redis:// sends.
func TestSentinelShortRunRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinel(t)
	mp, err := faultproxy.Start(d.Master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	// The Sentinels name the master by the proxy's address, so that cronlock's data
	// connection goes through it too.
	for _, s := range d.Sentinels {
		if _, err := s.Do("SENTINEL", "REMOVE", d.Name); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Do("SENTINEL", "MONITOR", d.Name, "127.0.0.1", proxyPort(t, mp), "2"); err != nil {
			t.Fatal(err)
		}
	}
	// The Sentinels' own connections to the master open within a second; cronlock's
	// come after them.
	waitUntil(t, 10*time.Second, "the Sentinels to connect to the master", func() bool {
		return lastConn(mp) >= 2*len(d.Sentinels)
	})
	time.Sleep(500 * time.Millisecond)
	sp, err := faultproxy.Start(d.Sentinels[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	c := newCLI(t, "redis-sentinel://"+sp.Addr+"/"+d.Name)
	for i, want := range []string{
		"EVALSHA | EVAL | EVALSHA | EVAL", // a new server: an empty script cache
		"EVALSHA | EVALSHA",
	} {
		sn, mn, mc := len(sp.Turns()), len(mp.Turns()), lastConn(mp)
		if code, _, errs := c.run("run", "-k", "srt"+strconv.Itoa(i), "--schedule", "* * * * *", "--", "true"); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errs)
		}
		sent := strings.Join(turnCommands(t, sp.Turns()[sn:]), " | ")
		if sent != "SENTINEL" {
			t.Fatalf("run %d sent the Sentinel %q, want one turn: SENTINEL (GET-MASTER-ADDR-BY-NAME)", i, sent)
		}
		if got := strings.Join(turnsSince(t, mp, mn, mc), " | "); got != want {
			t.Fatalf("run %d sent the master %q, want %q", i, got, want)
		}
	}

	// A Sentinel with a password: AUTH first, in a turn of its own; a wrong one is
	// refused with one line naming the setting, never the password.
	const pw = "sentinel-pw-7730"
	if _, err := d.Sentinels[0].Do("ACL", "SETUSER", "default", "resetpass", ">"+pw); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(c.dir, "spw")
	for _, tc := range []struct{ password, turns string }{
		{pw, "AUTH | SENTINEL"},
		{"Wr0ng-" + pw, "AUTH"},
	} {
		if err := os.WriteFile(pwFile, []byte(tc.password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.env = append(c.env, "CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE="+pwFile)
		sn := len(sp.Turns())
		code, _, errs := c.run("run", "-k", "srtpw", "--redis-timeout", "500ms", "--", "true")
		if got := strings.Join(turnCommands(t, sp.Turns()[sn:]), " | "); !strings.HasPrefix(got, tc.turns) || strings.Contains(got, "HELLO") {
			t.Errorf("password %q: the Sentinel got %q, want %q", tc.password, got, tc.turns)
		}
		switch {
		case tc.password == pw && code != 0:
			t.Errorf("the right Sentinel password: exit %d: %s", code, errs)
		case tc.password != pw && (code != 125 || !strings.Contains(errs, "CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE") || strings.Count(strings.TrimSpace(errs), "\n") != 0):
			t.Errorf("a wrong Sentinel password: exit %d, stderr %q; want 125 and one line naming the setting", code, errs)
		}
		if strings.Contains(errs, pw) {
			t.Errorf("the Sentinel password is in stderr: %q", errs)
		}
	}
}

// TestClusterShortRunRoundTrips: a Cluster costs a short run one turn of discovery
// (CLUSTER SLOTS, to the seed node it asks first), then the acquire and release go to
// the master of the lock's slot, on a second connection when that is another node.
func TestClusterShortRunRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	proxies, seeds := clusterBehindProxies(t, cl)
	c := newCLI(t, "redis-cluster://"+strings.Join(seeds, ","))
	turns := func() []string {
		var all []string
		for _, p := range proxies {
			all = append(all, turnCommands(t, p.Turns())...)
		}
		return all
	}
	// The second run has the same key, so the same master, whose script cache the first
	// filled (without --schedule, as the tick is taken: the same scripts).
	for i, tc := range []struct {
		want int
		args []string
	}{
		{5, []string{"--schedule", "* * * * *"}}, // CLUSTER SLOTS, then EVALSHA, EVAL for each script
		{3, nil},                                 // CLUSTER SLOTS, EVALSHA, EVALSHA
	} {
		want := tc.want
		before := turns()
		key := "crt"
		args := append(append([]string{"run", "-k", key}, tc.args...), "--", "true")
		if code, _, errs := c.run(args...); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errs)
		}
		got := turns()
		for _, b := range before {
			got = removeOne(got, b)
		}
		if len(got) != want || !contains(got, "CLUSTER") || strings.Count(strings.Join(got, " "), "EVALSHA") != 2 {
			t.Fatalf("run %d (key %s) sent the turns %q, want %d: CLUSTER SLOTS and the scripts", i, key, got, want)
		}
	}
}

func removeOne(s []string, v string) []string {
	for i, x := range s {
		if x == v {
			return append(s[:i:i], s[i+1:]...)
		}
	}
	return s
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
