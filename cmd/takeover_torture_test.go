package cmd

// TestTakeoverTorture is the proof of standby takeover and checkpoints through the built
// binary: simulated hosts (each its own node, history and lock folder) run the same
// every-minute line with --standby, one tick after another, while a nemesis takes the
// tick's current holder away: its host lost (the whole process tree SIGKILLed), frozen (a
// VM paused past its lease: SIGSTOP to every process of the tree, later SIGCONT), or cut
// off from the backend (internal/faultproxy), or its cronlock alone frozen past its lease
// while its job runs on (only the fence then stops the job's saves). The job loads its checkpoint, then does a
// few steps and saves each one. A referee reads what the jobs wrote and counts, per tick:
//
//   - completed: the runs that completed the tick (exit 0). Exactly 1: every fault is
//     injected while a standby waits, so a standby is always there to take the tick over;
//   - bodies: the job bodies started (at least 1);
//   - overlaps: two jobs of the key alive at once beyond the fail-closed bounds (0). As in
//     TestTorture, each job holds a kernel flock from its first act to its last process's
//     death; a job that finds it taken logs "ovl" and waits for it ("ovx"). A frozen holder
//     holds the flock while frozen: its window may end no later than g + a margin after it
//     was woken (its cronlock, or its guard, kills it on waking);
//   - stale saves: saves that returned 0 to a run after a run with a larger fencing token
//     had started its job (0): the save line is logged only after the save returned 0,
//     with the time it was sent;
//   - resumes: every job that started after another attempt of its tick loaded the last
//     checkpoint accepted before it (or one whose save was in flight when its saver
//     died, which the backend may have stored), never an older one, never a refused one,
//     and the first attempt of a tick loaded nothing (all).
//
// The tick is moved with the test clock (CRONLOCK_TEST_CLOCK_OFFSET): each round's hosts
// share an offset that puts their clock 2 s after the next minute (--max-skew 0 on Redis),
// so the fleet goes through a tick every few seconds of real time.
//
// Default: the Redis and local sub-tests, about a minute each; the Sentinel one (a
// failover among the faults, --min-replicas 1) only with CRONLOCK_TAKEOVER_SENTINEL=1;
// TestEtcdTakeoverTorture runs it on etcd in the etcd build. `go test -short` skips it. A soak of any length per
// backend:
//
//	CRONLOCK_TAKEOVER_TORTURE=20m go test -run TestTakeoverTorture -timeout 60m ./cmd/

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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
	"cronlock/internal/redistest"
)

// takeoverJob is the job of every run: job.sh DIR INV STEPS NAP CRONLOCK. Event lines
// (one printf each, to a file opened O_APPEND):
//
//	EVENT T1 T2 TICK ATTEMPT TOKEN RUNID INV VALUE
//
// acq/ovl/ovx: the key's flock (as in TestTorture); start: the checkpoint loaded (VALUE,
// "-" for none); try: a save about to be sent; ckpt: a save that returned 0 (T1 when it
// was sent); refused: a save refused (75); amb: a save whose outcome is unknown (75, "may
// or may not be stored"); loaderr: load failed; end: the body completed.
const takeoverJob = `#!/bin/sh
d=$1; inv=$2; steps=$3; nap=$4; cl=$5
now() { date +%s%N; }
ev() { printf '%s %s %s %s %s %s %s %s %s\n' "$1" "$2" "$3" "$CRONLOCK_SCHEDULED_FOR" "$CRONLOCK_TICK_ATTEMPT" "$CRONLOCK_FENCING_TOKEN" "$CRONLOCK_RUN_ID" "$inv" "$4" >>"$d/referee.log"; }
exec 9>>"$d/flock"
t0=$(now)
if flock -n 9; then ev acq "$t0" "$(now)" -; else ev ovl "$t0" "$(now)" -; flock 9; t=$(now); ev ovx "$t" "$t" -; fi
t0=$(now)
v=$("$cl" checkpoint load); rc=$?
t=$(now)
case $rc in
0) ev start "$t0" "$t" "$v" ;;
1) ev start "$t0" "$t" -; v=0 ;;
*) ev loaderr "$t0" "$t" "$rc"; exit 75 ;;
esac
i=$v
while [ "$i" -lt "$steps" ]; do
  i=$((i+1))
  sleep "$nap"
  t0=$(now)
  ev try "$t0" "$t0" "$i"
  msg=$("$cl" checkpoint save "$i" 2>&1); rc=$?
  t=$(now)
  case $rc in
  0) ev ckpt "$t0" "$t" "$i" ;;
  75) case $msg in *"may or may not"*) ev amb "$t0" "$t" "$i" ;; *) ev refused "$t0" "$t" "$i" ;; esac; exit 75 ;;
  *) ev saveerr "$t0" "$t" "$i"; exit 2 ;;
  esac
done
t=$(now); ev end "$t" "$t" "$i"
`

