package lockrun

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GuardArg is the hidden first argument that makes cronlock's binary run GuardMain.
const GuardArg = "__guard"

// GuardExe is the executable StartGuard runs as `GuardExe __guard`. The default re-executes
// cronlock's own binary (it works even when the file was replaced by an upgrade meanwhile).
// Tests point it at, or rely on, a binary whose main calls GuardMain for "__guard".
var GuardExe = "/proc/self/exe"

// Guard is a small helper process that kills the job's process group if cronlock dies
// without saying goodbye (SIGKILL, OOM killer). A parent-death signal reaches only the
// direct child; `sh -c 'a | b'` would leave a and b running, still holding whatever the
// lock was protecting, while the lock expires and another host starts the job.
//
// The guard reads commands on a pipe whose only writer is cronlock: "arm PGID PID…" and
// "done". End-of-file before "done" means cronlock is gone; the guard then sends SIGKILL to
// the group and the pids and exits. It runs in its own process group, ignores the stop
// signals (a Ctrl-C meant for cronlock must not kill it), and holds no other descriptor of
// cronlock's (everything cronlock opens is close-on-exec).
//
// What a guard cannot catch: processes that left the job's group with setsid and were
// not yet reaped by cronlock. A nil *Guard is valid and does nothing.
type Guard struct {
	r, null *os.File // the guard's stdin and stdout/stderr, ours until the fork
	env     []string
	fork    sync.Once
	forked  chan struct{} // closed once the guard's fork and exec are over
	pid     int           // valid after forked; 0 when the guard could not be started

	mu     sync.Mutex
	w      *os.File // write end of the guard's stdin; nil after Done
	reaped bool     // Supervise's reaper collected the guard's exit status
}

// StartGuard prepares the guard. The process itself is forked by the first Arm, on a
// goroutine of its own: the child's fork does not wait for the guard's (bigger) exec, the
// guard's start-up runs beside the job, and a run that never starts a child costs no
// guard at all. Arm's command waits in the pipe until the guard reads it. A guard that
// cannot be started is reported by nothing but PID() == 0; the run goes on without it.
func StartGuard() (*Guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start guard: %w", err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start guard: %w", err)
	}
	// The guard needs no environment (and should not carry secrets such as a Redis URL);
	// GORACE only lets a race-instrumented build's guard exit without its 1 s exit delay.
	env := []string{}
	if v, ok := os.LookupEnv("GORACE"); ok {
		env = append(env, "GORACE="+v)
	}
	return &Guard{r: r, null: null, env: env, forked: make(chan struct{}), w: w}, nil
}

// start forks the guard once, in the background.
func (g *Guard) start() {
	g.fork.Do(func() {
		go func() {
			defer close(g.forked)
			defer g.r.Close()
			defer g.null.Close()
			pid, err := syscall.ForkExec(GuardExe, []string{"cronlock", GuardArg}, &syscall.ProcAttr{
				Env:   g.env,
				Files: []uintptr{g.r.Fd(), g.null.Fd(), g.null.Fd()},
				// Its own group: terminal signals for cronlock's group do not reach it, and
				// a kill of the job's group cannot hit it.
				Sys: &syscall.SysProcAttr{Setpgid: true},
			})
			if err == nil {
				g.pid = pid
			}
		}()
	})
}

// PID is the guard's process id: 0 for a nil Guard, one never armed, or one that could not
// be started. It waits for the guard's fork to finish.
func (g *Guard) PID() int {
	if g == nil {
		return 0
	}
	g.fork.Do(g.none)
	<-g.forked
	return g.pid
}

// none settles a guard that was never armed: there will be no guard process.
func (g *Guard) none() {
	g.r.Close()
	g.null.Close()
	close(g.forked)
}

// Arm tells the guard which process group (and which pids, for processes outside it) to
// kill should cronlock die. It may be called again to replace the targets.
func (g *Guard) Arm(pgid int, pids ...int) error {
	if g == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("arm ")
	b.WriteString(strconv.Itoa(pgid))
	for _, p := range pids {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(p))
	}
	b.WriteByte('\n')
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return errors.New("guard: already done")
	}
	// A raw write: EPIPE (a dead guard) must come back as an error, not as SIGPIPE.
	if err := writeAll(int(g.w.Fd()), []byte(b.String())); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	g.start()
	return nil
}

// Done dismisses the guard without it killing anything. Call it once every process of the
// job is gone, or when no job was started. It is safe to call more than once.
//
// It does not wait for the guard to exit: the guard may still be starting up (it is a whole
// cronlock process), and a run must not pay for that. The guard reads "done" whenever it gets
// there, even after cronlock has exited, and is reaped by cronlock's reaper or, once cronlock
// is gone, by init.
func (g *Guard) Done() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return
	}
	_ = writeAll(int(g.w.Fd()), []byte("done\n"))
	g.w.Close()
	g.w = nil
	g.fork.Do(g.none)
}

// markReaped records that Supervise's reaper collected the guard's exit status.
func (g *Guard) markReaped() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.reaped = true
	g.mu.Unlock()
}

// GuardMain is the guard process: cronlock's main calls it when os.Args[1] is "__guard"
// and exits with its result. It returns 0 after "done", and also after it killed the job.
func GuardMain() int {
	// Signals meant for cronlock or its terminal must not end the guard: only end-of-file
	// on stdin does.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE,
		syscall.SIGUSR1, syscall.SIGUSR2)
	// Executed as /proc/self/exe, it would show as "exe" in ps and top.
	name := []byte("cronlock-guard\x00")
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	pgid := 0
	var pids []int
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "done":
			return 0
		case "arm":
			pgid, pids = 0, nil
			for i, s := range f[1:] {
				n, err := strconv.Atoi(s)
				if err != nil || n <= 1 {
					continue
				}
				if i == 0 {
					pgid = n
				} else {
					pids = append(pids, n)
				}
			}
		}
	}
	// End-of-file (or a read error) without "done": cronlock died.
	guardKill(pgid, pids)
	// A process of the group may have been forking while the first kill went out.
	time.Sleep(20 * time.Millisecond)
	guardKill(pgid, pids)
	return 0
}

func guardKill(pgid int, pids []int) {
	if pgid > 1 {
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
}
