package cmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// Helpers that more than one test file of this package uses.

// lastRun reads the newest row of the case's history file directly, output included.
func lastRun(t *testing.T, c *cli) history.Run {
	t.Helper()
	st, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.List(history.Filter{Limit: 1})
	if err != nil || len(rows) == 0 {
		t.Fatalf("no history row (%v)", err)
	}
	r, err := st.Get(rows[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *fleetHost) check(off time.Duration, args ...string) (int, string) {
	h.t.Helper()
	code, out, errs := h.at(off, append([]string{"check"}, args...)...)
	if !checkLine.MatchString(out) && !strings.HasPrefix(out, "{") {
		h.t.Fatalf("check %v printed %q (stderr %q): want one plugin status line", args, out, errs)
	}
	return code, out
}

// cli runs the built binary with a private history, lock folder and Redis prefix.
type cli struct {
	t   *testing.T
	dir string
	env []string
}

func newCLI(t *testing.T, redisURL string) *cli {
	dir := t.TempDir()
	c := &cli{t: t, dir: dir}
	c.env = append(inheritedEnv(),
		"CRONLOCK_HISTORY="+filepath.Join(dir, "history.db"),
		"CRONLOCK_LOCK_DIR="+filepath.Join(dir, "locks"),
		"CRONLOCK_CONFIG="+os.DevNull, // empty: the machine's own is not read
		"CRONLOCK_PREFIX="+strings.ReplaceAll(t.Name(), "/", "-")+strconv.Itoa(os.Getpid())+":",
		"CRONLOCK_NODE=clinode",
		"CRONLOCK_REDIS_URL="+redisURL,
	)
	return c
}

// inheritedEnv is the test's environment for cronlock: without the CRONLOCK_ variables
// that are the go test run's own knobs (CRONLOCK_TORTURE, CRONLOCK_BENCH_HA…), which
// cronlock refuses as unknown, and without a developer's own settings; the test hooks'
// CRONLOCK_TEST_ variables stay. COLUMNS goes too: a terminal's width would cut the
// tables that tests read.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "COLUMNS=") {
			continue
		}
		if !strings.HasPrefix(kv, "CRONLOCK_") || strings.HasPrefix(kv, "CRONLOCK_TEST_") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *cli) command(args ...string) *exec.Cmd {
	cmd := exec.Command(cronlockBin, args...)
	cmd.Env = c.env
	cmd.Dir = c.dir
	return cmd
}

// run runs cronlock to the end and returns its exit code, stdout and stderr.
func (c *cli) run(args ...string) (int, string, string) {
	c.t.Helper()
	cmd := c.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return c.exitCode(cmd.Run()), out.String(), errb.String()
}

// startHolding starts `cronlock ARGS -- [WRAP...] sh -c JOB`, whose job marks that it
// runs and then waits to be let go, and returns once the job runs: the run, cronlock's
// stderr, and the function that lets the job end.
func (c *cli) startHolding(args []string, wrap ...string) (*exec.Cmd, *strings.Builder, func()) {
	c.t.Helper()
	started, stop := filepath.Join(c.dir, "holding-started"), filepath.Join(c.dir, "holding-stop")
	os.Remove(started)
	os.Remove(stop)
	argv := append(append(append(append([]string{}, args...), "--"), wrap...),
		"sh", "-c", "touch "+started+"; while [ ! -e "+stop+" ]; do sleep 0.05; done")
	run := c.command(argv...)
	var errb strings.Builder
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		c.t.Fatal(err)
	}
	proctest.WaitFile(c.t, started)
	return run, &errb, func() { os.WriteFile(stop, nil, 0o600) }
}