// Settings of the takeover torture: timing bounds are generous (a loaded 2-core machine
// running race-built binaries); the counts are exact.
const (
	toHosts    = 4 // one run of each tick per host: a holder and up to three standbys
	toStandbys = 3
	toSteps    = 6
	toNap      = "0.25"
	toGrace    = 300 * time.Millisecond
	toTTL      = 2 * time.Second
	toConflict = 99
	toHung     = 60 * time.Second // a run still going after this is hung
	toSlack    = time.Second      // margin on the allowed overlap windows
)

// toBackend is how the hosts of one sub-test reach their backend.
type toBackend struct {
	name  string
	env   func(h int) []string // the host's backend settings
	flags []string             // extra run flags of every host
	// cut cuts host h (whose cronlock processes pids lists) off from the backend (on),
	// or heals it; nil: no partitions. ready reports whether a partition may start now
	// (nil: always).
	cut    func(h int, pids func() []int, on bool)
	ready  func() bool
	shared bool // one lock folder for every host (the local backend: one machine)
}

// toRun is one `cronlock run` of one host for one tick.
type toRun struct {
	id   string
	host int
	tick time.Time
	cmd  *exec.Cmd

	mu        sync.Mutex
	standby   bool // said it waits as a standby
	done      bool
	code      int   // -1: killed by a signal
	exit      int64 // wall ns
	stderr    strings.Builder
	killedAt  int64  // wall ns; 0 if never
	frozen    []span // SIGSTOP … SIGCONT of the whole tree
	cutFrom   int64  // a partition of its host began (wall ns); 0 if none
	cutTo     int64
	lastFault string
}

// toEvent is one line of the referee log.
type toEvent struct {
	kind    string
	t1, t2  int64
	tick    string
	attempt int
	token   uint64
	runID   string
	inv     string
	value   string
}

type takeoverTorture struct {
	t        *testing.T
	be       toBackend
	dir      string
	job      string
	hostEnv  [][]string
	start    time.Time
	deadline time.Time
	rnd      *rand.Rand

	mu     sync.Mutex
	runs   map[string]*toRun
	order  []*toRun
	faults map[string]int
	errs   []string
	// per tick: whether every fault of the tick found a standby waiting
	covered   map[string]bool
	latencies []time.Duration // SIGKILL of a holder to its successor's first line
}

func (tt *takeoverTorture) fail(format string, args ...any) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if len(tt.errs) < 100 {
		tt.errs = append(tt.errs, fmt.Sprintf(format, args...))
	}
}

// takeoverLength is the torture's length per backend.
func takeoverLength(t *testing.T) time.Duration {
	skipIfShort(t, "the takeover torture takes a minute of fault injection per backend")
	if _, err := exec.LookPath("flock"); err != nil {
		t.Fatalf("the torture's referee needs flock(1) (util-linux): %v", err)
	}
	if v := os.Getenv("CRONLOCK_TAKEOVER_TORTURE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CRONLOCK_TAKEOVER_TORTURE=%q: want a duration such as 20m", v)
		}
		return d
	}
	return 50 * time.Second
}

