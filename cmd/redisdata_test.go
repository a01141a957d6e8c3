package cmd

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// TestEvictingRedisRefused: a server that can evict keys is refused at acquire (exit 125,
// one line naming the policy and the fix, no lock left, an error row) unless the user
// allows it; noeviction, or no maxmemory at all, runs.
func TestEvictingRedisRefused(t *testing.T) {
	for _, policy := range []string{"volatile-lru", "allkeys-lru"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, "--maxmemory", "3mb", "--maxmemory-policy", policy)
			c := newCLI(t, "redis://"+srv.Addr+"/0")
			code, out, stderr := c.run("run", "-k", "evict", "--", "echo", "ran")
			if code != 125 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 125 and no run", code, out, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, policy) || !strings.Contains(stderr, "noeviction") ||
				!strings.Contains(stderr, "CRONLOCK_ALLOW_EVICTION=yes") {
				t.Fatalf("stderr %q: want one line naming %s, noeviction and CRONLOCK_ALLOW_EVICTION=yes", stderr, policy)
			}
			for _, k := range []string{"{evict}:lock", "{evict}:fence"} {
				if n := mustDo(t, srv.Addr, "EXISTS", c.prefix()+k); n != "0" {
					t.Fatalf("the refused run left %s behind", k)
				}
			}
			rows := c.history("evict")
			if len(rows) != 1 || rows[0].Status != runstatus.Error || !strings.Contains(rows[0].Error, policy) {
				t.Fatalf("history %+v, want one error row naming %s", rows, policy)
			}
			// status and unlock only read and delete: they work, and status says it.
			code, _, stderr = c.run("status")
			if code != 0 || !strings.Contains(stderr, "evict") || !strings.Contains(stderr, policy) {
				t.Fatalf("status: exit %d, stderr %q; want 0 and a warning naming %s", code, stderr, policy)
			}
			if code, _, stderr := c.run("unlock", "-k", "evict"); code != 0 {
				t.Fatalf("unlock: exit %d, stderr %q", code, stderr)
			}
			// The opt-in, from the environment, the config file or the flag.
			conf := filepath.Join(c.dir, "allow.conf")
			os.WriteFile(conf, []byte("CRONLOCK_ALLOW_EVICTION=yes\n"), 0o644)
			for _, how := range [][]string{{"CRONLOCK_ALLOW_EVICTION=yes"}, {"CRONLOCK_CONFIG=" + conf}, {"flag"}} {
				args := []string{"run", "-k", "evict", "--", "echo", "ran"}
				env := how
				if how[0] == "flag" {
					args = append([]string{"run", "--allow-eviction"}, args[1:]...)
					env = nil
				}
				saved := c.env
				c.env = append(append([]string{}, c.env...), env...)
				code, out, stderr := c.run(args...)
				c.env = saved
				if code != 0 || out != "ran\n" || stderr != "" {
					t.Fatalf("allowed by %s: exit %d, stdout %q, stderr %q; want the job run, silently", how[0], code, out, stderr)
				}
			}
		})
	}
	for name, args := range map[string][]string{
		"noeviction":   {"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"},
		"no maxmemory": {"--maxmemory", "0", "--maxmemory-policy", "volatile-lru"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t, args...)
			c := newCLI(t, "redis://"+srv.Addr+"/0")
			if code, out, stderr := c.run("run", "-k", "evict", "--", "echo", "ran"); code != 0 || out != "ran\n" || stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want the job run, silently", code, out, stderr)
			}
		})
	}
}