// startUntil starts cronlock and reads its stderr until a line that until matches. The
// returned scanner holds the rest: read it to the end before Wait.
func (c *cli) startUntil(until func(line string) bool, args ...string) (*exec.Cmd, *bufio.Scanner) {
	c.t.Helper()
	cmd := c.command(args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !until(sc.Text()) {
	}
	return cmd, sc
}

// lineHas matches a line that holds s.
func lineHas(s string) func(string) bool {
	return func(line string) bool { return strings.Contains(line, s) }
}

// exitCode is cronlock's exit code from the error of its Wait; a failure to run it at all
// fails the test.
func (c *cli) exitCode(err error) int {
	c.t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		c.t.Fatalf("run cronlock: %v", err)
	}
	return 0
}

// historyRow is the part of `history --json` these tests read.
type historyRow struct {
	ID           string   `json:"id"`
	Key          string   `json:"key"`
	Node         string   `json:"node"`
	PID          int      `json:"pid"`
	Status       string   `json:"status"`
	ExitCode     *int     `json:"exit_code"`
	Signal       *string  `json:"signal"`
	Error        string   `json:"error"`
	Holder       string   `json:"holder"`
	FencingToken uint64   `json:"fencing_token"`
	Command      []string `json:"command"`
	Attempt      int      `json:"attempt"`
}

func (c *cli) history(key string) []historyRow {
	c.t.Helper()
	code, out, errs := c.run("history", "--json", "--limit", "1000", "--key", key)
	if code != 0 {
		c.t.Fatalf("history exited %d: %s", code, errs)
	}
	var rows []historyRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r historyRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			c.t.Fatalf("history line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// concurrentRunsOneKey starts 12 cronlocks of c (with args) on one key at once, with a
// job three times longer than the TTL, and checks that exactly one ran, renewed to its
// end, that the others were skipped, and that all exited 0.
func concurrentRunsOneKey(t *testing.T, c *cli, args ...string) {
	t.Helper()
	marks := filepath.Join(c.dir, "marks")
	const n = 12
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = c.run(append(append([]string{"run"}, args...), "-k", "busy", "--ttl", "1s", "--",
				"sh", "-c", "echo start >> "+marks+"; sleep 3; echo end >> "+marks)...)
		}()
	}
	wg.Wait()
	for i, code := range codes {
		if code != 0 {
			t.Errorf("run %d exited %d, want 0", i, code)
		}
	}
	if b, _ := os.ReadFile(marks); string(b) != "start\nend\n" {
		t.Fatalf("job marks %q: want exactly one run, start then end", b)
	}
	var ran, skipped int
	for _, r := range c.history("busy") {
		switch r.Status {
		case runstatus.Succeeded:
			ran++
		case runstatus.Skipped:
			skipped++
		}
	}
	if ran != 1 || skipped != n-1 {
		t.Fatalf("history: %d succeeded, %d skipped; want 1 and %d", ran, skipped, n-1)
	}
}

// failsClosed runs a job under a 2s lease on c's backend, brings the fault about once the
// job runs, and checks that cronlock stopped the job before its lease could have ended
// (the lease counts from before the last renewal was sent, which came before the fault,
// so within 2s of the fault whatever --grace says): exit 125, one lock_lost row, and a
// line that says the lock was lost.
func failsClosed(t *testing.T, c *cli, fault func()) {
	t.Helper()
	pidf := filepath.Join(c.dir, "job.pid")
	cmd := c.command("run", "-k", "gone", "--ttl", "2s", "--grace", "5s", "--redis-timeout", "300ms",
		"--", "sh", "-c", "echo $$ > "+pidf+"; exec sleep 30")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, pidf)
	faultAt := time.Now()
	died := make(chan time.Duration, 1)
	go func() {
		for !proctest.Dead(pid) {
			time.Sleep(2 * time.Millisecond)
		}
		died <- time.Since(faultAt)
	}()
	fault()
	err := cmd.Wait()
	took := <-died
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("cronlock ended with %v (stderr %q), want exit 125", err, errb.String())
	}
	if took > 2*time.Second {
		t.Fatalf("the job died %v after the fault, after its 2s lease could have ended", took)
	}
	if !strings.Contains(errb.String(), "lock was lost") {
		t.Fatalf("stderr %q does not say the lock was lost", errb.String())
	}
	if rows := c.history("gone"); len(rows) != 1 || rows[0].Status != runstatus.LockLost {
		t.Fatalf("history %+v, want one lock_lost run", rows)
	}
}