func TestTakeoverTorture(t *testing.T) {
	length := takeoverLength(t)
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
		var proxies []*faultproxy.Proxy
		for range toHosts {
			p, err := faultproxy.Start(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			proxies = append(proxies, p)
		}
		runTakeoverTorture(t, toBackend{
			name: "redis",
			env: func(h int) []string {
				return []string{"CRONLOCK_BACKEND=redis", "CRONLOCK_REDIS_URL=redis://" + proxies[h].Addr + "/0"}
			},
			flags: []string{"--max-skew", "0", "--redis-timeout", "400ms"},
			cut:   proxyCut(proxies),
		}, length)
	})
	t.Run("sentinel", func(t *testing.T) {
		// Off by default (a minute more of cmd; scripts/test.sh --long runs it). Standbys
		// ride out a failover's silence for two leases: before they did, a standby that met
		// it ended 125 and the tick of a cut-off holder was completed by no one (3 of 21
		// ticks in one round).
		if os.Getenv("CRONLOCK_TAKEOVER_SENTINEL") != "1" {
			t.Skip("CRONLOCK_TAKEOVER_SENTINEL=1 (or scripts/test.sh --long) runs the Sentinel failover round")
		}
		// A master, two replicas and three Sentinels (AOF always), every server behind a
		// proxy: a partition cuts the master and the holder's host off from the Sentinels,
		// the replicas and the other hosts until a replica is promoted. --min-replicas 1:
		// without it a failover may lose a checkpoint the master had not yet replicated.
		net := redistest.StartSentinelNet(t, 2, "--appendonly", "yes", "--appendfsync", "always")
		net.WaitFailoverReady()
		var urls []string
		var cuts []func(faultproxy.Mode)
		for range toHosts {
			u, cut := net.ProxiedURL()
			urls, cuts = append(urls, u), append(cuts, cut)
		}
		runTakeoverTorture(t, toBackend{
			name:  "sentinel",
			env:   func(h int) []string { return []string{"CRONLOCK_BACKEND=redis", "CRONLOCK_REDIS_URL=" + urls[h]} },
			flags: []string{"--max-skew", "0", "--redis-timeout", "400ms", "--min-replicas", "1"},
			cut: func(h int, pids func() []int, on bool) {
				if on {
					net.Partition(pids)
					cuts[h](faultproxy.Blackhole)
					return
				}
				net.Heal()
				cuts[h](faultproxy.Pass)
			},
			ready: net.Settled,
		}, length)
	})
	t.Run("local", func(t *testing.T) {
		runTakeoverTorture(t, toBackend{
			name:   "local",
			env:    func(int) []string { return []string{"CRONLOCK_BACKEND=local"} },
			shared: true,
		}, length)
	})
}

// proxyCut black-holes every connection of host h (a partition) or heals it: leaving the
// partition resets the connections it black-holed.
func proxyCut(proxies []*faultproxy.Proxy) func(h int, pids func() []int, on bool) {
	return func(h int, _ func() []int, on bool) {
		if on {
			proxies[h].SetPartition(func(*net.TCPAddr) bool { return false })
		} else {
			proxies[h].Set(faultproxy.Pass, 0)
		}
	}
}

func runTakeoverTorture(t *testing.T, be toBackend, length time.Duration) {
	dir := t.TempDir()
	tt := &takeoverTorture{t: t, be: be, dir: dir, runs: map[string]*toRun{}, faults: map[string]int{},
		covered: map[string]bool{}, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 22))}
	tt.job = filepath.Join(dir, "job.sh")
	if err := os.WriteFile(tt.job, []byte(takeoverJob), 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("takeover%d-%s:", os.Getpid(), be.name)
	for h := range toHosts {
		locks := filepath.Join(dir, fmt.Sprintf("locks%d", h))
		if be.shared {
			locks = filepath.Join(dir, "locks")
		}
		env := append(inheritedEnv(),
			"CRONLOCK_HISTORY="+filepath.Join(dir, fmt.Sprintf("host%d.db", h)),
			"CRONLOCK_LOCK_DIR="+locks,
			"CRONLOCK_CONFIG="+os.DevNull,
			"CRONLOCK_PREFIX="+prefix,
			fmt.Sprintf("CRONLOCK_NODE=host%d", h),
			"GORACE=atexit_sleep_ms=0",
		)
		tt.hostEnv = append(tt.hostEnv, append(env, be.env(h)...))
	}
	tt.start = time.Now()
	tt.deadline = tt.start.Add(length)
	// The first tick is a whole minute ahead of the wall clock, so that no tick of the
	// torture is the one of the minute it runs in.
	base := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	rounds := 0
	for ; time.Now().Before(tt.deadline); rounds++ {
		tt.round(rounds, base.Add(time.Duration(rounds)*time.Minute))
	}
	t.Logf("%s: %d ticks in %v", be.name, rounds, time.Since(tt.start).Round(time.Millisecond))
	tt.check()
}

