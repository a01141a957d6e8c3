package cmd

// TestTorture is a fault-injection test with a referee: simulated hosts loop `cronlock
// run` on a few shared keys while a nemesis breaks Redis, the network and the cronlock
// processes themselves, and a referee checks afterwards that no two jobs ran at once on a
// key (except where the README's guarantees say only the fencing token protects), that fencing
// tokens rose, that no job process outlived its cronlock, that every run has a history row
// whose status matches its exit code, and that no cronlock hung.
//
// Default: three sub-tests (Redis with AOF appendfsync always, Redis without persistence,
// a Sentinel deployment) sharing 40 s, part of `go test ./...` (scripts/test.sh); `go test
// -short` skips it. A soak of any length:
//
//	CRONLOCK_TORTURE=30m go test -run TestTorture -timeout 40m ./cmd/
//
// (the duration is split between the sub-tests). It needs redis-server (private servers
// via redistest.Start: they are killed and paused), redis-sentinel (the same binary), sh,
// flock and date.
//
// How the referee sees an overlap: every job takes a non-blocking flock(2) on a file per
// key as its first act and holds it (the descriptor is inherited by its `sleep`) until its
// last process dies, so the kernel itself says whether an earlier job of the key is still
// alive. A job that finds the file locked logs "ovl", then waits for the lock ("ovx"): the
// overlap window is the time between the two. Each event line is one printf to a file opened
// O_APPEND (one write(2), atomic on Linux); the referee rejects any malformed line.
//
// Which overlaps are allowed (README "What is guaranteed"): with a Redis restart without
// persistence the lock is lost under a running job, and the job of the lower fencing token
// may run beside the next holder for at most ttl/3 + g (g = min(--grace, ttl/4)) plus a
// margin for a loaded machine; a cronlock frozen by SIGSTOP for longer than its TTL sees the
// loss only when it wakes, so its job may run until shortly after SIGCONT. Every other overlap
// fails the test: with AOF always, CLIENT PAUSE, a proxy adding latency, black-holing or
// resetting connections, or a holder SIGKILLed, no two jobs may ever overlap.
//
// The sentinel sub-test runs the hosts on redis-sentinel:// (a master and two replicas
// with AOF always, three Sentinels) and adds a partition: the master and one
// host are cut off from the Sentinels, the replicas and the other hosts for a few seconds
// (redistest.SentinelNet: every connection to a server passes through its faultproxy),
// long enough for the Sentinels to promote a replica. An overlap is allowed there only
// when the older job was the cut-off host's and was stopped fail-closed (exit 125) within a
// lease of the partition's start: its renewals on the old master are never confirmed.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// tortureJob is the job every run executes: job.sh SECONDS EXITCODE STUBBORN ESCAPE STATEDIR
// INVID (the id last: the referee finds it there in the history's command). With ESCAPE=1 a TERM-ignoring subshell double-forks, 0.2 s in (often after the
// main child ended and the first sweep ran), a process that leaves the job's group with
// setsid, ignores SIGTERM and holds the key's flock: only a hunt that stops it in time
// keeps the referee from seeing an overlap.
// Event lines: EVENT T1 T2 KEY TOKEN RUNID INVID (times: wall clock in ns).
//
//	acq: the key's flock was free; T1 just before trying, T2 just after taking it
//	ovl: the flock was held by another job (an overlap); T1 before trying, T2 after
//	ovx: the flock came free after an ovl (the older job's processes are all dead)
//	end: the job ends by itself
const tortureJob = `#!/bin/sh
d=$5; inv=$6
[ "$3" = 1 ] && trap '' TERM
now() { date +%s%N; }
ev() { printf '%s %s %s %s %s %s %s\n' "$1" "$2" "$3" "$CRONLOCK_KEY" "$CRONLOCK_FENCING_TOKEN" "$CRONLOCK_RUN_ID" "$inv" >>"$d/referee.log"; }
echo $$ >>"$d/pids/$inv"
exec 9>>"$d/flock.$CRONLOCK_KEY"
t0=$(now)
if flock -n 9; then ev acq "$t0" "$(now)"; else ev ovl "$t0" "$(now)"; flock 9; t=$(now); ev ovx "$t" "$t"; fi
if [ "$4" = 1 ]; then
  (trap '' TERM; (sleep 0.2; setsid sh -c 'trap "" TERM; echo $$ >>"$1"; exec sleep 1000' "$inv" "$d/pids/$inv") &) &
fi
sleep "$1" &
echo $! >>"$d/pids/$inv"
wait $!
t=$(now); ev end "$t" "$t"
exit "$2"
`

// Settings of the torture. Timing bounds are generous (a loaded 2-core machine running
// race-built binaries); the safety checks are exact.
const (
	tortureHosts       = 3
	tortureWorkers     = 2 // concurrent crontab lines per host
	tortureGrace       = 300 * time.Millisecond
	tortureRedisTO     = 400 * time.Millisecond
	tortureConflict    = 99               // --conflict-exit-code: a skip is told from a success
	tortureHungMargin  = 15 * time.Second // added to every run's time bound
	tortureWindowSlack = time.Second      // margin on the allowed overlap windows
	tortureKillWait    = 5 * time.Second  // a SIGKILLed cronlock's job must be dead by then
	tortureSettle      = 15 * time.Second // a Sentinel deployment is whole again by then after a partition
)

type tortureKey struct {
	name string
	ttl  time.Duration
}

var tortureKeys = []tortureKey{{"k0", time.Second}, {"k1", 2 * time.Second}, {"k2", 2 * time.Second}}

// span is a time interval on the wall clock, in ns.
type span struct{ from, to int64 }