// durabAsNobody prepares c for a cronlock run as uid 65534: a folder of its own (c.dir moves
// there) and a copy of the binary it can execute, since the test's temporary folders are
// private to root.
func durabAsNobody(t *testing.T, c *cli) (*syscall.Credential, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cronlock-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "cronlock")
	b, err := os.ReadFile(cronlockBin)
	if err != nil {
		t.Fatal(err)
	}
	durabWrite(t, bin, b, 0o755)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Skipf("cannot chown to nobody: %v", err)
	}
	// Every path of the environment (lock folder, config file) moves along.
	for i, e := range c.env {
		if name, v, ok := strings.Cut(e, "="); ok && strings.HasPrefix(name, "CRONLOCK_") && strings.HasPrefix(v, c.dir+"/") {
			c.env[i] = name + "=" + work + strings.TrimPrefix(v, c.dir)
		}
	}
	c.dir = work
	return &syscall.Credential{Uid: 65534, Gid: 65534}, bin
}

// fleetRow is the part of `history --fleet --json` these tests read.
type fleetRow struct {
	ID           string  `json:"id"`
	Key          string  `json:"key"`
	Node         string  `json:"node"`
	Status       string  `json:"status"`
	Exit         *int    `json:"exit"`
	ScheduledFor *string `json:"scheduled_for"`
	StartedAt    string  `json:"started_at"`
	FinishedAt   *string `json:"finished_at"`
	Tries        int     `json:"tries"`
	FencingToken uint64  `json:"fencing_token"`
	Error        string  `json:"error"`
	Skips        int     `json:"skips"`
	Duplicate    bool    `json:"duplicate"`
	Version      string  `json:"version"`
}

// monitor is a "monitoring box": only the Redis URL and the prefix of the fleet, no
// history file of its own (history off), another node name.
func monitor(t *testing.T, h *fleetHost) *cli {
	m := newCLI(t, "redis://"+redistest.Addr(t)+"/0")
	m.env = append(m.env, "CRONLOCK_HISTORY=off", "CRONLOCK_NODE=monitor", prefixOf(h.cli))
	return m
}