// round runs one tick: every host starts its run of the line a moment apart, and the
// nemesis takes up to two holders away while a standby waits.
func (tt *takeoverTorture) round(n int, tick time.Time) {
	off := tick.Add(2 * time.Second).Sub(time.Now())
	key := tick.Format(time.RFC3339)
	var runs []*toRun
	hosts := tt.rnd.Perm(toHosts)
	for i, h := range hosts {
		if i > 0 {
			time.Sleep(time.Duration(30+tt.rnd.IntN(150)) * time.Millisecond)
		}
		runs = append(runs, tt.launch(n, h, tick, off))
	}
	tt.mu.Lock()
	tt.covered[key] = true
	tt.mu.Unlock()
	nf := 0
	switch x := tt.rnd.IntN(10); {
	case x >= 8:
		nf = 2
	case x >= 2:
		nf = 1
	}
	for range nf {
		if !tt.fault(key, runs) {
			break
		}
	}
	for _, r := range runs {
		tt.await(r)
	}
}

// launch starts host h's run of the tick.
func (tt *takeoverTorture) launch(n, h int, tick time.Time, off time.Duration) *toRun {
	r := &toRun{id: fmt.Sprintf("t%d-h%d", n, h), host: h, tick: tick}
	args := []string{"run", "-v", "-k", "bill", "--ttl", toTTL.String(), "--grace", toGrace.String(),
		"--schedule", "* * * * *", "--tz", "UTC", "--standby", "--standbys", strconv.Itoa(toStandbys),
		"--max-attempts", "5", "--conflict-exit-code", strconv.Itoa(toConflict)}
	args = append(append(args, tt.be.flags...), "--", "/bin/sh", tt.job, tt.dir, r.id, strconv.Itoa(toSteps), toNap, cronlockBin)
	r.cmd = exec.Command(cronlockBin, args...)
	r.cmd.Env = append(append([]string(nil), tt.hostEnv[h]...), "CRONLOCK_TEST_CLOCK_OFFSET="+off.String())
	r.cmd.Dir = tt.dir
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		tt.t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		tt.t.Fatal(err)
	}
	tt.mu.Lock()
	tt.runs[r.id] = r
	tt.order = append(tt.order, r)
	tt.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			r.mu.Lock()
			r.stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "waiting as a standby") {
				r.standby = true
			}
			r.mu.Unlock()
		}
		err := r.cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -2
		}
		r.mu.Lock()
		r.done, r.code, r.exit = true, code, time.Now().UnixNano()
		r.mu.Unlock()
	}()
	return r
}

// await waits for r's end; a run past toHung is hung: the test fails and kills it.
func (tt *takeoverTorture) await(r *toRun) {
	for dl := time.Now().Add(toHung); ; time.Sleep(20 * time.Millisecond) {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(dl) {
			signalTree(processTree(r.cmd.Process.Pid), syscall.SIGCONT)
			signalTree(processTree(r.cmd.Process.Pid), syscall.SIGKILL)
			r.mu.Lock()
			tt.fail("%s hung: still running after %v; stderr %q", r.id, toHung, r.stderr.String())
			r.mu.Unlock()
		}
	}
}

// readEvents parses the referee log; a malformed line fails the test (once).
func (tt *takeoverTorture) readEvents(report bool) []toEvent {
	b, err := os.ReadFile(filepath.Join(tt.dir, "referee.log"))
	if err != nil {
		return nil
	}
	var evs []toEvent
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		var e toEvent
		var e1, e2, e3, e4 error
		if len(f) == 9 {
			e.kind, e.tick, e.runID, e.inv, e.value = f[0], f[3], f[6], f[7], f[8]
			e.t1, e1 = strconv.ParseInt(f[1], 10, 64)
			e.t2, e2 = strconv.ParseInt(f[2], 10, 64)
			e.attempt, e3 = strconv.Atoi(f[4])
			e.token, e4 = strconv.ParseUint(f[5], 10, 64)
		}
		if len(f) != 9 || e1 != nil || e2 != nil || e3 != nil || e4 != nil {
			if report {
				tt.fail("referee log: malformed line %q (a torn write, or a job without its variables)", line)
			}
			continue
		}
		evs = append(evs, e)
	}
	return evs
}