// TestEvictionCheckWithoutInfo: an ACL without +info cannot read the eviction policy. The
// run goes ahead with one warning, said at most once an hour (cron mails every run).
func TestEvictionCheckWithoutInfo(t *testing.T) {
	srv := redistest.Start(t)
	mustDo(t, srv.Addr, "ACL", "SETUSER", "noinfo", "on", ">noinfo-pass-81", "~*", "&*", "+@all", "-info")
	c := newCLI(t, "redis://noinfo:noinfo-pass-81@"+srv.Addr+"/0")
	code, out, stderr := c.run("run", "-k", "noinfo", "--", "echo", "ran")
	if code != 0 || out != "ran\n" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "+info") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the job run and one warning naming +info", code, out, stderr)
	}
	if code, _, stderr := c.run("run", "-k", "noinfo", "--", "true"); code != 0 || stderr != "" {
		t.Fatalf("second run: exit %d, stderr %q; want 0 and the warning not repeated", code, stderr)
	}
}

// TestStatusLargeKeyspace: listing locks walks the keyspace with SCAN; each call has its
// own --redis-timeout, never the whole walk, so status works on any keyspace. Here every
// SCAN takes about 40ms through a proxy, well within the 500ms time-out, and the walk
// takes well over 2×500ms + 1s.
func TestStatusLargeKeyspace(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100k keys and walks them slowly")
	}
	srv := redistest.Start(t)
	const n, batch = 100000, 10000
	for i := 0; i < n; i += batch {
		mustDo(t, srv.Addr, "EVAL", "for i = ARGV[1], ARGV[2] do redis.call('SET', 'filler:' .. i, 'x') end return 1",
			"0", strconv.Itoa(i), strconv.Itoa(i+batch-1))
	}
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	if code, _, stderr := c.run("run", "-k", "held", "--min-hold", "10m", "--", "true"); code != 0 {
		t.Fatalf("run: exit %d, stderr %q", code, stderr)
	}
	p, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Set(faultproxy.Latency, 20*time.Millisecond)
	code, out, stderr := c.run("status", "--redis", "redis://"+p.Addr+"/0", "--redis-timeout", "500ms")
	if code != 0 || !strings.Contains(out, "held") {
		t.Fatalf("status: exit %d, stdout %q, stderr %q; want 0 and the held lock", code, out, stderr)
	}
}

// TestFencingCounterEdges: the fencing token is exact integer arithmetic on the stored
// counter. Past 2^53 (where a double repeats) tokens still rise by one; at 2^64−1 (the
// largest CRONLOCK_FENCING_TOKEN), past it, or with garbage in the counter, the run is
// refused with a clear line and leaves no lock behind.
func TestFencingCounterEdges(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr+"/0")
	fence, lock := c.prefix()+"{f53}:fence", c.prefix()+"{f53}:lock"
	t.Cleanup(func() { redistest.Do(addr, "DEL", fence, lock) })
	tokenRun := func() (int, string, string) {
		return c.run("run", "-k", "f53", "--", "sh", "-c", `echo "$CRONLOCK_FENCING_TOKEN"`)
	}

	for _, tc := range []struct{ set, want string }{
		{"9007199254740992", "9007199254740993"}, // 2^53
		{"", "9007199254740994"},
		{"", "9007199254740995"},
		{"00000000000000000000009007199254740999", "9007199254741000"},
		{"18446744073709551614", "18446744073709551615"}, // 2^64−2: the last token there is
	} {
		if tc.set != "" {
			mustDo(t, addr, "SET", fence, tc.set)
		}
		code, out, stderr := tokenRun()
		if code != 0 || strings.TrimSpace(out) != tc.want {
			t.Fatalf("counter %s: exit %d, token %q, stderr %q; want token %s", tc.set, code, out, stderr, tc.want)
		}
		if got := mustDo(t, addr, "GET", fence); got != tc.want {
			t.Fatalf("the counter holds %s after token %s", got, tc.want)
		}
	}

	for _, tc := range []struct{ set, says string }{
		{"18446744073709551615", "2^64-1"}, // 2^64−1
		{"18446744073709551616", "2^64-1"}, // 2^64
		{"99999999999999999999999999", "2^64-1"},
		{"garbage", "not a decimal integer"},
		{"-5", "not a decimal integer"},
		{"1e+20", "not a decimal integer"},
		{"", "not a decimal integer"},
	} {
		mustDo(t, addr, "SET", fence, tc.set)
		code, out, stderr := tokenRun()
		if code != 125 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, fence) {
			t.Fatalf("counter %q: exit %d, stdout %q, stderr %q; want 125, no job, one line naming %s and saying %q", tc.set, code, out, stderr, fence, tc.says)
		}
		if n := mustDo(t, addr, "EXISTS", lock); n != "0" {
			t.Fatalf("counter %q: the refused run left the lock behind", tc.set)
		}
		if got := mustDo(t, addr, "GET", fence); got != tc.set {
			t.Fatalf("counter %q: the refused run changed it to %q", tc.set, got)
		}
	}
	rows := c.history("f53")
	if len(rows) != 12 || rows[0].Status != runstatus.Error || rows[len(rows)-1].FencingToken != 9007199254740993 {
		t.Fatalf("history %+v: want 12 rows, the newest an error, the oldest with token 2^53+1", rows)
	}

	// Below the clock, the clock in microseconds wins, as before.
	mustDo(t, addr, "SET", fence, "42")
	code, out, _ := tokenRun()
	tok, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if code != 0 || err != nil || tok < uint64(time.Now().Add(-time.Hour).UnixMicro()) {
		t.Fatalf("counter 42: exit %d, token %q; want a token from the Redis clock", code, out)
	}
}

