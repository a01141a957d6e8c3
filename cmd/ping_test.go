package cmd

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// pingSecret is in the path of every test's ping URL: it must never be printed.
const pingSecret = "pingsecret-7f3a9c"

// noSecret fails when any of outs holds the ping URL or its secret.
func noSecret(t *testing.T, what string, outs ...string) {
	t.Helper()
	for _, s := range outs {
		if strings.Contains(s, pingSecret) {
			t.Errorf("%s shows the ping URL: %q", what, s)
		}
	}
}

// TestPingOutcomes: start and success with the run id of the history row, on both
// backends; a failure pings /EXIT with the output's tail; the job never sees the URL.
func TestPingOutcomes(t *testing.T) {
	url := "redis://" + redistest.Addr(t) + "/0"
	for _, backend := range []string{"local", "redis"} {
		t.Run(backend, func(t *testing.T) {
			c := newCLI(t, url)
			hc := newHC(t)
			c.env = append(c.env, "CRONLOCK_BACKEND="+backend)
			code, out, errs := c.run("run", "-k", "pingok", "--ping", hc.url(), "--", "sh", "-c", "env; echo done")
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errs)
			}
			if strings.Contains(out, "CRONLOCK_PING_URL") || !strings.Contains(out, "CRONLOCK_RUN_ID=") {
				t.Errorf("the job's environment:\n%s\nwant CRONLOCK_RUN_ID and no CRONLOCK_PING_URL", out)
			}
			rows := c.history("pingok")
			wantPings(t, hc.got(), rows[0].ID, "/start", "")

			hc2 := newHC(t)
			c.env = append(c.env, "CRONLOCK_PING_URL="+hc2.url()+"/{key}")
			code, _, _ = c.run("run", "-k", "pingfail", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; env | grep -c CRONLOCK_PING_URL= ; exit 3")
			if code != 3 {
				t.Fatalf("failing job: exit %d; want its own 3", code)
			}
			rows = c.history("pingfail")
			got := hc2.got()
			wantPings(t, got, rows[0].ID, "/pingfail/start", "/pingfail/3")
			// Two pipes here (not one file, as under cron): the streams' order is not kept.
			if b := got[1].Body; got[1].Method != "POST" || !strings.Contains(b, "to-stdout\n") || !strings.Contains(b, "to-stderr\n") || !strings.Contains(b, "\n0\n") {
				t.Errorf("failure ping %s with body %q; want a POST with the output's tail, and 0 from grep -c (the job must not see CRONLOCK_PING_URL)", got[1].Method, b)
			}
		})
	}
}