// holder is the run of the tick whose job runs now (its first line logged, no end, its
// cronlock not over), and how many checkpoints it saved.
func (tt *takeoverTorture) holder(tick string) (*toRun, int) {
	var cur *toRun
	var tok uint64
	saves := map[string]int{}
	ended := map[string]bool{}
	for _, e := range tt.readEvents(false) {
		if e.tick != tick {
			continue
		}
		switch e.kind {
		case "ckpt":
			saves[e.inv]++
		case "end", "refused", "amb", "loaderr", "saveerr":
			ended[e.inv] = true
		}
		if e.token >= tok {
			tt.mu.Lock()
			cur, tok = tt.runs[e.inv], e.token
			tt.mu.Unlock()
		}
	}
	if cur == nil || ended[cur.id] {
		return nil, 0
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.done || cur.killedAt != 0 || len(cur.frozen) > 0 || cur.cutFrom != 0 {
		return nil, 0
	}
	return cur, saves[cur.id]
}

// fault waits for the tick's holder (with a standby waiting beside it) and takes it away.
// It reports false when there was no holder to take (the tick ran to its end first).
func (tt *takeoverTorture) fault(tick string, runs []*toRun) bool {
	want := tt.rnd.IntN(toSteps - 1) // checkpoints the holder saved first
	var h *toRun
	for dl := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(dl) {
			return false
		}
		cur, saved := tt.holder(tick)
		if cur == nil {
			if allDone(runs) {
				return false
			}
			continue
		}
		if saved >= want && tt.standbyWaits(runs, cur) {
			h = cur
			break
		}
		if saved >= want && time.Now().After(dl.Add(-15*time.Second)) {
			// No standby came (each found the tick run and its slots taken, or ended):
			// a fault now would leave the tick to no one; the tick counts as uncovered.
			tt.mu.Lock()
			tt.covered[tick] = false
			tt.mu.Unlock()
			return false
		}
	}
	kinds := []string{"kill", "kill", "freeze", "freeze-short", "freeze-cronlock"}
	if tt.be.cut != nil && (tt.be.ready == nil || tt.be.ready()) {
		kinds = append(kinds, "partition", "partition")
	}
	kind := kinds[tt.rnd.IntN(len(kinds))]
	tt.mu.Lock()
	tt.faults[kind]++
	tt.mu.Unlock()
	h.mu.Lock()
	h.lastFault = kind
	h.mu.Unlock()
	switch kind {
	case "kill":
		// Frozen first, so that no process of the tree forks away from the kill.
		tree := freezeTree(h.cmd.Process.Pid)
		h.mu.Lock()
		h.killedAt = time.Now().UnixNano()
		h.mu.Unlock()
		signalTree(tree, syscall.SIGKILL)
	case "freeze", "freeze-short":
		d := time.Duration(float64(toTTL) * (0.2 + 0.3*tt.rnd.Float64()))
		if kind == "freeze" {
			d = toTTL + time.Duration(300+tt.rnd.IntN(2700))*time.Millisecond
		}
		from := time.Now().UnixNano()
		tree := freezeTree(h.cmd.Process.Pid)
		h.mu.Lock()
		h.frozen = append(h.frozen, span{from, 0})
		h.mu.Unlock()
		time.Sleep(d)
		signalTree(tree, syscall.SIGCONT)
		h.mu.Lock()
		h.frozen[len(h.frozen)-1].to = time.Now().UnixNano()
		h.mu.Unlock()
	case "freeze-cronlock":
		// cronlock alone (a pause of cronlock, not of its host): its job runs on, and its
		// saves wait for the frozen run, which refuses them on waking (the lease is over).
		d := toTTL + time.Duration(300+tt.rnd.IntN(2700))*time.Millisecond
		h.mu.Lock()
		h.frozen = append(h.frozen, span{time.Now().UnixNano(), 0})
		h.mu.Unlock()
		h.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(d)
		h.cmd.Process.Signal(syscall.SIGCONT)
		h.mu.Lock()
		h.frozen[len(h.frozen)-1].to = time.Now().UnixNano()
		h.mu.Unlock()
	case "partition":
		d := toTTL + time.Duration(1000+tt.rnd.IntN(2000))*time.Millisecond
		h.mu.Lock()
		h.cutFrom = time.Now().UnixNano()
		h.mu.Unlock()
		pids := func() []int { return processTree(h.cmd.Process.Pid) }
		tt.be.cut(h.host, pids, true)
		time.Sleep(d)
		tt.be.cut(h.host, pids, false)
		h.mu.Lock()
		h.cutTo = time.Now().UnixNano()
		h.mu.Unlock()
	}
	return true
}