// TestPasswordNeverShown: whatever the password (one character, ":" or "@", the host
// name, the port), the messages of run, status and unlock and the history rows are the
// very same as with any other password: it is kept out of them by their structure, never
// replaced by its text (which garbles "127.0.0.1" for the password "1" and shows where
// it was). A password in --redis earns the ps warning in every command.
func TestPasswordNeverShown(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "right-pass-938")
	host, port := "127.0.0.1", strconv.Itoa(srv.Port)
	const reference = "reference-pw-5531"
	passwords := []string{"1", "x", ":", "@", "%40", host, port, "xxxxx", "redis", "0"}

	// outputs runs every command with the password given one way, and returns what
	// each printed and the history's error rows.
	outputs := func(t *testing.T, pw string, inURL bool) string {
		c := newCLI(t, "redis://"+srv.Addr+"/0")
		var flags []string
		if inURL {
			u := url.URL{Scheme: "redis", User: url.UserPassword("", pw), Host: srv.Addr, Path: "/0"}
			flags = []string{"--redis", u.String()}
		} else {
			f := filepath.Join(c.dir, "pw")
			os.WriteFile(f, []byte(pw+"\n"), 0o600)
			flags = []string{"--redis-password-file", f}
		}
		var all strings.Builder
		for _, args := range [][]string{
			append(append([]string{"run", "-k", "pw"}, flags...), "--", "true"),
			append([]string{"status"}, flags...),
			append([]string{"status", "-k", "pw", "--json"}, flags...),
			append([]string{"unlock", "-k", "pw"}, flags...),
		} {
			code, out, stderr := c.run(args...)
			if code != 125 {
				t.Fatalf("%s with password %q: exit %d, stderr %q; want 125 (wrong password)", args[0], pw, code, stderr)
			}
			if inURL && !strings.Contains(stderr, "visible to every user in ps") {
				t.Fatalf("%s with the password in --redis: stderr %q has no ps warning", args[0], stderr)
			}
			if !strings.Contains(stderr, host+":"+port) {
				t.Fatalf("%s with password %q: stderr %q does not name the server %s:%s", args[0], pw, stderr, host, port)
			}
			fmt.Fprintf(&all, "%s: %d %q %q\n", args[0], code, out, stderr)
		}
		for _, r := range c.history("pw") {
			fmt.Fprintf(&all, "row %s %q\n", r.Status, r.Error)
		}
		// Only a password unlike everything else can be looked for in the file itself.
		wal, _ := os.ReadFile(filepath.Join(c.dir, "history.db-wal"))
		db, _ := os.ReadFile(filepath.Join(c.dir, "history.db"))
		if pw == reference && (bytes.Contains(db, []byte(pw)) || bytes.Contains(wal, []byte(pw))) {
			t.Fatalf("the password %q is in the history file", pw)
		}
		return all.String()
	}
	for _, inURL := range []bool{false, true} {
		t.Run(map[bool]string{false: "file", true: "url"}[inURL], func(t *testing.T) {
			want := outputs(t, reference, inURL)
			for _, pw := range passwords {
				if got := outputs(t, pw, inURL); got != want {
					t.Errorf("with the password %q the output differs from that with any other password:\n%s\nwant\n%s", pw, got, want)
				}
			}
		})
	}
}