// TestPingWithoutJob: runs whose job never starts. Redis unreachable pings /125 with
// cronlock's line; a missed tick pings /fail (not its --conflict-exit-code); a stop
// during --jitter pings /143; a skipped run pings nothing; none sends a start.
func TestPingWithoutJob(t *testing.T) {
	c := newCLI(t, "")
	hc := newHC(t)
	code, _, errs := c.run("run", "-k", "unreach", "--redis", "redis://127.0.0.1:1/0", "--ping", hc.url(), "--", "true")
	if code != 125 {
		t.Fatalf("Redis unreachable: exit %d (%s)", code, errs)
	}
	got := hc.got()
	wantPings(t, got, c.history("unreach")[0].ID, "/125")
	if !strings.Contains(got[0].Body, "cronlock: ") || !strings.Contains(got[0].Body, "127.0.0.1:1") {
		t.Errorf("/125 body %q; want cronlock's line about Redis", got[0].Body)
	}

	hc = newHC(t)
	code, _, errs = c.run("run", "-k", "late", "--schedule", "0 0 1 1 *", "--tz", "UTC", "--start-deadline", "1m",
		"--conflict-exit-code", "3", "--ping", hc.url(), "--", "true")
	if code != 3 || !strings.Contains(errs, "missed") {
		t.Fatalf("missed: exit %d, stderr %q", code, errs)
	}
	got = hc.got()
	wantPings(t, got, c.history("late")[0].ID, "/fail")
	if !strings.Contains(got[0].Body, "missed the") {
		t.Errorf("/fail body %q; want the missed line", got[0].Body)
	}

	hc = newHC(t)
	cmd, sc := c.startUntil(sleptRe.MatchString, "run", "-v", "-k", "jitping", "--jitter", "1h", "--ping", hc.url(), "--", "true")
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	if code := c.exitCode(cmd.Wait()); code != 143 {
		t.Fatalf("stopped during --jitter: exit %d", code)
	}
	wantPings(t, hc.got(), c.history("jitping")[0].ID, "/143")

	// A holder of the lock, itself pinging, shown by status while it runs.
	hc = newHC(t)
	held := filepath.Join(c.dir, "held")
	holder := c.command("run", "-k", "busy", "--ping", hc.url(), "--", "sh", "-c", "touch "+held+"; sleep 30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(held); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder's job did not start")
		}
	}
	hcSkip := newHC(t)
	code, _, errs = c.run("run", "-v", "-k", "busy", "--ping", hcSkip.url(), "--", "true")
	if code != 0 || !strings.Contains(errs, "skipped") {
		t.Fatalf("skip: exit %d, stderr %q", code, errs)
	}
	if got := hcSkip.got(); len(got) != 0 {
		t.Errorf("a skipped run pinged %+v; want nothing", got)
	}
	_, st, sterr := c.run("status")
	_, stj, _ := c.run("status", "--json")
	noSecret(t, "status", st, sterr, stj)
	holder.Process.Signal(syscall.SIGTERM)
	if code := c.exitCode(holder.Wait()); code != 143 {
		t.Fatalf("holder stopped: exit %d", code)
	}
	wantPings(t, hc.got(), c.history("busy")[1].ID, "/start", "/143")
}

// TestPingServerTrouble: a ping endpoint that refuses, answers 500 or never answers changes
// neither the outcome nor the exit code, and holds the run up by at most the ping
// deadline (shortened by the test build's knob); one warning says so without the URL.
func TestPingServerTrouble(t *testing.T) {
	c := newCLI(t, "")
	// Long enough for the start ping's four tries (about 1.75 s against a 500 or a
	// refusal) and then the finish's own: at 1 s the finish, waiting out the start,
	// sometimes had no time left and said "no answer", a new cause that warned again.
	c.env = append(c.env, "CRONLOCK_TEST_PING_DEADLINE=3s")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/" + pingSecret
	ln.Close()
	failing := newHC(t)
	failing.answer(500, 0)
	slow := newHC(t)
	slow.answer(200, 30*time.Second)
	for _, tc := range []struct{ name, url, cause string }{
		{"down", down, "connection refused"},
		{"500", failing.url(), "the server answered HTTP 500"},
		{"slow", slow.url(), "no answer within 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, job := range []struct {
				exit   int
				status string
			}{{0, runstatus.Succeeded}, {3, runstatus.Failed}} {
				key := "trouble-" + tc.name + "-" + string(rune('0'+job.exit))
				for _, format := range []string{"text", "json"} {
					start := time.Now()
					code, _, errs := c.runWithin(25*time.Second, "run", "-k", key, "--log-format", format, "--ping", tc.url,
						"--", "sh", "-c", "echo out; exit "+string(rune('0'+job.exit)))
					if code != job.exit {
						t.Fatalf("exit %d; want the job's %d", code, job.exit)
					}
					if took := time.Since(start); took > 25*time.Second {
						t.Fatalf("the run took %v: it waited for the server", took)
					}
					if rows := c.history(key); rows[0].Status != job.status {
						t.Fatalf("status %s; want %s", rows[0].Status, job.status)
					}
					// Not a terminal: the warning is said once an hour per key and cause.
					if format == "text" && (strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "ping to the --ping URL failed: "+tc.cause)) {
						t.Errorf("stderr %q; want one line saying the ping failed (%s)", errs, tc.cause)
					}
					if format == "json" && errs != "" {
						t.Errorf("stderr of the second run within the hour %q; want nothing", errs)
					}
					noSecret(t, "stderr", errs)
					noSecret(t, "the ping's host", strings.ReplaceAll(errs, strings.TrimPrefix(tc.url, "http://"), pingSecret))
				}
				_, hist, _ := c.run("history", "--json", "-k", key)
				_, show, _ := c.run("history", "show", c.history(key)[0].ID)
				noSecret(t, "history", hist, show)
			}
		})
	}
}