// tInv is one `cronlock run` invocation.
type tInv struct {
	id       string
	host     int
	key      tortureKey
	dur      time.Duration
	code     int
	stubborn bool
	escape   bool // the job leaves a setsid process behind (tortureJob's ESCAPE)
	timeout  time.Duration

	pid          int
	proc         *os.Process
	launch, exit int64 // wall ns
	exitCode     int   // -1 when cronlock died of a signal
	stderr       string
	hung         bool

	mu       sync.Mutex
	killed   bool  // SIGKILLed by the nemesis
	killedAt int64 // wall ns
	jobAge   time.Duration
	stops    []span // SIGSTOP … SIGCONT
	stopped  bool
	done     bool
}

func (inv *tInv) stoppedFor() time.Duration {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var d time.Duration
	for _, s := range inv.stops {
		d += time.Duration(s.to - s.from)
	}
	if inv.stopped {
		d += time.Hour // still stopped: never hung
	}
	return d
}

// tFault is one injected fault.
type tFault struct {
	kind   string
	target string // host, invocation or "" for Redis
	span   span
	detail string
	down   time.Duration // how long Redis was down (redis-kill, redis-restart-short)
}

// shortRestart is a Redis restart that keeps the lock: AOF, and back within 300 ms. Under
// it no renewal may fail for good (dial back-off must never eat the lease's margin).
func (f tFault) shortRestart(mode string) bool {
	return mode == "aof" && (f.kind == "redis-restart-short" || f.kind == "redis-kill") && f.down <= 300*time.Millisecond
}

// torture is the shared state of one sub-test.
type torture struct {
	t        *testing.T
	mode     string // aof or nopersist
	dir      string
	job      string
	srv      *redistest.Server
	proxies  []*faultproxy.Proxy
	net      *redistest.SentinelNet  // sentinel mode: the deployment
	cutOff   []func(faultproxy.Mode) // sentinel mode: each host's links to the Sentinels
	hostEnv  [][]string
	start    time.Time
	deadline time.Time

	// overlapIDs are the run ids of the jobs the referee saw overlap (check), each
	// allowed or failed there.
	overlapIDs map[string]bool

	mu      sync.Mutex
	active  map[string]*tInv
	all     []*tInv
	faults  []tFault
	errs    []string
	counter int
}

func (tt *torture) fail(format string, args ...any) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if len(tt.errs) < 200 {
		tt.errs = append(tt.errs, fmt.Sprintf(format, args...))
	}
}

func TestTorture(t *testing.T) {
	skipIfShort(t, "the torture takes 40s of fault injection")
	total := 40 * time.Second
	if v := os.Getenv("CRONLOCK_TORTURE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CRONLOCK_TORTURE=%q: want a duration such as 30m", v)
		}
		total = d
	}
	if _, err := exec.LookPath("flock"); err != nil {
		t.Fatalf("the torture's referee needs flock(1) (util-linux): %v", err)
	}
	modes := []string{"aof", "nopersist", "sentinel"}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { runTorture(t, mode, total/time.Duration(len(modes))) })
	}
}