// TestFullServerStillRenews: a noeviction server that reaches its maxmemory while a job
// runs refuses every write that may grow memory; the renewals must still go through, or
// every job on a full server would be stopped as a lost lock.
func TestFullServerStillRenews(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	ready := filepath.Join(c.dir, "ready")
	cmd := c.command("run", "-k", "full", "--ttl", "1s", "--", "sh", "-c", `touch "$0"; sleep 2.5; echo done`, ready)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, ready)
	// Full: a megabyte of data, then a maxmemory well below what is used, so that the
	// server stays full whatever it frees meanwhile (buffers, a finished rehash).
	mustDo(t, srv.Addr, "EVAL", "for i = 1, 20 do redis.call('SET', 'filler:' .. i, string.rep('x', 50000)) end return 1", "0")
	mustDo(t, srv.Addr, "CONFIG", "SET", "maxmemory", "512kb")
	if _, err := redistest.Do(srv.Addr, "SET", "probe", "x"); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("the server is not full: SET gave %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the job on a full server: %v; stdout %q, stderr %q", err, out.String(), errb.String())
	}
	if out.String() != "done\n" {
		t.Fatalf("stdout %q", out.String())
	}
	if rows := c.history("full"); len(rows) != 1 || rows[0].Status != runstatus.Succeeded {
		t.Fatalf("history %+v, want one succeeded run", rows)
	}
	// A new lock needs memory: refused with a line that says the server is full.
	code, _, stderr := c.run("run", "-k", "full2", "--", "true")
	if code != 125 || !strings.Contains(stderr, "is full") || !strings.Contains(stderr, "maxmemory") {
		t.Fatalf("a new lock on a full server: exit %d, stderr %q; want 125 saying the server is full", code, stderr)
	}
	// --min-hold keeps the lock after the job on a full server too: the release that
	// shortens the lease to the rest of the hold goes through.
	mustDo(t, srv.Addr, "CONFIG", "SET", "maxmemory", "0")
	ready2 := filepath.Join(c.dir, "ready2")
	holder := c.command("run", "-k", "hold", "--ttl", "5m", "--min-hold", "30s", "--", "sh", "-c", `touch "$0"; sleep 0.5`, ready2)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, ready2)
	mustDo(t, srv.Addr, "CONFIG", "SET", "maxmemory", "512kb")
	if err := holder.Wait(); err != nil {
		t.Fatalf("min-hold run: %v", err)
	}
	if ms, _ := strconv.Atoi(mustDo(t, srv.Addr, "PTTL", c.prefix()+"{hold}:lock")); ms <= 0 || ms > 30000 {
		t.Fatalf("after the release on a full server the lock lives %d ms; want the rest of the 30s hold", ms)
	}
	code, _, stderr = c.run("run", "-k", "hold", "--", "true")
	if rows := c.history("hold"); code != 0 || len(rows) != 2 || rows[0].Status != runstatus.Skipped {
		t.Fatalf("during the hold on a full server: exit %d, stderr %q, want a skip", code, stderr)
	}
}