func fleetRows(t *testing.T, c *cli, args ...string) []fleetRow {
	t.Helper()
	code, out, errs := c.run(append([]string{"history", "--fleet", "--json", "--limit", "0"}, args...)...)
	if code != 0 {
		t.Fatalf("history --fleet exited %d: %s", code, errs)
	}
	var rows []fleetRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r fleetRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("history --fleet line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// exerciseCLI runs the lock paths of the binary on c's Redis URL: exclusion among
// concurrent runs, a --wait hand-off, status, unlock, a --schedule tick claimed once,
// and the fleet's record.
func exerciseCLI(t *testing.T, c *cli) {
	concurrentRunsOneKey(t, c)
	marks := filepath.Join(c.dir, "marks")

	// A waiter takes over when the holder ends.
	holder := c.command("run", "-k", "handoff", "--ttl", "2s", "--", "sh", "-c", "echo a >> "+marks+"; sleep 1; echo b >> "+marks)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the holder's job to start", func() bool {
		b, _ := os.ReadFile(marks)
		return strings.Contains(string(b), "a\n")
	})
	code, _, errs := c.run("run", "-k", "handoff", "--wait", "20s", "--", "sh", "-c", "echo c >> "+marks)
	if err := holder.Wait(); err != nil || code != 0 {
		t.Fatalf("hand-off: holder %v, waiter exit %d: %s", err, code, errs)
	}
	if b, _ := os.ReadFile(marks); !strings.HasSuffix(string(b), "a\nb\nc\n") {
		t.Fatalf("job marks %q: the waiter did not run after the holder", b)
	}

	// status sees a held lock; unlock --force removes it.
	holder = c.command("run", "-k", "held", "--ttl", "5s", "--", "sleep", "30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	waitUntil(t, 10*time.Second, "the lock to show in status", func() bool {
		_, out, _ := c.run("status", "--json")
		return strings.Contains(out, `"key":"held"`)
	})
	if code, out, errs := c.run("unlock", "-k", "held", "--force"); code != 0 || !strings.Contains(out+errs, "clinode") {
		t.Fatalf("unlock --force: exit %d: %s%s", code, out, errs)
	}
	holder.Wait() // the holder's next renewal finds the lock gone
	if rows := c.history("held"); len(rows) != 1 || rows[0].Status != runstatus.LockLost {
		t.Fatalf("the unlocked run's rows: %+v, want one lock_lost", rows)
	}

	// A tick runs once; the fleet's record has it.
	for i, want := range []int{0, 99} {
		if code, _, errs := c.run("run", "-k", "ticked", "--schedule", "@hourly", "--conflict-exit-code", "99", "--", "true"); code != want {
			t.Fatalf("tick run %d: exit %d, want %d: %s", i+1, code, want, errs)
		}
	}
	code, out, errs := c.run("history", "--fleet", "--json")
	if code != 0 || strings.Count(out, `"key":"ticked"`) != 1 || strings.Count(out, `"key":"handoff"`) != 2 {
		t.Fatalf("history --fleet: exit %d: %s%s", code, out, errs)
	}
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keptOrStopped checks that a run under a failover either kept its lock (0, succeeded) or
// was stopped fail-closed (125, lock_lost), its exit code and row agreeing.
func keptOrStopped(t *testing.T, code int, status, errs string) {
	t.Helper()
	switch {
	case code == 0 && status == runstatus.Succeeded:
		t.Logf("the lock survived the failover")
	case code == 125 && status == runstatus.LockLost:
		t.Logf("the run was stopped fail-closed: %s", errs)
	default:
		t.Fatalf("exit %d, status %s, stderr %q: want 0/succeeded or 125/lock_lost", code, status, errs)
	}
}

// clusterBehindProxies puts a faultproxy in front of every node of cl, and has each node
// announce its proxy's port, so that CLUSTER SLOTS sends cronlock through the proxies.
// It returns the proxies and their addresses, in the order of cl.Nodes.
func clusterBehindProxies(t *testing.T, cl *redistest.Cluster) ([]*faultproxy.Proxy, []string) {
	t.Helper()
	var proxies []*faultproxy.Proxy
	var seeds []string
	for _, s := range cl.Nodes {
		p, err := faultproxy.Start(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		seeds = append(seeds, p.Addr)
		if _, err := s.Do("CONFIG", "SET", "cluster-announce-port", proxyPort(t, p)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 10*time.Second, "every node to know the others by their proxies", func() bool {
		for _, s := range cl.Nodes {
			nodes, err := s.Do("CLUSTER", "NODES")
			if err != nil {
				return false
			}
			for _, p := range proxies {
				if !strings.Contains(nodes, p.Addr+"@") {
					return false
				}
			}
		}
		return true
	})
	return proxies, seeds
}

// historyFixture writes a history with a few telling rows and returns its path.
func historyFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2025, 6, 1, 7, 0, 0, 0, time.UTC)
	zero, three := 0, 3
	for _, r := range []history.Run{
		{ID: "01970000-0000-7000-8000-000000000001", Key: "billing", Node: "web-1", PID: 10,
			Command: []string{"/opt/jobs/billing.sh", "--all"}, Status: runstatus.Succeeded,
			ExitCode: &zero, StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond),
			FencingToken: 17, Backend: "local /run/cronlock"},
		{ID: "01970000-0000-7000-8000-000000000002", Key: "billing", Node: "evil\x1b[31m\x07",
			PID: 11, Command: []string{"sh", "-c", "printf '\x1b]0;pwned\x07'"}, Status: runstatus.Failed,
			ExitCode: &three, StartedAt: start.Add(time.Minute), FinishedAt: start.Add(time.Minute + 42*time.Millisecond),
			Error: "exit status 3\x1b[2J"},
		{ID: "01970000-0000-7000-8000-000000000003", Key: "report", Node: "web-2", PID: 12,
			Command: []string{"true"}, Status: runstatus.Skipped, StartedAt: start.Add(2 * time.Minute),
			FinishedAt: start.Add(2 * time.Minute), Holder: "web-1 (pid 10, run x)"},
		{ID: "01970000-0000-7000-8000-000000000004", Key: "report", Node: "web-2", PID: 13,
			Command: []string{"sleep", "9"}, Status: runstatus.Interrupted, Signal: "SIGTERM",
			StartedAt: start.Add(3 * time.Minute), FinishedAt: start.Add(3*time.Minute + 2*time.Second)},
	} {
		if err := s.Insert(&r); err != nil {
			t.Fatal(err)
		}
	}
	// A live run of this process: running, no end.
	live := &history.Run{ID: "01970000-0000-7000-8000-000000000005", Key: "live", Node: "web-1",
		PID: 14, Command: []string{"sleep", "100"}, StartedAt: start.Add(4 * time.Minute)}
	if err := s.Start(live); err != nil {
		t.Fatal(err)
	}
	return path
}