func runTorture(t *testing.T, mode string, length time.Duration) {
	var extra []string
	if mode == "aof" || mode == "sentinel" {
		extra = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	dir := t.TempDir()
	tt := &torture{t: t, mode: mode, dir: dir, active: map[string]*tInv{}}
	if mode == "sentinel" {
		tt.net = redistest.StartSentinelNet(t, 2, extra...)
		tt.net.WaitFailoverReady()
		tt.srv = tt.net.Master
	} else {
		tt.srv = redistest.Start(t, extra...)
	}
	tt.job = filepath.Join(dir, "job.sh")
	if err := os.WriteFile(tt.job, []byte(tortureJob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("torture%d-%s:", os.Getpid(), mode)
	for h := 0; h < tortureHosts; h++ {
		var url string
		if tt.net != nil {
			u, cut := tt.net.ProxiedURL()
			url = u
			tt.cutOff = append(tt.cutOff, cut)
		} else {
			p, err := faultproxy.Start(tt.srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			tt.proxies = append(tt.proxies, p)
			url = "redis://" + p.Addr + "/0"
		}
		tt.hostEnv = append(tt.hostEnv, append(tortureEnv(),
			"CRONLOCK_HISTORY="+filepath.Join(dir, fmt.Sprintf("host%d.db", h)),
			"CRONLOCK_LOCK_DIR="+filepath.Join(dir, fmt.Sprintf("locks%d", h)),
			"CRONLOCK_CONFIG="+os.DevNull,
			"CRONLOCK_PREFIX="+prefix,
			fmt.Sprintf("CRONLOCK_NODE=host%d", h),
			"CRONLOCK_REDIS_URL="+url,
			// A race-built cronlock otherwise sleeps 1 s at exit.
			"GORACE=atexit_sleep_ms=0",
			// Every run's entry is kept, so that checkLedger can find each one in a soak.
			"CRONLOCK_FLEET_KEEP=100000",
		))
	}

	start := time.Now()
	tt.start, tt.deadline = start, start.Add(length)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopAll := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	// Registered after the server's and proxies' cleanups: runs before them, even on Fatal.
	t.Cleanup(stopAll)
	for h := 0; h < tortureHosts; h++ {
		for w := 0; w < tortureWorkers; w++ {
			wg.Add(1)
			go func(h, w int) {
				defer wg.Done()
				tt.host(h, w, stop)
			}(h, w)
		}
	}
	tt.nemesis()
	stopAll()
	t.Logf("%s: torture ran %v (incl. drain)", mode, time.Since(start).Round(time.Millisecond))
	tt.check()
	tt.checkLedger(prefix)
}

// checkLedger checks the fleet's record after the torture (settleLedger): every run that
// claimed ends completed there once each host ran each key once more, but for runs whose
// record a restart without persistence may have lost; and an entry is DUPLICATE only
// where the referee saw an overlap it allows, or beside a run stopped fail-closed, frozen,
// killed or caught by a restart that lost the lock.
func (tt *torture) checkLedger(prefix string) {
	t := tt.t
	if tt.net != nil {
		// A partition's failover is healed before the settling runs (their releases
		// would be unconfirmed on a master the Sentinels are still replacing).
		for dl := time.Now().Add(tortureSettle); !tt.net.Settled() && time.Now().Before(dl); {
			time.Sleep(100 * time.Millisecond)
		}
	}
	byInv := map[string]*tInv{}
	for _, inv := range tt.all {
		byInv[inv.id] = inv
	}
	rows := map[string]*tInv{} // by run id
	var hosts []*cli
	for h := range tortureHosts {
		c := &cli{t: t, dir: tt.dir, env: tt.hostEnv[h]}
		hosts = append(hosts, c)
		for _, k := range tortureKeys {
			for _, r := range c.history(k.name) {
				if len(r.Command) > 0 {
					if inv := byInv[r.Command[len(r.Command)-1]]; inv != nil {
						rows[r.ID] = inv
					}
				}
			}
		}
	}
	// A restart without persistence during a run's life may lose its entry, claim and
	// completion alike (the completion re-creates a missing entry, but one written before
	// the restart is gone with it).
	dataLoss := func(inv *tInv) bool {
		for _, f := range tt.faults {
			if tt.mode == "nopersist" && f.kind == "redis-kill" && f.span.to >= inv.launch {
				return true
			}
		}
		return false
	}
	// Runs soon after a restart without persistence may be DUPLICATE beside a completion
	// kept through the restart and sent late (its end is then not the backend's): a known
	// false mark of the reader after data loss, not a second holder (the referee counts
	// those).
	afterDataLoss := func(inv *tInv) bool {
		for _, f := range tt.faults {
			if tt.mode == "nopersist" && f.kind == "redis-kill" && inv.launch-f.span.to < int64(10*time.Second) {
				return true
			}
		}
		return false
	}
	// A short run's release trusts the Sentinel answer its dial got when it is less than a
	// second old (README, Sentinel): a partition that starts between the dial and the
	// release and keeps the run's host with the old master takes the release there, and
	// the promoted master never sees the completion (with --min-replicas, unset here, the
	// release's WAIT would find no replica and keep it to send again).
	shortRunCutOff := func(inv *tInv) bool {
		for _, f := range tt.faults {
			if tt.mode == "sentinel" && f.kind == "sentinel-partition" && f.target == fmt.Sprintf("host%d", inv.host) &&
				inv.launch <= f.span.from && f.span.from <= inv.exit && inv.exit-inv.launch < int64(time.Second+tortureWindowSlack) {
				return true
			}
		}
		return false
	}
	url := "redis://" + tt.srv.Addr + "/0"
	if tt.net != nil {
		url = tt.net.URL()
	}
	m := newCLI(t, url)
	m.env = append(m.env, "CRONLOCK_HISTORY=off", "CRONLOCK_PREFIX="+prefix)
	var keys []string
	for _, k := range tortureKeys {
		keys = append(keys, k.name)
	}
	settleLedger(t, hosts, m, keys, ledgerExpect{
		settle: []string{"--redis-timeout", "2s"},
		excuse: func(r historyRow) string {
			if inv := rows[r.ID]; inv != nil && dataLoss(inv) {
				return "a restart without persistence after its claim"
			}
			if inv := rows[r.ID]; inv != nil && shortRunCutOff(inv) {
				return "a short run cut off with the old master between its dial and its release"
			}
			return ""
		},
		describe: func(r historyRow) string {
			inv := rows[r.ID]
			if inv == nil {
				return "run " + r.ID + ": not one of the torture's invocations"
			}
			return fmt.Sprintf("run %s is %s on host%d: launched +%v, exited +%v (code %d); faults near: %s",
				r.ID, inv.id, inv.host, tt.since(inv.launch), tt.since(inv.exit), inv.exitCode, tt.faultsNear(inv.launch, inv.exit))
		},
		dupOK: func(id string) bool {
			inv := rows[id]
			if inv == nil {
				return false
			}
			inv.mu.Lock()
			frozen := len(inv.stops) > 0
			inv.mu.Unlock()
			return tt.overlapIDs[id] || frozen || inv.killed || inv.hung || inv.exitCode == 125 || dataLoss(inv) || afterDataLoss(inv)
		},
	})
}

// host is one crontab line of one simulated host: it runs cronlock again and again.
func (tt *torture) host(h, w int, stop <-chan struct{}) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(h*100+w)))
	errf := filepath.Join(tt.dir, fmt.Sprintf("stderr-%d-%d", h, w))
	for {
		select {
		case <-stop:
			return
		default:
		}
		tt.runOne(h, r, errf)
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+r.IntN(180)) * time.Millisecond):
		}
	}
}

func (tt *torture) newInv(h int, r *rand.Rand) *tInv {
	inv := &tInv{host: h, key: tortureKeys[r.IntN(len(tortureKeys))]}
	switch x := r.Float64(); {
	case x < 0.45:
		inv.dur = time.Duration(r.IntN(50)) * time.Millisecond
	case x < 0.8:
		inv.dur = time.Duration(100+r.IntN(1400)) * time.Millisecond
	default: // far longer than the TTL
		inv.dur = time.Duration(2500+r.IntN(2000)) * time.Millisecond
	}
	if r.IntN(100) < 15 {
		inv.code = 3
	}
	inv.stubborn = r.IntN(100) < 20
	inv.escape = r.IntN(100) < 15
	if r.IntN(100) < 10 {
		inv.timeout = 1500 * time.Millisecond
	}
	tt.mu.Lock()
	tt.counter++
	inv.id = fmt.Sprintf("h%d-%d", h, tt.counter)
	tt.all = append(tt.all, inv)
	tt.mu.Unlock()
	return inv
}

