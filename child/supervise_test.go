package child

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/internal/proctest"
	"cronlock/procfs"
)

// helperEnv names the role a re-executed test binary plays (see TestMain).
const helperEnv = "LOCKRUN_TEST_HELPER"

// TestMain lets the test binary stand in for cronlock: as a supervising process that a
// test can SIGKILL or give a broken stdout.
func TestMain(m *testing.M) {
	// Re-executed test binaries built with -race would otherwise linger 1 s at exit.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	switch os.Getenv(helperEnv) {
	case "":
	case "guard":
		os.Exit(helperGuarded())
	case "epipe":
		os.Exit(helperEPIPE())
	case "sigign":
		os.Exit(helperSigIgn())
	case "foreground":
		os.Exit(helperForeground())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// helperGuarded supervises `sh -c 'sleep 1000 | sleep 1000'` with a guard and prints the
// job's pgid; the test then SIGKILLs this process.
func helperGuarded() int {
	sig := NotifySignals()
	g, err := StartGuard()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res := Supervise(context.Background(), Job{
		Argv:  []string{"sh", "-c", "sleep 1000 | sleep 1000"},
		Grace: time.Second,
		Guard: g,
	}, sig, nil, func(pid int) { fmt.Printf("%d\n", pid) })
	fmt.Fprintln(os.Stderr, "supervise returned", res.Reason)
	return 3
}

// helperEPIPE relays a chatty child to a stdout whose reader is gone, without NotifySignals
// (the strictest case: no SIGPIPE handler either).
func helperEPIPE() int {
	res := Supervise(context.Background(), Job{
		Argv:    []string{"sh", "-c", `i=0; while :; do echo line$i; i=$((i+1)); done`},
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Capture: 64,
		Grace:   time.Second,
	}, nil, nil, nil)
	res.WaitOutput()
	fmt.Fprintf(os.Stderr, "exit=%d signal=%v reason=%v outerr=%v tail=%q\n", res.ExitCode, res.Signal, res.Reason, res.OutputErr, res.Output)
	return 0
}

// helperSigIgn runs a child that reports its ignored-signal mask; it is started with SIGHUP
// ignored, as `nohup` does.
func helperSigIgn() int {
	sig := NotifySignals()
	res := Supervise(context.Background(), Job{
		Argv:    []string{"grep", "^SigIgn:", "/proc/self/status"},
		Capture: 4096,
		Grace:   time.Second,
	}, sig, nil, nil)
	res.WaitOutput()
	os.Stdout.Write(res.Output)
	return 0
}

// helperForeground runs, on the terminal it was given as stdin, a child that reads the
// terminal; then it checks that the terminal came back to its own process group.
func helperForeground() int {
	sig := NotifySignals()
	res := Supervise(context.Background(), Job{
		Argv:  []string{"sh", "-c", `read x; echo "got $x"`},
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Grace: time.Second,
	}, sig, nil, nil)
	pg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	fmt.Printf("exit=%d restored=%v err=%v\n", res.ExitCode, pg == unix.Getpgrp(), err)
	return 0
}

// untilTrapped runs try with the argv of a job that ignores the signals sigs ("TERM INT")
// and sleeps. Events timed from the start can reach the shell before its trap is set on a
// loaded machine, and a job killed by such an early signal says nothing about Supervise:
// the job marks a file once the trap is set, and a run without the mark is tried again.
func untilTrapped(t *testing.T, sigs string, try func(argv []string) (Result, time.Duration)) (Result, time.Duration) {
	t.Helper()
	for i := 1; ; i++ {
		mark := filepath.Join(t.TempDir(), "trapped")
		res, d := try(sh(`trap "" `+sigs+`; touch "$1"; sleep 1000`, mark))
		if _, err := os.Stat(mark); err == nil {
			return res, d
		}
		if i == 5 {
			t.Fatalf("in %d tries the job was stopped before its shell set its trap: %+v", i, res)
		}
		t.Logf("try %d: the job was stopped before its shell set its trap; again", i)
	}
}

func writeScript(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSuperviseExitCode(t *testing.T) {
	for _, code := range []int{0, 1, 7, 255} {
		res, _ := supervise(t, Job{Argv: sh("exit " + strconv.Itoa(code)), Grace: time.Second}, nil, nil, nil)
		if !res.Started || res.Reason != ReasonExited || res.ExitCode != code || res.Signal != 0 {
			t.Errorf("exit %d: got %+v", code, res)
		}
		if res.Output != nil {
			t.Errorf("Capture 0 must give nil Output, got %q", res.Output)
		}
	}
}

func TestSuperviseNotFound(t *testing.T) {
	for _, argv0 := range []string{"cronlock-no-such-command", "/nonexistent/dir/cmd"} {
		res, _ := supervise(t, Job{Argv: []string{argv0}}, nil, nil, nil)
		var se *StartError
		if res.Started || !errors.As(res.StartErr, &se) || se.Kind != NotFound {
			t.Fatalf("%s: got %+v", argv0, res)
		}
		t.Logf("%s: %v", argv0, se)
	}
	res, _ := supervise(t, Job{Argv: []string{"cronlock-no-such-command"}}, nil, nil, nil)
	if got, want := res.StartErr.Error(), "cronlock-no-such-command: command not found"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	// PATH comes from the job's environment.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "myjob"), []byte("#!/bin/sh\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, _ = supervise(t, Job{Argv: []string{"myjob"}, Env: []string{"PATH=" + dir}}, nil, nil, nil)
	if !res.Started || res.ExitCode != 4 {
		t.Errorf("command from the job's PATH: got %+v", res)
	}
}

func TestSuperviseNotExecutable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badInterp := filepath.Join(dir, "badinterp.sh")
	if err := os.WriteFile(badInterp, []byte("#!/nonexistent/interp\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		job  Job
	}{
		{"non-executable file", Job{Argv: []string{plain}}},
		{"directory", Job{Argv: []string{dir}}},
		{"non-executable in PATH", Job{Argv: []string{"plain.sh"}, Env: []string{"PATH=" + dir}}},
		{"missing interpreter", Job{Argv: []string{badInterp}}},
		// 70 arguments of 100 kB: more than Linux takes whatever the stack limit (6 MiB).
		{"argument list too long", Job{Argv: append([]string{"true"}, slices.Repeat([]string{strings.Repeat("a", 100_000)}, 70)...)}},
	}
	for _, c := range cases {
		res, _ := supervise(t, c.job, nil, nil, nil)
		var se *StartError
		if res.Started || !errors.As(res.StartErr, &se) || se.Kind != NotExecutable {
			t.Errorf("%s: got %+v", c.name, res)
			continue
		}
		t.Logf("%s: %v", c.name, se)
	}
}

func TestSuperviseSignalDeath(t *testing.T) {
	res, _ := supervise(t, Job{Argv: sh("kill -KILL $$"), Grace: time.Second}, nil, nil, nil)
	if res.Reason != ReasonExited || res.Signal != syscall.SIGKILL || res.ExitCode != -1 {
		t.Fatalf("got %+v", res)
	}
}

var (
	realSignalsOnce sync.Once
	realSignals     *Signals
)

// TestSuperviseForwardTermToGrandchild sends a real SIGTERM to the test process, which
// NotifySignals has taken over, and checks that a grandchild in the job's group got it.
func TestSuperviseForwardTermToGrandchild(t *testing.T) {
	realSignalsOnce.Do(func() { realSignals = NotifySignals() })
	dir := t.TempDir()
	mark, ready := filepath.Join(dir, "mark"), filepath.Join(dir, "ready")
	// READY only once sleep runs: a SIGTERM that reaches the forked subshell before it
	// has reset the trap it inherited is taken by that trap and lost (dash), and the
	// sleep would then live until the grace's SIGKILL.
	inner := writeScript(t, "inner.sh", `trap 'echo got > "$MARK"; exit 0' TERM
sleep 1000 &
while [ "$(cat /proc/$!/comm 2>/dev/null)" != sleep ]; do :; done
touch "$READY"
wait
`)
	outer := writeScript(t, "outer.sh", `"$INNER" &
wait
`)
	env := append(os.Environ(), "INNER="+inner, "MARK="+mark, "READY="+ready)
	go func() {
		proctest.WaitFile(t, ready)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	res, d := supervise(t, Job{Argv: []string{outer}, Env: env, Grace: 5 * time.Second}, realSignals, nil, nil)
	if res.Reason != ReasonSignal || res.StopSignal != syscall.SIGTERM {
		t.Fatalf("got %+v", res)
	}
	b, err := os.ReadFile(mark)
	if err != nil || string(b) != "got\n" {
		t.Fatalf("the grandchild did not get SIGTERM: %q %v", b, err)
	}
	if d > 4*time.Second {
		t.Errorf("took %v: the group was not stopped by the forwarded SIGTERM", d)
	}
}

func TestSuperviseIgnoredTermGetsKilled(t *testing.T) {
	sig, c := testSignals(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	go func() {
		proctest.WaitFile(t, ready)
		c <- syscall.SIGTERM
	}()
	const grace = 300 * time.Millisecond
	res, d := supervise(t, Job{Argv: sh(`trap "" TERM; touch "$1"; sleep 1000`, ready), Grace: grace}, sig, nil, nil)
	if res.Reason != ReasonSignal || res.Signal != syscall.SIGKILL || res.StopSignal != syscall.SIGTERM {
		t.Fatalf("got %+v", res)
	}
	if d < grace {
		t.Errorf("SIGKILL came after %v, before the grace of %v", d, grace)
	}
}

func TestSuperviseTimeout(t *testing.T) {
	res, d := supervise(t, Job{Argv: sh("sleep 1000"), Timeout: 200 * time.Millisecond, Grace: time.Second}, nil, nil, nil)
	if res.Reason != ReasonTimeout || res.Signal != syscall.SIGTERM {
		t.Fatalf("got %+v", res)
	}
	if d < 200*time.Millisecond || d > 900*time.Millisecond {
		t.Errorf("took %v", d)
	}

	// A child that exits 0 on SIGTERM is still a timeout.
	res, _ = supervise(t, Job{Argv: sh(`trap 'exit 0' TERM; sleep 1000 & wait`), Timeout: 200 * time.Millisecond, Grace: time.Second}, nil, nil, nil)
	if res.Reason != ReasonTimeout || res.ExitCode != 0 || res.Signal != 0 {
		t.Fatalf("exit 0 during grace: got %+v", res)
	}

	// A child that ignores SIGTERM gets SIGKILL after the grace.
	res, d = untilTrapped(t, "TERM", func(argv []string) (Result, time.Duration) {
		return supervise(t, Job{Argv: argv, Timeout: 100 * time.Millisecond, Grace: 200 * time.Millisecond}, nil, nil, nil)
	})
	if res.Reason != ReasonTimeout || res.Signal != syscall.SIGKILL || d < 300*time.Millisecond {
		t.Fatalf("TERM ignored: got %+v after %v", res, d)
	}
}

func TestSuperviseLockLoss(t *testing.T) {
	res, d := untilTrapped(t, "TERM", func(argv []string) (Result, time.Duration) {
		loss := make(chan Stop, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			loss <- Stop{Grace: 200 * time.Millisecond, Err: errLockLost}
		}()
		return supervise(t, Job{Argv: argv, Grace: time.Hour}, nil, chanWatch{c: loss}, nil)
	})
	if res.Reason != ReasonLockLost || res.Signal != syscall.SIGKILL || !errors.Is(res.LossErr, errLockLost) {
		t.Fatalf("got %+v", res)
	}
	if d > 2*time.Second {
		t.Errorf("the loss's grace (200ms) was not used instead of Job.Grace: took %v", d)
	}

	// --on-lock-lost continue: the child finishes with its own code.
	loss := make(chan Stop, 1)
	loss <- Stop{Grace: 10 * time.Millisecond, Err: errLockLost}
	res, d = supervise(t, Job{Argv: sh("sleep 0.4; exit 3"), Grace: 10 * time.Millisecond, ContinueOnLoss: true}, nil, chanWatch{c: loss}, nil)
	if res.Reason != ReasonLockLost || res.ExitCode != 3 || res.Signal != 0 || d < 400*time.Millisecond {
		t.Fatalf("continue: got %+v after %v", res, d)
	}
}

func TestSuperviseLossChannelClosed(t *testing.T) {
	loss := make(chan Stop)
	close(loss)
	res, _ := supervise(t, Job{Argv: sh("sleep 0.1; exit 2"), Grace: time.Second}, nil, chanWatch{c: loss}, nil)
	if res.Reason != ReasonExited || res.ExitCode != 2 {
		t.Fatalf("a closed loss channel is not a loss: got %+v", res)
	}
}

// TestSuperviseEndSeenAfterLeaseRanOut: a job whose end is seen only once the lease has
// run out (cronlock was frozen, the keeper not yet awake) did not provably end inside its
// lease, so the run is a lost lock; while the lease holds, the same end is the job's own.
func TestSuperviseEndSeenAfterLeaseRanOut(t *testing.T) {
	var ranOut atomic.Bool
	w := chanWatch{c: make(chan Stop), expired: ranOut.Load}
	res, _ := supervise(t, Job{Argv: sh("exit 0"), Grace: time.Second}, nil, w, nil)
	if res.Reason != ReasonExited || res.ExitCode != 0 || res.LossErr != nil {
		t.Fatalf("the lease held: got %+v", res)
	}
	ranOut.Store(true)
	res, _ = supervise(t, Job{Argv: sh("exit 0"), Grace: time.Second}, nil, w, nil)
	if res.Reason != ReasonLockLost || res.ExitCode != 0 || res.LossErr == nil {
		t.Fatalf("the lease ran out before the end was seen: got %+v, want ReasonLockLost with the child's exit 0", res)
	}
	// With --on-lock-lost continue the verdict is the same: the exit code is the job's.
	res, _ = supervise(t, Job{Argv: sh("exit 4"), Grace: time.Second, ContinueOnLoss: true}, nil, w, nil)
	if res.Reason != ReasonLockLost || res.ExitCode != 4 {
		t.Fatalf("continue: got %+v", res)
	}
}

// TestSuperviseFirstEventDecides: of a timeout, a forwarded stop signal and a lost lock,
// whichever comes first decides the run, whatever comes during the grace that follows;
// the child's own exit decides only when it comes first.
func TestSuperviseFirstEventDecides(t *testing.T) {
	const first, second = 100 * time.Millisecond, 400 * time.Millisecond
	type event int
	const (
		timeout event = iota
		stopSignal
		lockLoss
	)
	for _, tc := range []struct {
		name   string
		events [2]event // at first and at second
		want   Reason
	}{
		{"timeout then signal", [2]event{timeout, stopSignal}, ReasonTimeout},
		{"signal then timeout", [2]event{stopSignal, timeout}, ReasonSignal},
		{"loss then timeout", [2]event{lockLoss, timeout}, ReasonLockLost},
		{"timeout then loss", [2]event{timeout, lockLoss}, ReasonTimeout},
		{"signal then loss", [2]event{stopSignal, lockLoss}, ReasonSignal},
		{"loss then signal", [2]event{lockLoss, stopSignal}, ReasonLockLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The job ignores SIGTERM and SIGINT: it lives through both events until the
			// SIGKILL at the end of the first one's grace.
			res, _ := untilTrapped(t, "TERM INT", func(argv []string) (Result, time.Duration) {
				sig, c := testSignals(t)
				loss := make(chan Stop, 1)
				job := Job{Argv: argv, Grace: time.Second}
				for i, e := range tc.events {
					at := []time.Duration{first, second}[i]
					switch e {
					case timeout:
						job.Timeout = at
					case stopSignal:
						go func() { time.Sleep(at); c <- syscall.SIGINT }()
					case lockLoss:
						go func() { time.Sleep(at); loss <- Stop{Grace: time.Second, Err: errLockLost} }()
					}
				}
				return supervise(t, job, sig, chanWatch{c: loss}, nil)
			})
			if res.Reason != tc.want || res.Signal != syscall.SIGKILL {
				t.Fatalf("got %+v; want %v, the job killed at the end of the grace", res, tc.want)
			}
			if tc.events[0] == stopSignal && res.StopSignal != syscall.SIGINT {
				t.Fatalf("StopSignal %v, want SIGINT", res.StopSignal)
			}
			if (tc.events[0] == lockLoss || tc.events[1] == lockLoss) && !errors.Is(res.LossErr, errLockLost) {
				t.Fatalf("LossErr %v: a loss, even one that did not decide, is kept", res.LossErr)
			}
		})
	}
	// The child's own exit first: later events do not change it (there is nobody left).
	res, _ := supervise(t, Job{Argv: sh("exit 3"), Timeout: time.Minute, Grace: time.Second}, nil, nil, nil)
	if res.Reason != ReasonExited || res.ExitCode != 3 {
		t.Fatalf("exit first: got %+v", res)
	}
}

func TestSuperviseUSR1Forwarded(t *testing.T) {
	sig, c := testSignals(t)
	ready := filepath.Join(t.TempDir(), "ready")
	go func() {
		proctest.WaitFile(t, ready)
		c <- syscall.SIGUSR1
	}()
	res, _ := supervise(t, Job{Argv: sh(`trap 'exit 5' USR1; touch "$1"; sleep 1000 & wait`, ready), Grace: time.Second}, sig, nil, nil)
	if res.Reason != ReasonExited || res.ExitCode != 5 {
		t.Fatalf("got %+v", res)
	}
}

// TestSuperviseSetsidLeftover: a process that left the job's group and session is found
// through the subreaper, stopped and reaped before Supervise returns.
func TestSuperviseSetsidLeftover(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := `setsid sleep 1000 & p=$!
# wait until it really is in its own session, so the group kill cannot reach it
until [ "$(cut -d' ' -f6 /proc/$p/stat)" = "$p" ]; do sleep 0.01; done
echo $p > "$1"`
	res, d := supervise(t, Job{Argv: sh(script, pidFile), Grace: 300 * time.Millisecond}, nil, nil, nil)
	if res.Reason != ReasonExited || res.ExitCode != 0 {
		t.Fatalf("got %+v", res)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("bad pid %q", b)
	}
	if !procGone(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the setsid'd leftover %d outlived the run (or was not reaped)", pid)
	}
	if d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestSuperviseLeftoverInGroup: a background process of the job that ignores SIGTERM is
// SIGKILLed after the grace, and the output relay does not wait for it.
func TestSuperviseLeftoverInGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile, ready := filepath.Join(dir, "pid"), filepath.Join(dir, "ready")
	res, d := supervise(t, Job{
		Argv: sh(`(trap "" TERM; touch "$2"; exec sleep 1000) & echo $! > "$1"
while [ ! -e "$2" ]; do sleep 0.01; done; echo hi`, pidFile, ready),
		Capture: 100, Grace: 200 * time.Millisecond,
	}, nil, nil, nil)
	if res.ExitCode != 0 || string(res.Output) != "hi\n" {
		t.Fatalf("got %+v", res)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || !procGone(pid) {
		t.Fatalf("leftover %q still there", b)
	}
	if d < 200*time.Millisecond {
		t.Errorf("the leftover ignores SIGTERM, yet the run ended after %v, before the grace", d)
	}
}

// TestOutputForeignHolderDoesNotHang: a process outside the job (here the test itself,
// through /proc/PID/fd/1) holds the output pipe open; the run ends when the job is gone.
func TestOutputForeignHolderDoesNotHang(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	var holder *os.File
	defer func() {
		if holder != nil {
			holder.Close()
		}
	}()
	holderErr := make(chan error, 1)
	started := func(pid int) {
		go func() {
			proctest.WaitFile(t, ready)
			f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/1", os.O_WRONLY, 0)
			if err == nil {
				f.WriteString("from-holder\n")
			}
			holder = f
			holderErr <- err
		}()
	}
	res, d := supervise(t, Job{Argv: sh(`echo hi; touch "$1"; sleep 0.3`, ready), Capture: 100, Grace: time.Second}, nil, nil, started)
	if err := <-holderErr; err != nil {
		t.Fatalf("open the child's stdout: %v", err)
	}
	if res.ExitCode != 0 || string(res.Output) != "hi\nfrom-holder\n" {
		t.Fatalf("got %+v", res)
	}
	if d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestOutputTailBounded: 50 MB of output, a tail of exactly the last Capture bytes, all of
// it passed on, and memory that does not grow with the output: relayed to a pipe, and
// written by the job itself to the file it was handed.
func TestOutputTailBounded(t *testing.T) {
	const total, capture = 50_000_000, 65537
	const pattern = "0123456789\n"
	want := make([]byte, capture)
	for i := range want {
		want[i] = pattern[(total-capture+i)%len(pattern)]
	}
	for _, handoff := range []bool{false, true} {
		name := map[bool]string{false: "relayed", true: "file handed off"}[handoff]
		t.Run(name, func(t *testing.T) {
			var stdout *os.File
			var k *sink
			if handoff {
				out, err := os.Create(filepath.Join(t.TempDir(), "out"))
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				stdout = out
			} else {
				k = newSink(t, "", true)
				stdout = k.w
			}
			var before, after runtimeMem
			before.read()
			res, d := supervise(t, Job{
				Argv:   sh(`yes 0123456789 | head -c ` + strconv.Itoa(total)),
				Stdout: stdout, Stderr: os.Stderr,
				Capture: capture, Grace: time.Second,
			}, nil, nil, nil)
			after.read()
			if res.ExitCode != 0 || res.OutputErr != nil {
				t.Fatalf("got %+v", res)
			}
			if !bytes.Equal(res.Output, want) {
				t.Fatalf("tail of %d bytes differs from the last %d bytes of the output", len(res.Output), capture)
			}
			var got int64
			if handoff {
				fi, _ := stdout.Stat()
				got = fi.Size()
			} else {
				_, got = k.all()
			}
			if got != total {
				t.Fatalf("passed on %d bytes, want %d", got, total)
			}
			if grew := after.total - before.total; grew > 8<<20 {
				t.Errorf("allocated %d bytes while passing on %d", grew, total)
			}
			t.Logf("50 MB in %v", d)
		})
	}
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

// TestOutputCombinedOrder: when cronlock's stdout and stderr are the same pipe, the child
// gets one pipe for both, so the interleaving is exact.
func TestOutputCombinedOrder(t *testing.T) {
	k := newSink(t, "", false)
	script := `readlink /proc/$$/fd/1 /proc/$$/fd/2
i=0; while [ $i -lt 300 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`
	res, _ := supervise(t, Job{Argv: sh(script), Stdout: k.w, Stderr: k.w, Capture: 1 << 20, Grace: time.Second}, nil, nil, nil)
	var want strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
	}
	lines := strings.SplitN(string(res.Output), "\n", 3)
	if len(lines) < 3 || lines[0] != lines[1] || !strings.HasPrefix(lines[0], "pipe:") {
		t.Fatalf("stdout and stderr are not one pipe: %q", lines[:min(2, len(lines))])
	}
	if lines[2] != want.String() {
		t.Fatalf("order not kept in the tail")
	}
	if logged, _ := k.all(); !bytes.Equal(logged, res.Output) {
		t.Fatalf("relayed output differs from the tail")
	}

	// Different pipes: two relays, and both streams still reach their pipe and the tail.
	ko, ke := newSink(t, "", false), newSink(t, "", false)
	res, _ = supervise(t, Job{Argv: sh(`echo o; echo e >&2`), Stdout: ko.w, Stderr: ke.w, Capture: 100, Grace: time.Second}, nil, nil, nil)
	o, _ := ko.all()
	e, _ := ke.all()
	if string(o) != "o\n" || string(e) != "e\n" || len(res.Output) != 4 {
		t.Fatalf("separate pipes: out %q err %q tail %q", o, e, res.Output)
	}
}

// TestOutputStreams: with stdout and stderr on different pipes, the tail marks which
// stream each byte came from, in arrival order; on one file it is left unmarked.
func TestOutputStreams(t *testing.T) {
	dir := t.TempDir()
	mo, me := filepath.Join(dir, "out-arrived"), filepath.Join(dir, "err-arrived")
	ko, ke := newSink(t, mo, false), newSink(t, me, false)
	// Each write waits until the one before has reached cronlock's own pipe, and so the
	// tail: the order across the two pipes is then certain.
	script := `printf a; while [ ! -e "$1" ]; do sleep 0.01; done
printf b >&2; while [ ! -e "$2" ]; do sleep 0.01; done
printf 'c\n'`
	res, _ := supervise(t, Job{Argv: sh(script, mo, me), Stdout: ko.w, Stderr: ke.w, Capture: 100, Grace: time.Second}, nil, nil, nil)
	if res.ExitCode != 0 || string(res.Output) != "abc\n" {
		t.Fatalf("exit %d, output %q", res.ExitCode, res.Output)
	}
	want := []Segment{{StreamStdout, 1}, {StreamStderr, 1}, {StreamStdout, 2}}
	if !slices.Equal(res.Streams, want) {
		t.Fatalf("streams %v, want %v", res.Streams, want)
	}

	// One file for both: handed to the job, order kept, no marks.
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	res, _ = supervise(t, Job{Argv: sh(`printf a; printf b >&2`), Stdout: out, Stderr: out, Capture: 100, Grace: time.Second}, nil, nil, nil)
	if string(res.Output) != "ab" || res.Streams != nil {
		t.Fatalf("shared file: output %q, streams %v", res.Output, res.Streams)
	}
	// No capture: nothing kept, nothing marked.
	res, _ = supervise(t, Job{Argv: sh(`printf a; printf b >&2`), Stdout: out, Stderr: ke.w, Grace: time.Second}, nil, nil, nil)
	if res.Output != nil || res.Streams != nil {
		t.Fatalf("no capture: output %q, streams %v", res.Output, res.Streams)
	}
}

// TestOutputEPIPE: cronlock's own stdout is a pipe nobody reads. The job meets that as it
// would without cronlock: its next write fails and it dies of SIGPIPE, which is its own
// end, not an output error; the supervising process lives on.
func TestOutputEPIPE(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=epipe")
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	if err != nil {
		t.Fatalf("supervising process failed (a job that never learnt of the broken pipe runs until killed): %v; stderr: %s", err, stderr.String())
	}
	s := stderr.String()
	if !strings.Contains(s, "exit=-1 signal=broken pipe reason=exited outerr=<nil>") {
		t.Fatalf("stderr: %s", s)
	}
}

// TestSuperviseIgnoredSignalsStayIgnored: started like `nohup`, with SIGHUP ignored, the
// child inherits SIG_IGN for SIGHUP (and only that).
func TestSuperviseIgnoredSignalsStayIgnored(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" HUP; exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=sigign")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("output %q", out)
	}
	mask, err := strconv.ParseUint(f[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	bit := func(s syscall.Signal) bool { return mask&(1<<(uint(s)-1)) != 0 }
	if !bit(syscall.SIGHUP) {
		t.Errorf("SIGHUP not ignored in the child: SigIgn %s", f[1])
	}
	if bit(syscall.SIGTERM) || bit(syscall.SIGINT) || bit(syscall.SIGPIPE) {
		t.Errorf("the child ignores signals cronlock only caught: SigIgn %s", f[1])
	}
}

// TestGuardKillsGroupWhenSupervisorDies: SIGKILL the supervising process; the guard kills
// both sleeps of `sh -c 'sleep 1000 | sleep 1000'`, which a parent-death signal would miss.
func TestGuardKillsGroupWhenSupervisorDies(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=guard")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("read pgid: %v", err)
	}
	pgid, _ := strconv.Atoi(strings.TrimSpace(line))
	var sleeps []int
	for deadline := time.Now().Add(5 * time.Second); len(sleeps) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		sleeps = groupMembers(pgid, "sleep")
	}
	if len(sleeps) < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("pipeline of group %d not seen: %v", pgid, sleeps)
	}
	cmd.Process.Kill()
	cmd.Wait()
	defer func() {
		for _, p := range sleeps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		reapAbandoned()
	}()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if proctest.Dead(sleeps[0]) && proctest.Dead(sleeps[1]) {
			return
		}
	}
	t.Fatalf("sleeps %v outlived the SIGKILLed supervisor", sleeps)
}

// reapAbandoned reaps orphans (the test process is a subreaper) so they do not linger as
// zombies of the test binary.
func reapAbandoned() {
	time.Sleep(50 * time.Millisecond)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// groupMembers lists the live processes of process group pgid whose command is comm.
func groupMembers(pgid int, comm string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.Comm == comm && st.State != 'Z' && st.PGRP == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestGuardDoneAndDeath: "done" dismisses the guard without killing; losing cronlock (the
// pipe's writer) makes it kill the armed group.
func TestGuardDoneAndDeath(t *testing.T) {
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	victim := start()
	defer func() { victim.Process.Kill(); victim.Wait() }()
	g, err := StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Arm(victim.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.Done()
	g.Done() // idempotent
	time.Sleep(50 * time.Millisecond)
	if err := syscall.Kill(victim.Process.Pid, 0); err != nil {
		t.Fatalf("Done killed the group: %v", err)
	}

	g2, err := StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Arm(victim.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g2.w.Close() // what cronlock's death looks like to the guard
	werr := make(chan error, 1)
	go func() { werr <- victim.Wait() }()
	select {
	case err := <-werr:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("victim ended with %v, want SIGKILL", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the guard did not kill the group")
	}
	var ws unix.WaitStatus
	_, _ = unix.Wait4(g2.PID(), &ws, 0, nil)
}

// TestSuperviseForeground: on a terminal, a child that reads it must not stop on SIGTTIN,
// and cronlock's group gets the terminal back afterwards.
func TestSuperviseForeground(t *testing.T) {
	m, pts := proctest.OpenPTY(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=foreground")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	// A new session with the pty as its controlling terminal, the helper's group in front.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	var out bytes.Buffer
	buf := make([]byte, 4096)
	wrote := false
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "restored=") && time.Now().Before(deadline) {
		if !wrote {
			// The child is reading by now or soon; the tty queues the line for it.
			time.Sleep(100 * time.Millisecond)
			m.Write([]byte("hello\n"))
			wrote = true
		}
		m.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		k, _ := m.Read(buf)
		out.Write(buf[:k])
	}
	s := out.String()
	if !strings.Contains(s, "got hello") || !strings.Contains(s, "exit=0 restored=true") {
		t.Fatalf("terminal shows %q", s)
	}
}