// sleptRe finds the jitter run -v reports.
var sleptRe = regexp.MustCompile(`sleeping (\S+) before asking for \S+ \(--jitter (\S+)\)`)

// hcServer is a fake Healthchecks on loopback that records the pings it gets.
type hcServer struct {
	*httptest.Server
	mu    sync.Mutex
	pings []hcPing
	code  int           // the answer's status
	delay time.Duration // how long it takes to answer
}

type hcPing struct{ Method, Path, RID, Body string }

func newHC(t *testing.T) *hcServer {
	h := &hcServer{code: 200}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.pings = append(h.pings, hcPing{r.Method, r.URL.Path, r.URL.Query().Get("rid"), string(b)})
		code, delay := h.code, h.delay
		h.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		w.WriteHeader(code)
		io.WriteString(w, "OK")
	}))
	t.Cleanup(h.Server.Close)
	return h
}

// answer sets the status and delay of the server's answers. Under the lock: the pings
// come from cronlock processes, and the race detector sees no order between this write
// and the handler's read through the network.
func (h *hcServer) answer(code int, delay time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.code, h.delay = code, delay
}

func (h *hcServer) url() string { return h.URL + "/" + pingSecret }

func (h *hcServer) got() []hcPing {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hcPing(nil), h.pings...)
}

// wantPings checks the paths of the pings (after the secret) and that each carries rid.
func wantPings(t *testing.T, got []hcPing, rid string, paths ...string) {
	t.Helper()
	ok := len(got) == len(paths)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Path == "/"+pingSecret+paths[i] && got[i].RID == rid
	}
	if !ok {
		t.Fatalf("pings %+v; want %q, each with rid=%s", got, paths, rid)
	}
}

// readmeACL is the docs' ACL SETUSER line for cronlock (docs/backends-redis.md, what the
// Redis server needs), as words, with password.
func readmeACL(t *testing.T, password string) []string {
	t.Helper()
	readme, err := os.ReadFile("../docs/backends-redis.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "ACL" && f[1] == "SETUSER" && f[2] == "cronlock" {
			for i, r := range f {
				if r == ">PASSWORD" {
					f[i] = ">" + password
				}
			}
			return f
		}
	}
	t.Fatal("docs/backends-redis.md has no line ACL SETUSER cronlock …")
	return nil
}

// prefix is the Redis key prefix newCLI gave c.
func (c *cli) prefix() string {
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "CRONLOCK_PREFIX="); ok {
			return v
		}
	}
	c.t.Fatal("no CRONLOCK_PREFIX in the test environment")
	return ""
}