// bound is how long the invocation may take before it counts as hung.
func (inv *tInv) bound() time.Duration {
	return inv.dur + tortureGrace + inv.key.ttl + 4*tortureRedisTO + tortureHungMargin + inv.stoppedFor()
}

func (tt *torture) runOne(h int, r *rand.Rand, errf string) {
	inv := tt.newInv(h, r)
	args := []string{"run", "-k", inv.key.name, "--ttl", inv.key.ttl.String(), "--grace", tortureGrace.String(),
		"--redis-timeout", tortureRedisTO.String(), "--conflict-exit-code", strconv.Itoa(tortureConflict)}
	if inv.timeout > 0 {
		args = append(args, "--timeout", inv.timeout.String())
	}
	stub := "0"
	if inv.stubborn {
		stub = "1"
	}
	escape := "0"
	if inv.escape {
		escape = "1"
	}
	args = append(args, "--", "/bin/sh", tt.job, strconv.FormatFloat(inv.dur.Seconds(), 'f', 3, 64),
		strconv.Itoa(inv.code), stub, escape, tt.dir, inv.id)
	cmd := exec.Command(cronlockBin, args...)
	cmd.Env = tt.hostEnv[h]
	cmd.Dir = tt.dir
	ef, err := os.Create(errf)
	if err != nil {
		tt.fail("%s: %v", inv.id, err)
		return
	}
	defer ef.Close()
	cmd.Stderr = ef
	inv.launch = time.Now().UnixNano()
	if err := cmd.Start(); err != nil {
		tt.fail("%s: start cronlock: %v", inv.id, err)
		return
	}
	inv.pid, inv.proc = cmd.Process.Pid, cmd.Process
	tt.mu.Lock()
	tt.active[inv.id] = inv
	tt.mu.Unlock()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	began := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	var werr error
wait:
	for {
		select {
		case werr = <-waited:
			break wait
		case <-tick.C:
			if time.Since(began) > inv.bound() && !inv.hung {
				inv.hung = true
				cmd.Process.Signal(syscall.SIGCONT)
				cmd.Process.Kill()
			}
		}
	}
	tick.Stop()
	inv.exit = time.Now().UnixNano()
	tt.mu.Lock()
	delete(tt.active, inv.id)
	tt.mu.Unlock()
	inv.mu.Lock()
	inv.done = true
	killed := inv.killed
	inv.mu.Unlock()

	var ee *exec.ExitError
	switch {
	case werr == nil:
		inv.exitCode = 0
	case errors.As(werr, &ee):
		inv.exitCode = ee.ExitCode() // -1 when killed by a signal
	default:
		tt.fail("%s: wait cronlock: %v", inv.id, werr)
	}
	b, _ := os.ReadFile(errf)
	inv.stderr = string(b)
	if inv.hung {
		tt.fail("%s (pid %d, job %v, key %s ttl %v) hung: still running after %v; stderr %q",
			inv.id, cmd.Process.Pid, inv.dur, inv.key.name, inv.key.ttl, inv.bound(), inv.stderr)
	}
	if strings.Contains(inv.stderr, "DATA RACE") {
		tt.fail("%s: data race in cronlock: %s", inv.id, inv.stderr)
	}

	// No process of the job may outlive its cronlock (a SIGKILLed one: its guard's kill
	// needs a moment).
	for _, pid := range readPIDs(filepath.Join(tt.dir, "pids", inv.id)) {
		if killed {
			for dl := time.Now().Add(tortureKillWait); time.Now().Before(dl) && !proctest.Dead(pid); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !proctest.Dead(pid) && jobProcess(pid, inv.id) {
			tt.fail("%s: job process %d outlived its cronlock (exit %d, nemesis-killed %v)", inv.id, pid, inv.exitCode, killed)
		}
	}
}

// tortureEnv is the test's environment without any CRONLOCK_ setting.
func tortureEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRONLOCK_") {
			env = append(env, kv)
		}
	}
	return env
}

func readPIDs(path string) []int {
	b, _ := os.ReadFile(path)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// jobProcess tells a job process from an unrelated one that reused its pid: the job's
// processes carry the invocation id in their argv (sh) or are its sleep.
func jobProcess(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	s := string(b)
	return strings.Contains(s, id) || strings.HasPrefix(s, "sleep\x00")
}

// since is when, as time since the torture began.
func (tt *torture) since(when int64) time.Duration {
	return time.Duration(when - tt.start.UnixNano()).Round(time.Millisecond)
}

// hostPIDs are the pids of host h's running cronlock processes.
func (tt *torture) hostPIDs(h int) []int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	var pids []int
	for _, inv := range tt.active {
		if inv.host == h {
			pids = append(pids, inv.pid)
		}
	}
	return pids
}