// TestPingJSONAndVerbose: with -v and --log-format json every line cronlock says, and
// the history, leave the URL out.
func TestPingJSONAndVerbose(t *testing.T) {
	c := newCLI(t, "")
	hc := newHC(t)
	hc.answer(404, 0)
	code, _, errs := c.run("run", "-v", "--log-format", "json", "-k", "jsonping", "--ping", hc.url(), "--", "sh", "-c", "exit 4")
	if code != 4 || !strings.Contains(errs, `ping to the --ping URL failed: the server answered HTTP 404`) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	_, hist, _ := c.run("history", "--json")
	_, show, _ := c.run("history", "show", c.history("jsonping")[0].ID)
	noSecret(t, "-v --log-format json", errs, hist, show)
}

// TestPingKeyRule: set for a machine (environment, config file) the URL must hold {key};
// on the command line it need not. {key} is the key as a slug, and a URL that is not
// http(s) is refused with a line that does not quote it.
func TestPingKeyRule(t *testing.T) {
	c := newCLI(t, "")
	hc := newHC(t)
	base := c.env
	c.env = append(base, "CRONLOCK_PING_URL="+hc.url())
	code, _, errs := c.run("run", "-k", "k1", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "CRONLOCK_PING_URL has no {key}") {
		t.Fatalf("env without {key}: exit %d, stderr %q", code, errs)
	}
	noSecret(t, "stderr", errs)

	conf := filepath.Join(c.dir, "cronlock.conf")
	os.WriteFile(conf, []byte("# pings\nCRONLOCK_PING_URL="+hc.url()+"\n"), 0o600)
	c.env = append(base, "CRONLOCK_CONFIG="+conf)
	code, _, errs = c.run("run", "-k", "k1", "--", "true")
	if code != 125 || !strings.Contains(errs, "CRONLOCK_PING_URL in "+conf+" line 2 has no {key}") {
		t.Fatalf("config without {key}: exit %d, stderr %q", code, errs)
	}
	noSecret(t, "stderr", errs)
	// The flag wins over the file, and needs no {key}; '' turns the setting off.
	if code, _, errs = c.run("run", "-k", "k1", "--ping", hc.url(), "--", "true"); code != 0 {
		t.Fatalf("--ping without {key}: exit %d, %s", code, errs)
	}
	if code, _, errs = c.run("run", "-k", "k1", "--ping", "", "--", "true"); code != 0 {
		t.Fatalf("--ping '': exit %d, %s", code, errs)
	}
	if n := len(hc.got()); n != 2 {
		t.Fatalf("%d pings; want the start and end of the one run with --ping", n)
	}

	os.WriteFile(conf, []byte("CRONLOCK_PING_URL="+hc.url()+"/{key}?create=1\n"), 0o600)
	hc.mu.Lock()
	hc.pings = nil
	hc.mu.Unlock()
	if code, _, errs = c.run("run", "-k", "team/db@night", "--", "true"); code != 0 {
		t.Fatalf("{key} from the config file: exit %d, %s", code, errs)
	}
	hc.mu.Lock()
	if len(hc.pings) != 2 || hc.pings[1].Path != "/"+pingSecret+"/team-db-night" {
		t.Errorf("pings %+v; want the key as a slug in the path", hc.pings)
	}
	hc.mu.Unlock()

	c.env = base
	for _, bad := range []string{"ftp://h/" + pingSecret, "hc-ping.com/" + pingSecret, "https://u:" + pingSecret + "@h/x", "http://[" + pingSecret} {
		code, _, errs := c.run("run", "-k", "k1", "--ping", bad, "--", "true")
		if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--ping: ") {
			t.Errorf("--ping %q: exit %d, stderr %q; want 125 and one line", bad, code, errs)
		}
		noSecret(t, "stderr", errs)
	}
}