// mustDo sends one command to addr and fails the test on an error.
func mustDo(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r, err := redistest.Do(addr, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

// shortRestart kills srv with SIGKILL, waits down, and starts it again on the same port
// with the same data folder (its AOF).
func shortRestart(srv *redistest.Server, down time.Duration) {
	srv.Kill()
	time.Sleep(down)
	srv.Restart()
}

// tries returns key's rows oldest first.
func (c *cli) tries(key string) []tryRow {
	c.t.Helper()
	code, out, errs := c.run("history", "--json", "--key", key)
	if code != 0 {
		c.t.Fatalf("history exited %d: %s", code, errs)
	}
	var rows []tryRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r tryRow
		if line != "" && json.Unmarshal([]byte(line), &r) == nil {
			rows = append([]tryRow{r}, rows...)
		}
	}
	return rows
}

// statuses lists the rows' statuses in order.
func statuses(rows []tryRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Status)
	}
	return strings.Join(s, ",")
}

// turnCommands names the commands of each turn (upper case, space-separated).
func turnCommands(t *testing.T, turns []faultproxy.Turn) []string {
	t.Helper()
	var out []string
	for _, tu := range turns {
		var names []string
		r := bufio.NewReader(bytes.NewReader(tu.Data))
		for {
			args, err := readRESPCommand(r)
			if err != nil {
				break
			}
			names = append(names, strings.ToUpper(args[0]))
		}
		if len(names) == 0 {
			t.Fatalf("turn %q is not RESP", tu.Data)
		}
		out = append(out, strings.Join(names, " "))
	}
	return out
}

// runWithin runs cronlock like cli.run, but fails the test when it has not ended after
// limit: the tests below are about runs that must not hang.
func (c *cli) runWithin(limit time.Duration, args ...string) (int, string, string) {
	c.t.Helper()
	cmd := c.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		c.t.Fatalf("cronlock %s had not ended after %v (stderr %q)", strings.Join(args, " "), limit, errb.String())
	}
	return c.exitCode(err), out.String(), errb.String()
}

func envOf(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// tickRow is the part of `history --json` the tick tests read.
type tickRow struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	Holder       string  `json:"holder"`
	Error        string  `json:"error"`
	Exit         *int    `json:"exit"`
	ScheduledFor *string `json:"scheduled_for"`
}

// fleetHost is one machine of a simulated fleet: its own node name and history; on the
// local backend the lock folder is shared (one machine's runs, several cron lines).
type fleetHost struct {
	*cli
	node string
}

func newFleet(t *testing.T, backend string, nodes ...string) []*fleetHost {
	t.Helper()
	url := ""
	if backend == "redis" {
		url = "redis://" + redistest.Addr(t) + "/0"
	}
	locks := filepath.Join(t.TempDir(), "locks")
	var hosts []*fleetHost
	for _, n := range nodes {
		c := newCLI(t, url)
		c.env = append(c.env, "CRONLOCK_NODE="+n, "CRONLOCK_LOCK_DIR="+locks, "CRONLOCK_BACKEND="+backend)
		hosts = append(hosts, &fleetHost{cli: c, node: n})
	}
	if backend == "redis" {
		prefix := strings.ReplaceAll(t.Name(), "/", "-") + strconv.Itoa(os.Getpid()) + ":"
		t.Cleanup(func() {
			// The tick record lives 400 days: leave none on the shared server.
			for _, k := range []string{"tick", "fence", "runs", "ledger", "order", "days"} {
				redistest.Do(redistest.Addr(t), "DEL", prefix+"{billing}:"+k)
			}
		})
	}
	return hosts
}

// at runs cronlock on h with its clock moved by off.
func (h *fleetHost) at(off time.Duration, args ...string) (int, string, string) {
	h.t.Helper()
	saved := h.env
	h.env = append(append([]string(nil), h.env...), "CRONLOCK_TEST_CLOCK_OFFSET="+off.String())
	defer func() { h.env = saved }()
	return h.run(args...)
}