func allDone(runs []*toRun) bool {
	for _, r := range runs {
		r.mu.Lock()
		d := r.done
		r.mu.Unlock()
		if !d {
			return false
		}
	}
	return true
}

// standbyWaits reports whether a run of the tick other than h waits as a standby.
func (tt *takeoverTorture) standbyWaits(runs []*toRun, h *toRun) bool {
	for _, r := range runs {
		if r == h {
			continue
		}
		r.mu.Lock()
		ok := r.standby && !r.done && r.killedAt == 0
		r.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// freezeTree stops pid and its descendants, again until no new one appears (a process
// forked meanwhile), and returns them.
func freezeTree(pid int) []int {
	seen := map[int]bool{}
	var all []int
	for range 10 {
		fresh := false
		for _, p := range processTree(pid) {
			if !seen[p] {
				seen[p], fresh = true, true
				all = append(all, p)
				syscall.Kill(p, syscall.SIGSTOP)
			}
		}
		if !fresh {
			break
		}
	}
	return all
}

// toTick is what the referee knows of one tick.
type toTick struct {
	tick   string
	runs   []*toRun
	events []toEvent
}

func (tt *takeoverTorture) check() {
	t := tt.t
	evs := tt.readEvents(true)
	ticks := map[string]*toTick{}
	var names []string
	for _, r := range tt.order {
		k := r.tick.Format(time.RFC3339)
		if ticks[k] == nil {
			ticks[k] = &toTick{tick: k}
			names = append(names, k)
		}
		ticks[k].runs = append(ticks[k].runs, r)
	}
	for _, e := range evs {
		tk := ticks[e.tick]
		r := tt.runs[e.inv]
		if tk == nil || r == nil || r.tick.Format(time.RFC3339) != e.tick {
			tt.fail("referee log: event %+v of no run of its tick", e)
			continue
		}
		tk.events = append(tk.events, e)
	}
	sort.Strings(names)
	var sum struct{ ticks, completed, exact, bodies, overlaps, allowed, stale, refused, resumes, resumedOK, takeovers, uncovered int }
	codes := map[int]int{}
	for _, name := range names {
		tk := ticks[name]
		c := tt.checkTick(tk)
		sum.ticks++
		sum.completed += c.completed
		if c.completed == 1 {
			sum.exact++
		}
		sum.bodies += c.bodies
		sum.overlaps += c.overlaps
		sum.allowed += c.allowed
		sum.stale += c.stale
		sum.refused += c.refused
		sum.resumes += c.resumes
		sum.resumedOK += c.resumedOK
		sum.takeovers += c.takeovers
		tt.mu.Lock()
		covered := tt.covered[name]
		tt.mu.Unlock()
		if !covered {
			sum.uncovered++
		}
		if (covered && c.completed != 1) || c.completed > 1 {
			tt.fail("tick %s: completed %d times (want exactly 1: every fault found a standby waiting %v); runs %s", name, c.completed, covered, tt.describe(tk))
		}
		if c.bodies < 1 {
			tt.fail("tick %s: no job body started; runs %s", name, tt.describe(tk))
		}
		for _, r := range tk.runs {
			codes[r.code]++
		}
	}
	var lat []time.Duration
	tt.mu.Lock()
	lat = append(lat, tt.latencies...)
	faults := sortedCounts(tt.faults)
	errs := tt.errs
	tt.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Millisecond)
	}
	codeNames := map[string]int{}
	for c, n := range codes {
		codeNames[strconv.Itoa(c)] = n
	}
	t.Logf("takeover torture %s: ticks %d, completed exactly once %d (uncovered %d), job bodies started %d, takeovers %d, overlaps beyond the fail-closed bounds %d (within them: %d), stale saves accepted %d (refused %d), resumes from the last accepted checkpoint %d of %d",
		tt.be.name, sum.ticks, sum.exact, sum.uncovered, sum.bodies, sum.takeovers, sum.overlaps, sum.allowed, sum.stale, sum.refused, sum.resumedOK, sum.resumes)
	t.Logf("takeover torture %s: faults %s; exit codes %s; SIGKILL to the next job's start p50 %v p99 %v max %v over %d",
		tt.be.name, faults, sortedCounts(codeNames), pct(0.5), pct(0.99), pct(1), len(lat))
	for _, e := range errs {
		t.Error(e)
	}
	if sum.takeovers == 0 {
		t.Error("no tick was ever taken over: the torture tested nothing")
	}
}