// holders lists running invocations whose job has run for at least minAge.
func (tt *torture) holders(minAge time.Duration) []*tInv {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	var out []*tInv
	for _, inv := range tt.active {
		fi, err := os.Stat(filepath.Join(tt.dir, "pids", inv.id))
		if err != nil || time.Since(fi.ModTime()) < minAge {
			continue
		}
		out = append(out, inv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// nemesis injects one fault at a time until the deadline, on the test's goroutine.
func (tt *torture) nemesis() {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kinds := []string{"redis-kill", "pause-short", "pause-long", "proxy-latency", "proxy-blackhole",
		"proxy-reset", "sigstop-short", "sigstop-long", "sigkill-holder"}
	switch tt.mode {
	case "sentinel":
		// The faults of one server and of the proxies in front of it are the other
		// sub-tests': here the partition, and the faults of cronlock itself.
		kinds = []string{"sentinel-partition", "sentinel-partition", "sigstop-short", "sigstop-long", "sigkill-holder"}
	case "nopersist":
		kinds = append(kinds, "redis-kill") // the fault that loses locks: give it more turns
	default:
		// A restart that keeps the lock must not kill anyone's job: give it turns enough
		// to meet renewals and waiters.
		kinds = append(kinds, "redis-restart-short", "redis-restart-short", "redis-restart-short", "redis-restart-short")
	}
	maxTTL := 2 * time.Second
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	for time.Now().Before(tt.deadline) {
		time.Sleep(ms(300, 1500))
		if !time.Now().Before(tt.deadline) {
			break
		}
		f := tFault{kind: kinds[r.IntN(len(kinds))]}
		if f.kind == "sentinel-partition" && !tt.net.Settled() {
			continue // the last failover is still being healed: no master to cut off yet
		}
		f.span.from = time.Now().UnixNano()
		switch f.kind {
		case "sentinel-partition":
			// A host with a job running if there is one: the case that can overlap.
			h := r.IntN(tortureHosts)
			if hs := tt.holders(0); len(hs) > 0 {
				h = hs[r.IntN(len(hs))].host
			}
			f.target = fmt.Sprintf("host%d", h)
			// Long enough for the Sentinels (down after 500ms) to promote a replica and
			// for the locks to expire on it.
			d := ms(3000, 4500)
			tt.net.Partition(func() []int { return tt.hostPIDs(h) })
			tt.cutOff[h](faultproxy.Blackhole)
			time.Sleep(d)
			tt.net.Heal()
			tt.cutOff[h](faultproxy.Pass)
			f.detail = d.String()
		case "redis-kill":
			down := ms(0, 300)
			if r.IntN(2) == 0 {
				down = ms(500, 2500)
			}
			tt.srv.Kill()
			time.Sleep(down)
			tt.srv.Restart()
			f.detail, f.down = "down "+down.String(), down
		case "redis-restart-short":
			down := ms(0, 300)
			tt.srv.Kill()
			time.Sleep(down)
			tt.srv.Restart()
			f.detail, f.down = "down "+down.String(), down
		case "pause-short", "pause-long":
			d := ms(200, 800)
			if f.kind == "pause-long" {
				d = maxTTL + ms(300, 1500)
			}
			if _, err := tt.srv.Do("CLIENT", "PAUSE", strconv.Itoa(int(d.Milliseconds())), "ALL"); err != nil {
				tt.fail("nemesis: CLIENT PAUSE: %v", err)
			}
			time.Sleep(d + 50*time.Millisecond)
			f.detail = d.String()
		case "proxy-latency", "proxy-blackhole", "proxy-reset":
			h := r.IntN(len(tt.proxies))
			p := tt.proxies[h]
			f.target = fmt.Sprintf("host%d", h)
			d := ms(500, 3000)
			switch f.kind {
			case "proxy-latency":
				lat := tortureRedisTO + ms(200, 600)
				p.Set(faultproxy.Latency, lat)
				f.detail = fmt.Sprintf("+%v for %v", lat, d)
			case "proxy-blackhole":
				p.Set(faultproxy.Blackhole, 0)
				f.detail = d.String()
			case "proxy-reset":
				d = ms(0, 800)
				p.Set(faultproxy.Reset, 0)
				f.detail = "refusing for " + d.String()
			}
			time.Sleep(d)
			p.Set(faultproxy.Pass, 0)
		case "sigstop-short", "sigstop-long", "sigkill-holder":
			hs := tt.holders(300 * time.Millisecond)
			if len(hs) == 0 {
				continue
			}
			inv := hs[r.IntN(len(hs))]
			if f.kind == "sigkill-holder" && inv.escape {
				// A SIGKILLed cronlock's guard kills the job's group; a process that left
				// the group is out of its reach (README, "What is guaranteed").
				continue
			}
			f.target = inv.id
			inv.mu.Lock()
			if inv.done {
				inv.mu.Unlock()
				continue
			}
			if f.kind == "sigkill-holder" {
				inv.killed = true
				inv.killedAt = time.Now().UnixNano()
				if fi, err := os.Stat(filepath.Join(tt.dir, "pids", inv.id)); err == nil {
					inv.jobAge = time.Since(fi.ModTime())
				}
				inv.proc.Signal(syscall.SIGKILL) // pidfd-safe: never another process
				inv.mu.Unlock()
				break
			}
			d := time.Duration(float64(inv.key.ttl) * (0.3 + 0.4*r.Float64()))
			if f.kind == "sigstop-long" {
				d = inv.key.ttl + ms(300, 1500)
			}
			from := time.Now().UnixNano()
			inv.stopped = true
			inv.proc.Signal(syscall.SIGSTOP)
			inv.mu.Unlock()
			time.Sleep(d)
			inv.mu.Lock()
			inv.proc.Signal(syscall.SIGCONT)
			inv.stopped = false
			inv.stops = append(inv.stops, span{from, time.Now().UnixNano()})
			inv.mu.Unlock()
			f.detail = d.String()
		}
		f.span.to = time.Now().UnixNano()
		tt.mu.Lock()
		tt.faults = append(tt.faults, f)
		tt.mu.Unlock()
	}
}

// tEvent is one line of the referee log.
type tEvent struct {
	kind   string
	t1, t2 int64
	key    string
	token  uint64
	runID  string
	inv    string
}

// tRun is what the referee knows of one invocation's job.
type tRun struct {
	inv     *tInv
	events  []tEvent
	token   uint64
	runID   string
	started bool
	acqT2   int64 // when it had the key's flock (T2 of acq or ovx); 0 if never
	startT  int64 // T1 of its first event
	endT    int64 // T1 of end; 0 if it did not end by itself
	ovl     *tEvent
	ovx     *tEvent
}

func (tt *torture) readEvents() map[string]*tRun {
	runs := map[string]*tRun{}
	for _, inv := range tt.all {
		runs[inv.id] = &tRun{inv: inv}
	}
	f, err := os.Open(filepath.Join(tt.dir, "referee.log"))
	if err != nil {
		if !os.IsNotExist(err) {
			tt.fail("referee log: %v", err)
		}
		return runs
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fs := strings.Fields(line)
		var e tEvent
		var err1, err2, err3 error
		if len(fs) == 7 {
			e.kind, e.key, e.runID, e.inv = fs[0], fs[3], fs[5], fs[6]
			e.t1, err1 = strconv.ParseInt(fs[1], 10, 64)
			e.t2, err2 = strconv.ParseInt(fs[2], 10, 64)
			e.token, err3 = strconv.ParseUint(fs[4], 10, 64)
		}
		run := runs[e.inv]
		if len(fs) != 7 || err1 != nil || err2 != nil || err3 != nil || run == nil || e.key != run.inv.key.name {
			tt.fail("referee log: malformed line %q (a torn write, or a job with a wrong environment)", line)
			continue
		}
		switch e.kind {
		case "acq", "ovl", "ovx", "end":
		default:
			tt.fail("referee log: unknown event in %q", line)
			continue
		}
		if len(run.events) == 0 {
			run.startT = e.t1
		} else if run.token != e.token || run.runID != e.runID {
			tt.fail("referee log: %s changed token or run id: %q", e.inv, line)
		}
		run.started = true
		run.token, run.runID = e.token, e.runID
		run.events = append(run.events, e)
		switch e.kind {
		case "acq":
			run.acqT2 = e.t2
		case "ovl":
			ev := e
			run.ovl = &ev
		case "ovx":
			ev := e
			run.ovx = &ev
			run.acqT2 = e.t2
		case "end":
			run.endT = e.t1
		}
	}
	return runs
}

func (tt *torture) readHistory(h int) []historyRow {
	cmd := exec.Command(cronlockBin, "history", "--json", "--limit", "0")
	cmd.Env = tt.hostEnv[h]
	out, err := cmd.Output()
	if err != nil {
		tt.fail("host%d: cronlock history: %v", h, err)
		return nil
	}
	var rows []historyRow
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var r historyRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			tt.fail("host%d: history line %q: %v", h, line, err)
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

// wantStatus checks a history row against the invocation's exit (README, "Exit codes and
// statuses").
func wantStatus(inv *tInv, run *tRun, row historyRow) string {
	switch {
	case inv.killed && inv.exitCode == -1:
		if row.Status == runstatus.Running {
			return "SIGKILLed run still running in the history"
		}
		return ""
	case inv.hung:
		return ""
	}
	var ok bool
	switch c := inv.exitCode; {
	case c == 0:
		ok = row.Status == runstatus.Succeeded && inv.code == 0
	case c == tortureConflict:
		ok = row.Status == runstatus.Skipped
	case c == 3:
		ok = row.Status == runstatus.Failed && inv.code == 3
	case c == 124:
		ok = row.Status == runstatus.Timeout && inv.timeout > 0
	case c == 125:
		ok = row.Status == runstatus.LockLost || row.Status == runstatus.Error
	}
	if !ok {
		return fmt.Sprintf("exit code %d with status %q", inv.exitCode, row.Status)
	}
	switch row.Status {
	case runstatus.Skipped, runstatus.Error:
		if run.started {
			return fmt.Sprintf("status %s but its job ran", row.Status)
		}
	case runstatus.Succeeded, runstatus.Failed:
		if run.endT == 0 {
			return fmt.Sprintf("status %s but its job did not end by itself", row.Status)
		}
	}
	if run.started && (row.ID != run.runID || row.FencingToken != run.token) {
		return fmt.Sprintf("row id %s token %d, job saw CRONLOCK_RUN_ID %s token %d",
			row.ID, row.FencingToken, run.runID, run.token)
	}
	return ""
}

// tOverlap is two jobs of one key alive at once.
type tOverlap struct {
	key            string
	older, younger *tRun // older holds the lower fencing token
	window         time.Duration
	class          string
}

func (tt *torture) check() {
	t := tt.t
	runs := tt.readEvents()
	rows := map[string]historyRow{}
	var lockLost, needless []string
	errShort := 0
	for h := 0; h < tortureHosts; h++ {
		hoshistoryRows := tt.readHistory(h)
		n := 0
		for _, row := range hoshistoryRows {
			if len(row.Command) == 0 {
				tt.fail("host%d: row %s has no command", h, row.ID)
				continue
			}
			id := row.Command[len(row.Command)-1]
			if _, dup := rows[id]; dup {
				tt.fail("%s: two history rows", id)
			}
			rows[id] = row
			n++
		}
		want := 0
		for _, inv := range tt.all {
			if inv.host == h {
				want++
			}
		}
		if n > want {
			tt.fail("host%d: %d history rows for %d invocations", h, n, want)
		}
	}

	counts := map[string]int{}
	for _, inv := range tt.all {
		run := runs[inv.id]
		row, ok := rows[inv.id]
		if !ok {
			// A cronlock SIGKILLed moments after its job started may not have written the
			// running row yet (the recorder is asynchronous); later than 1 s it must have.
			if inv.killed && inv.jobAge < time.Second {
				counts["killed before its row"]++
				continue
			}
			tt.fail("%s: no history row (exit %d, killed %v, job ran %v); stderr %q", inv.id, inv.exitCode, inv.killed, run.started, inv.stderr)
			continue
		}
		counts[row.Status]++
		if msg := wantStatus(inv, run, row); msg != "" {
			tt.fail("%s (key %s, job %v code %d stubborn %v timeout %v, killed %v, stops %v): %s; stderr %q",
				inv.id, inv.key.name, inv.dur, inv.code, inv.stubborn, inv.timeout, inv.killed, inv.stops, msg, inv.stderr)
		}
		if row.Status == runstatus.LockLost {
			lockLost = append(lockLost, inv.id)
			if near, ok := tt.needlessKill(inv); ok {
				needless = append(needless, inv.id)
				tt.fail("%s (key %s ttl %v, job %v): lock_lost, yet its lock survived in Redis: the only faults during the run were short AOF restarts (%s); stderr %q",
					inv.id, inv.key.name, inv.key.ttl, inv.dur, near, inv.stderr)
			}
		}
		// Not a failure (an acquire that meets a restart longer than --redis-timeout
		// rightly gives up), but the number shows how often one was not ridden out.
		if _, ok := tt.needlessKill(inv); ok && row.Status == runstatus.Error {
			errShort++
		}
	}

	// Fencing tokens: unique per key, and rising in acquisition order. An invocation that
	// was over (cronlock exited, or its job ended) before another was launched acquired
	// first, whatever Redis lost meanwhile.
	byKey := map[string][]*tRun{}
	for _, inv := range tt.all {
		if r := runs[inv.id]; r.started {
			byKey[inv.key.name] = append(byKey[inv.key.name], r)
		}
	}
	for key, rs := range byKey {
		seen := map[uint64]string{}
		for _, r := range rs {
			if other, dup := seen[r.token]; dup {
				tt.fail("key %s: fencing token %d handed to %s and %s", key, r.token, other, r.inv.id)
			}
			seen[r.token] = r.inv.id
		}
		doneBy := func(r *tRun) int64 {
			if r.endT != 0 && r.endT < r.inv.exit {
				return r.endT
			}
			return r.inv.exit
		}
		sorted := append([]*tRun(nil), rs...)
		sort.Slice(sorted, func(i, j int) bool { return doneBy(sorted[i]) < doneBy(sorted[j]) })
		byLaunch := append([]*tRun(nil), rs...)
		sort.Slice(byLaunch, func(i, j int) bool { return byLaunch[i].inv.launch < byLaunch[j].inv.launch })
		var maxTok uint64
		var maxBy *tRun
		i := 0
		for _, b := range byLaunch {
			for i < len(sorted) && doneBy(sorted[i]) < b.inv.launch {
				if sorted[i].token > maxTok {
					maxTok, maxBy = sorted[i].token, sorted[i]
				}
				i++
			}
			if maxBy != nil && b.token <= maxTok {
				tt.fail("key %s: fencing token %d of %s is not above %d of %s, which was over before it was launched",
					key, b.token, b.inv.id, maxTok, maxBy.inv.id)
			}
		}
	}

	// Overlaps.
	var overlaps []tOverlap
	for key, rs := range byKey {
		for _, b := range rs {
			if b.ovl == nil {
				continue
			}
			// The job that held the flock when b found it taken: the latest to take it
			// before b's ovl line, or else before b took it itself.
			var holder *tRun
			for _, pass := range []int64{b.ovl.t2, b.acqT2} {
				for _, r := range rs {
					if r != b && r.acqT2 != 0 && r.acqT2 <= pass && (holder == nil || r.acqT2 > holder.acqT2) {
						holder = r
					}
				}
				if holder != nil || pass == 0 {
					break
				}
			}
			end := b.inv.exit
			if b.ovx != nil {
				end = b.ovx.t1
			}
			o := tOverlap{key: key, window: time.Duration(end - b.ovl.t1)}
			if holder == nil {
				tt.fail("key %s: %s found the key's flock taken but no holder is known (events %v)", key, b.inv.id, b.events)
				continue
			}
			o.older, o.younger = holder, b
			if b.token < holder.token {
				o.older, o.younger = b, holder
			}
			o.class = tt.classify(o, b.ovl.t1, end)
			overlaps = append(overlaps, o)
		}
	}

	tt.overlapIDs = map[string]bool{}
	for _, o := range overlaps {
		tt.overlapIDs[o.older.runID], tt.overlapIDs[o.younger.runID] = true, true
	}

	// Summary.
	faults := map[string]int{}
	for _, f := range tt.faults {
		faults[f.kind]++
	}
	acq := 0
	for _, r := range runs {
		if r.started {
			acq++
		}
	}
	var maxWin time.Duration
	classes := map[string]int{}
	for _, o := range overlaps {
		maxWin = max(maxWin, o.window)
		classes[o.class]++
	}
	t.Logf("%s: %d invocations on %d keys from %d hosts: %d acquisitions (job started), %d skips; statuses %v",
		tt.mode, len(tt.all), len(tortureKeys), tortureHosts, acq, counts[runstatus.Skipped], sortedCounts(counts))
	t.Logf("%s: faults injected %v", tt.mode, sortedCounts(faults))
	t.Logf("%s: overlaps %d (max window %v) by cause %v; lock_lost runs %d, needless kills %d (lock_lost with only short AOF restarts near); errors with only short AOF restarts near %d",
		tt.mode, len(overlaps), maxWin, sortedCounts(classes), len(lockLost), len(needless), errShort)
	for _, o := range overlaps {
		t.Logf("  overlap on %s: %s (token %d, %s) and %s (token %d, %s) for %v: %s", o.key,
			o.older.inv.id, o.older.token, rows[o.older.inv.id].Status, o.younger.inv.id, o.younger.token,
			rows[o.younger.inv.id].Status, o.window.Round(time.Millisecond), o.class)
	}
	if testing.Verbose() {
		for _, f := range tt.faults {
			t.Logf("  fault %s %s %s at +%v for %v", f.kind, f.target, f.detail,
				time.Duration(f.span.from-tt.start.UnixNano()).Round(time.Millisecond), time.Duration(f.span.to-f.span.from).Round(time.Millisecond))
		}
	}
	tt.mu.Lock()
	errs := tt.errs
	tt.mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	if acq == 0 {
		t.Error("no job ever ran: the torture tested nothing")
	}
}

// classify names the fault that explains an overlap, or says why none does (the name then
// starts with "VIOLATION" and the test fails).
func (tt *torture) classify(o tOverlap, from, to int64) string {
	e := o.older
	ttl := e.inv.key.ttl
	g := min(tortureGrace, ttl/4)
	// A restart without persistence while the older run held the lock.
	if tt.mode == "nopersist" {
		for _, f := range tt.faults {
			if f.kind != "redis-kill" || f.span.from < e.inv.launch || f.span.from > max(o.younger.startT, e.startT) {
				continue
			}
			if bound := ttl/3 + g + tortureWindowSlack; o.window > bound {
				tt.fail("overlap on %s after a restart without persistence lasted %v, more than ttl/3+g+%v = %v: %s and %s",
					o.key, o.window, tortureWindowSlack, bound, e.inv.id, o.younger.inv.id)
			}
			return "redis restart without persistence"
		}
	}
	// The older cronlock was frozen (SIGSTOP) for longer than its lease.
	e.inv.mu.Lock()
	stops := append([]span(nil), e.inv.stops...)
	e.inv.mu.Unlock()
	for _, s := range stops {
		if time.Duration(s.to-s.from) < ttl-tortureDrift(ttl) || s.from > to {
			continue
		}
		if limit := s.to + int64(g+tortureWindowSlack); to > limit {
			tt.fail("overlap on %s: %s's job ran on %v after its cronlock was resumed", o.key, e.inv.id, time.Duration(to-s.to))
		}
		return "holder frozen longer than its TTL (SIGSTOP)"
	}
	// A Sentinel partition, or the failovers it set off (until the deployment has settled
	// again), and the older run was stopped fail-closed: no overlap is allowed without
	// that. Cut off with the old master (and not also frozen, which explains more), its
	// renewals there were unconfirmed, so its job must have died within a lease of the
	// partition's start. On the other side, a run that took the lock on a master named by
	// the one Sentinel its dial asked, while the others named another (a failover under
	// way), learns so at its first renewal: the bound of a failover that lost the lock,
	// ttl/3 + g.
	for _, f := range tt.faults {
		if f.kind != "sentinel-partition" || f.span.from > to || to > f.span.to+int64(tortureSettle) {
			continue
		}
		if e.inv.exitCode != 125 {
			tt.fail("overlap on %s: %s ran beside %s for %v around a Sentinel partition of %s without being stopped fail-closed (exit %d)",
				o.key, e.inv.id, o.younger.inv.id, o.window, f.target, e.inv.exitCode)
		}
		if f.target == fmt.Sprintf("host%d", e.inv.host) && f.span.to >= e.inv.launch {
			if limit := f.span.from + int64(ttl+tortureWindowSlack); to > limit {
				tt.fail("overlap on %s: %s's job (launched at +%v, cronlock ended at +%v) ran on %v after a lease from the start of the Sentinel partition at +%v; stderr %q",
					o.key, e.inv.id, tt.since(e.inv.launch), tt.since(e.inv.exit), time.Duration(to-limit), tt.since(f.span.from), e.inv.stderr)
			}
			return "holder cut off with the old master (Sentinel partition), stopped fail-closed"
		}
		if bound := ttl/3 + g + tortureWindowSlack; o.window > bound {
			tt.fail("overlap on %s after a Sentinel failover lasted %v, more than ttl/3+g+%v = %v: %s and %s; stderr %q",
				o.key, o.window, tortureWindowSlack, bound, e.inv.id, o.younger.inv.id, e.inv.stderr)
		}
		return "lock taken on a master the Sentinels were replacing (failover), stopped fail-closed"
	}
	tt.fail("VIOLATION: jobs %s (token %d, launched %v, exit %d, killed %v, stops %v) and %s (token %d, exit %d) overlapped on %s for %v with no fault that allows it (mode %s); nearby faults: %s",
		e.inv.id, e.token, time.Unix(0, e.inv.launch).Format("15:04:05.000"), e.inv.exitCode, e.inv.killed, stops,
		o.younger.inv.id, o.younger.token, o.younger.inv.exitCode, o.key, o.window, tt.mode, tt.faultsNear(from, to))
	return "VIOLATION"
}

// needlessKill reports whether a run that ended lock_lost (or error) did so needlessly: in
// aof mode, every fault during the run (from its launch to its exit) was a short restart
// that kept the lock, or there was none. It returns those faults.
func (tt *torture) needlessKill(inv *tInv) (string, bool) {
	if tt.mode != "aof" {
		return "", false
	}
	var near []string
	for _, f := range tt.faults {
		if f.span.to < inv.launch || f.span.from > inv.exit {
			continue
		}
		if !f.shortRestart(tt.mode) {
			return "", false
		}
		near = append(near, fmt.Sprintf("%s %s at %s", f.kind, f.detail, time.Unix(0, f.span.from).Format("15:04:05.000")))
	}
	if len(near) == 0 {
		return "no fault at all", true
	}
	return strings.Join(near, "; "), true
}

// tortureDrift is the lease margin cronlock takes off for clock drift (lockrun.Drift).
func tortureDrift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

func (tt *torture) faultsNear(from, to int64) string {
	var b strings.Builder
	for _, f := range tt.faults {
		if f.span.to >= from-int64(5*time.Second) && f.span.from <= to {
			fmt.Fprintf(&b, "[%s %s %s %s–%s] ", f.kind, f.target, f.detail,
				time.Unix(0, f.span.from).Format("15:04:05.000"), time.Unix(0, f.span.to).Format("15:04:05.000"))
		}
	}
	return b.String()
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