func (h *fleetHost) rows(key string) []tickRow {
	h.t.Helper()
	code, out, errs := h.run("history", "--json", "--limit", "0", "--key", key)
	if code != 0 {
		h.t.Fatalf("%s: history exited %d: %s", h.node, code, errs)
	}
	var rows []tickRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r tickRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			h.t.Fatalf("history line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// inMinute is a clock offset, under 15 s either way, that puts the clock between 2 s and
// 48 s into a minute: a few seconds of runs then stay inside that minute, and the offset
// passes the skew check of an every-minute schedule (a quarter of a minute). tick is
// that minute.
func inMinute() (off time.Duration, tick time.Time) {
	now := time.Now()
	s := now.Sub(now.Truncate(time.Minute))
	switch {
	case s < 2*time.Second:
		off = 2*time.Second - s
	case s > 48*time.Second:
		off = 48*time.Second - s
	}
	return off, now.Add(off).Truncate(time.Minute).UTC()
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ledgerExpect is what a nemesis test allows the fleet's record after its runs
// (settleLedger). The zero value allows nothing: every run that claimed is completed
// with its local status, and no entry is DUPLICATE.
type ledgerExpect struct {
	// settle is extra arguments of the settling runs (a --redis-timeout, say).
	settle []string
	// excuse says why run r (a row of a host's history) may lack its completed entry:
	// its completion was written before the server lost its data, say; "" = it may not.
	excuse func(r historyRow) string
	// dupOK reports whether the run of id may be DUPLICATE: the test expects a
	// fail-closed overlap there. A DUPLICATE entry passes when it or an entry whose
	// interval overlaps its own (or that has its tick) is allowed. nil: runs that ended
	// lock_lost are (stopped fail-closed, their hold ends at their release).
	dupOK func(id string) bool
	// describe, when set, adds what the test knows of run r to a failure (its faults).
	describe func(r historyRow) string
}

// settleLedger checks that a nemesis lost no run from the fleet's record. After the test's
// runs, each host runs each key once more (a "settling" run, with --wait so that it takes
// the lock and its release carries the completions the host kept: jobrun's pending.go;
// again while the host's history still keeps some), and then every run of the hosts'
// histories that claimed the lock (a fencing token, not skipped) must have an entry in
// `history --fleet --json` read through monitor, completed with the same status; a run
// its host saw abandoned (its cronlock was killed) may be missing or abandoned. No entry
// may be DUPLICATE unless ex says so. Only reads and a few short runs: it adds seconds,
// not the nemesis's length.
func settleLedger(t *testing.T, hosts []*cli, monitor *cli, keys []string, ex ledgerExpect) {
	t.Helper()
	for _, h := range hosts {
		for _, key := range keys {
			for i := 0; ; i++ {
				args := append(append([]string{"run", "-k", key, "--wait", "30s", "--ttl", "5s"}, ex.settle...), "--", "true")
				if code, _, errs := h.run(args...); code != 0 {
					t.Fatalf("a settling run of %s: exit %d (%s)", key, code, errs)
				}
				n := keptCompletions(t, h, key)
				if n == 0 {
					break
				}
				if i == 4 {
					t.Fatalf("%d completions of %s still kept by the host after %d settling runs", n, key, i+1)
				}
			}
		}
	}
	byID := map[string]fleetRow{}
	var entries []fleetRow
	for _, key := range keys {
		for _, e := range fleetRows(t, monitor, "--key", key) {
			byID[e.ID] = e
			entries = append(entries, e)
		}
	}
	claimed, missing, excused, killed := 0, 0, 0, 0
	var reasons []string
	for _, h := range hosts {
		for _, key := range keys {
			for _, r := range h.history(key) {
				if r.FencingToken == 0 || r.Status == runstatus.Skipped {
					continue // it never took the lock
				}
				claimed++
				e, ok := byID[r.ID]
				switch {
				case r.Status == runstatus.Abandoned || r.Status == runstatus.Running:
					// Its cronlock was killed: nobody can complete its entry.
					killed++
					if ok && e.Status != runstatus.Abandoned && e.Status != runstatus.Running {
						t.Errorf("run %s (%s) died on its host, yet its entry says %s: %+v", r.ID, r.Node, e.Status, e)
					}
				case ok && e.Status == r.Status && e.FinishedAt != nil:
				case ex.excuse != nil && ex.excuse(r) != "":
					excused++
					reasons = append(reasons, ex.excuse(r))
				default:
					missing++
					if ex.describe != nil {
						t.Log(ex.describe(r))
					}
					if !ok {
						t.Errorf("run %s of %s (%s, %s, token %d) has no entry in the fleet's record", r.ID, key, r.Node, r.Status, r.FencingToken)
					} else {
						t.Errorf("run %s of %s (%s, %s) is not completed as such in the fleet's record: %+v", r.ID, key, r.Node, r.Status, e)
					}
				}
			}
		}
	}
	dups := 0
	for _, e := range entries {
		if !e.Duplicate {
			continue
		}
		dups++
		if !dupAllowed(e, entries, byID, ex.dupOK) {
			t.Errorf("entry %+v is DUPLICATE, and no fail-closed overlap explains it", e)
		}
	}
	t.Logf("fleet's record: %d runs took the lock, %d not completed, %d excused (%s), %d killed; %d DUPLICATE entries",
		claimed, missing, excused, strings.Join(reasons[:min(len(reasons), 3)], "; "), killed, dups)
}

// dupAllowed reports whether DUPLICATE entry e is explained: it, or a DUPLICATE entry
// of its key whose hold overlaps e's (or that claimed e's tick), is allowed by dupOK.
func dupAllowed(e fleetRow, all []fleetRow, byID map[string]fleetRow, dupOK func(string) bool) bool {
	ok := dupOK
	if ok == nil {
		ok = func(id string) bool { r, found := byID[id]; return found && r.Status == runstatus.LockLost }
	}
	if ok(e.ID) {
		return true
	}
	from, to := holdOf(e)
	for _, p := range all {
		if p.ID == e.ID || p.Key != e.Key || !p.Duplicate || !ok(p.ID) {
			continue
		}
		pf, pt := holdOf(p)
		sameTick := e.ScheduledFor != nil && p.ScheduledFor != nil && *e.ScheduledFor == *p.ScheduledFor
		if sameTick || (pf.Before(to) && from.Before(pt)) {
			return true
		}
	}
	return false
}

// holdOf is when the entry's run held the lock, as MarkDuplicates reads it: a running
// entry until now and beyond, an abandoned one only at its start.
func holdOf(e fleetRow) (time.Time, time.Time) {
	from, _ := time.Parse(time.RFC3339Nano, e.StartedAt)
	switch {
	case e.FinishedAt != nil:
		to, _ := time.Parse(time.RFC3339Nano, *e.FinishedAt)
		return from, to
	case e.Status == runstatus.Running:
		return from, time.Now().Add(time.Hour)
	}
	return from, from
}

// keptCompletions counts the completions h's history keeps for key (jobrun's pending.go).
func keptCompletions(t *testing.T, h *cli, key string) int {
	t.Helper()
	path := ""
	for _, kv := range h.env { // the last one counts, as for exec
		if v, ok := strings.CutPrefix(kv, "CRONLOCK_HISTORY="); ok {
			path = v
		}
	}
	st, err := history.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer st.Close()
	ps, err := st.Pending(key, 1000)
	if err != nil {
		t.Fatalf("read the completions %s keeps: %v", path, err)
	}
	return len(ps)
}

// needRealCron is the path of Debian's cron daemon for a test that runs it: the test
// skips when not root (rootWhy says what needs root) or under -short (shortWhy), and
// fails under CI when cron is missing, since scripts/test.sh installs it.
func needRealCron(t *testing.T, rootWhy, shortWhy string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + rootWhy)
	}
	const cronBin = "/usr/sbin/cron"
	if _, err := os.Stat(cronBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s under CI: scripts/test.sh installs Debian's cron", cronBin)
		}
		t.Skipf("no %s (apt-get install cron)", cronBin)
	}
	if testing.Short() {
		t.Skip("-short: " + shortWhy)
	}
	return cronBin
}