// toCounts are the referee's counts of one tick.
type toCounts struct {
	completed, bodies, overlaps, allowed, stale, refused, resumes, resumedOK, takeovers int
}

// describe is the tick's runs for a failure message.
func (tt *takeoverTorture) describe(tk *toTick) string {
	var b strings.Builder
	for _, r := range tk.runs {
		r.mu.Lock()
		fmt.Fprintf(&b, "[%s exit %d fault %q stderr %q] ", r.id, r.code, r.lastFault, r.stderr.String())
		r.mu.Unlock()
	}
	for _, e := range tk.events {
		fmt.Fprintf(&b, "\n  %s +%v %s attempt %d token %d %s", e.kind, tt.since(e.t1), e.inv, e.attempt, e.token, e.value)
	}
	return b.String()
}

func (tt *takeoverTorture) since(ns int64) time.Duration {
	return time.Duration(ns - tt.start.UnixNano()).Round(time.Millisecond)
}

func (tt *takeoverTorture) checkTick(tk *toTick) toCounts {
	var c toCounts
	type job struct {
		r          *toRun
		token      uint64
		attempt    int
		first      int64 // T1 of its first line (its run held the lock by then)
		ovl        *toEvent
		ovx        int64
		start      *toEvent
		end        bool
		ckpts      []toEvent
		tries      map[string]bool
		settled    map[string]bool // a try that ended: ckpt or refused
		refusedVal map[string]bool
	}
	jobs := map[string]*job{}
	var order []*job
	for i := range tk.events {
		e := tk.events[i]
		j := jobs[e.inv]
		if j == nil {
			j = &job{r: tt.runs[e.inv], token: e.token, attempt: e.attempt, first: e.t1,
				tries: map[string]bool{}, settled: map[string]bool{}, refusedVal: map[string]bool{}}
			jobs[e.inv] = j
			order = append(order, j)
		} else if j.token != e.token || j.attempt != e.attempt {
			tt.fail("tick %s: %s changed token or attempt: %+v", tk.tick, e.inv, e)
		}
		switch e.kind {
		case "ovl":
			j.ovl = &e
		case "ovx":
			j.ovx = e.t1
		case "start":
			j.start = &e
		case "try":
			j.tries[e.value] = true
		case "ckpt":
			j.ckpts = append(j.ckpts, e)
			j.settled[e.value] = true
		case "refused":
			c.refused++
			j.settled[e.value] = true
			j.refusedVal[e.value] = true
		case "end":
			j.end = true
		}
	}
	sort.Slice(order, func(a, b int) bool { return order[a].token < order[b].token })
	// Attempts rise with the fencing token, and only the first attempt is 1.
	for i, j := range order {
		if j.start != nil {
			c.bodies++
		}
		if i > 0 && j.attempt <= order[i-1].attempt {
			tt.fail("tick %s: %s has attempt %d with token %d, after %s's attempt %d with token %d",
				tk.tick, j.r.id, j.attempt, j.token, order[i-1].r.id, order[i-1].attempt, order[i-1].token)
		}
		if j.attempt > 1 {
			c.takeovers++
		}
	}
	for _, r := range tk.runs {
		r.mu.Lock()
		code, killed := r.code, r.killedAt
		r.mu.Unlock()
		if code == 0 {
			if j := jobs[r.id]; j == nil || !j.end {
				tt.fail("tick %s: %s exited 0 but its job did not complete", tk.tick, r.id)
			}
			c.completed++
		}
		// A takeover's latency: the holder's SIGKILL to the first line of the next job.
		if j := jobs[r.id]; killed != 0 && j != nil {
			for _, n := range order {
				if n.token > j.token {
					tt.mu.Lock()
					tt.latencies = append(tt.latencies, time.Duration(n.first-killed))
					tt.mu.Unlock()
					break
				}
			}
		}
	}
	// Stale saves: a save sent after a job of a larger token had started, that returned 0.
	for _, j := range order {
		for _, s := range j.ckpts {
			for _, n := range order {
				if n.token > j.token && s.t1 > n.first {
					c.stale++
					tt.fail("tick %s: STALE SAVE accepted: %s (token %d) saved %s at +%v, after %s (token %d) started its job at +%v",
						tk.tick, j.r.id, j.token, s.value, tt.since(s.t1), n.r.id, n.token, tt.since(n.first))
				}
			}
		}
	}
	// Resumes: the loaded checkpoint is the last accepted one of the earlier jobs, or one
	// whose save was in flight when its saver died; the first attempt loads nothing.
	for i, j := range order {
		if j.start == nil {
			continue
		}
		accepted := 0
		maybe := map[string]bool{}
		for _, p := range order[:i] {
			for _, s := range p.ckpts {
				if v, _ := strconv.Atoi(s.value); v > accepted {
					accepted = v
				}
			}
			for v := range p.tries {
				if !p.settled[v] {
					maybe[v] = true
				}
			}
		}
		got := j.start.value
		want := "-"
		if accepted > 0 {
			want = strconv.Itoa(accepted)
		}
		if i > 0 {
			c.resumes++
		}
		gv, _ := strconv.Atoi(got)
		ok := got == want || (maybe[got] && gv > accepted)
		if !ok {
			tt.fail("tick %s: %s (attempt %d) loaded %q; the last accepted checkpoint before it was %q (in flight: %v); runs %s",
				tk.tick, j.r.id, j.attempt, got, want, maybe, tt.describe(tk))
		} else if i > 0 {
			c.resumedOK++
		}
	}
	// Overlaps: a job that found the flock taken. Its window ends when it got the flock
	// (ovx), else when its cronlock ended (its job, which never logged ovx, was dead by
	// then). Every earlier job still alive when the window began may be the flock's holder
	// (one frozen between taking the flock and logging it has no acq line), so each must
	// be explained, up to the window's end or its own cronlock's, whichever came first.
	for _, j := range order {
		if j.ovl == nil {
			continue
		}
		end := j.ovx
		if end == 0 {
			j.r.mu.Lock()
			end = j.r.exit
			j.r.mu.Unlock()
		}
		var holders []*job
		for _, p := range order {
			p.r.mu.Lock()
			exit := p.r.exit
			p.r.mu.Unlock()
			if p.token < j.token && p.first <= j.ovl.t2 && exit >= j.ovl.t1 {
				holders = append(holders, p)
			}
		}
		if len(holders) == 0 {
			c.overlaps++
			tt.fail("tick %s: %s found the flock taken, by no earlier job still alive: %s", tk.tick, j.r.id, tt.describe(tk))
			continue
		}
		explained := true
		for _, p := range holders {
			p.r.mu.Lock()
			pEnd := min(end, p.r.exit)
			p.r.mu.Unlock()
			if tt.allowedOverlap(p.r, pEnd) == "" {
				explained = false
				c.overlaps++
				tt.fail("tick %s: OVERLAP beyond the fail-closed bounds: %s (token %d) ran beside %s (token %d) from +%v to +%v; runs %s",
					tk.tick, p.r.id, p.token, j.r.id, j.token, tt.since(j.ovl.t1), tt.since(pEnd), tt.describe(tk))
			}
		}
		if explained {
			c.allowed++
		}
	}
	return c
}

// allowedOverlap says why the older run's job may still have been alive at end, or "".
// A frozen tree holds its flock while frozen and is stopped within g of its waking (its
// cronlock's deadline passed while it slept); a cut-off holder stops its job fail-closed
// before its lease ends.
func (tt *takeoverTorture) allowedOverlap(r *toRun, end int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := min(toGrace, toTTL/4)
	for _, s := range r.frozen {
		if s.from < end && end <= s.to+int64(g+toSlack) {
			return "frozen holder, stopped on waking"
		}
	}
	if r.cutFrom != 0 && end <= r.cutFrom+int64(toTTL+toSlack) {
		return "cut-off holder, stopped fail-closed"
	}
	return ""
}
