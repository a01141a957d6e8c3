package child

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// guardShell runs the guard's script; without it (a distroless image) the guard is
// cronlock's own binary executed again (guardSelf, RunGuard).
var guardShell = "/bin/sh"

// guardSelf is cronlock's own binary, for the guard without a shell: the link names the
// running program even after its file was replaced or removed (an upgrade mid-run).
var guardSelf = "/proc/self/exe"

// GuardArg is the argument that makes cronlock's binary the guard (IsGuard): never typed
// by a person, and shown in ps beside the cronlock-guard name.
const GuardArg = "--cronlock-guard-process"

// guardScript is the whole guard: it keeps the targets of the last "arm" line (none after
// "disarm"), exits on "done", and on end-of-file (cronlock died) kills the targets twice, 20 ms apart (a
// process of the group may have been forking while the first kill went out), then waits
// for the group to be gone: a local lock file it was given (Keep) stays locked until then. The
// numbers it reads come only from cronlock. A shell script rather than cronlock's own
// binary executed again: a shell starts for a fraction of a Go program's CPU, paid on the
// job's cores in every run. RunGuard is the same in Go, for a machine without /bin/sh.
const guardScript = `trap '' HUP INT QUIT TERM TSTP TTIN TTOU PIPE USR1 USR2
t=
while IFS= read -r line; do
	case $line in
	done) exit 0 ;;
	disarm) t= ;;
	'arm '*) t=${line#arm } ;;
	esac
done
set -- $t
[ $# -gt 0 ] || exit 0
g=$1
shift
kill -9 -"$g" "$@" 2>/dev/null
sleep 0.02
kill -9 -"$g" "$@" 2>/dev/null
while kill -0 -"$g" 2>/dev/null; do sleep 0.02; kill -9 -"$g" 2>/dev/null; done
exit 0`

// Guard is a small helper process that kills the job's process group if cronlock dies
// without saying goodbye (SIGKILL, OOM killer). A parent-death signal reaches only the
// direct child; `sh -c 'a | b'` would leave a and b running, still holding whatever the
// lock was protecting, while the lock expires and another host starts the job.
//
// The guard is a fixed /bin/sh script (guardScript; no user input reaches it but the
// numbers cronlock writes), shown as cronlock-guard in ps. It reads commands on a pipe whose
// only writer is cronlock: "arm PGID PID…" and "done". End-of-file before "done" means
// cronlock is gone; the guard then sends SIGKILL to the group and the pids and exits. It
// runs in its own process group, ignores the stop signals (a Ctrl-C meant for cronlock
// must not kill it), and holds no other descriptor of cronlock's (everything cronlock opens
// is close-on-exec).
//
// What a guard cannot catch: processes that left the job's group with setsid and were
// not yet reaped by cronlock. A nil *Guard is valid and does nothing.
type Guard struct {
	r, null *os.File // the guard's stdin and stdout/stderr, ours until the fork
	env     []string
	// onFail is told, once, why the guard process could not be started (OnStartError).
	onFail func(error)
	fork   sync.Once
	forked chan struct{} // closed once the guard's fork and exec are over
	pid    int           // valid after forked; 0 when the guard could not be started

	// keep is a descriptor the guard holds open as its fd 3 until the job's group is dead
	// (the local backend's locked file, Keep), + 1; 0 = none.
	keep int

	mu  sync.Mutex
	w   *os.File // write end of the guard's stdin; nil after Done
	wfd int      // w's descriptor, non-blocking: a guard that stopped reading never blocks cronlock
}

// maxArmLine is the longest "arm" line: a pipe write up to PIPE_BUF is atomic, so a line
// is in the pipe whole or not at all, never half of one the guard would misread.
const maxArmLine = 4096

// StartGuard prepares the guard. The process itself is forked by Prestart (or the first
// Arm), on a goroutine of its own, as the job is about to start: its fork runs beside the
// job's output set-up, and a run that never starts a child costs no guard at all. Arm's
// command waits in the pipe until the guard reads it. A guard that cannot be started is
// told to OnStartError and has PID() == 0; the run goes on without it.
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
	// The guard carries no environment of cronlock's (which may hold secrets such as a
	// Redis URL); PATH only finds sleep.
	env := []string{"PATH=/usr/bin:/bin"}
	// Fd makes the descriptor blocking once and never again: set non-blocking after it.
	wfd := int(w.Fd())
	if err := unix.SetNonblock(wfd, true); err != nil {
		r.Close()
		w.Close()
		null.Close()
		return nil, fmt.Errorf("start guard: %w", err)
	}
	return &Guard{r: r, null: null, env: env, forked: make(chan struct{}), w: w, wfd: wfd}, nil
}

// start forks the guard once, in the background.
func (g *Guard) start() {
	g.fork.Do(func() {
		go func() {
			defer close(g.forked)
			defer g.r.Close()
			defer g.null.Close()
			files := []uintptr{g.r.Fd(), g.null.Fd(), g.null.Fd()}
			if g.keep > 0 {
				files = append(files, uintptr(g.keep-1))
			}
			attr := &syscall.ProcAttr{
				Env:   g.env,
				Files: files,
				// Its own group: terminal signals for cronlock's group do not reach it, and
				// a kill of the job's group cannot hit it.
				Sys: &syscall.SysProcAttr{Setpgid: true},
			}
			path, argv := guardShell, []string{"cronlock-guard", "-c", guardScript}
			if unix.Access(guardShell, unix.X_OK) != nil {
				path, argv = guardSelf, []string{"cronlock-guard", GuardArg}
			}
			pid, err := syscall.ForkExec(path, argv, attr)
			if err == nil {
				g.pid = pid
			} else if g.onFail != nil {
				g.onFail(fmt.Errorf("%s: %w", path, err))
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

// Prestart forks the guard process now, in the background, rather than at the first Arm:
// a caller that waits for PID before starting the job has the guard running before any
// process of the job exists. Arm still tells it the targets.
func (g *Guard) Prestart() {
	if g != nil {
		g.start()
	}
}

// OnStartError has f told, from the guard's own goroutine, why its process could not be
// started, should it fail. Called before the first Arm.
func (g *Guard) OnStartError(f func(error)) {
	if g != nil {
		g.onFail = f
	}
}

// Keep gives the guard a descriptor to hold open until the job's process group is dead
// should cronlock die: the local backend's locked file, whose flock then outlives
// cronlock for as long as the job does. Called before the first Arm; later it does nothing.
func (g *Guard) Keep(fd int) {
	if g != nil && fd >= 0 {
		g.keep = fd + 1
	}
}

// Arm tells the guard which process group (and which pids, for processes outside it) to
// kill should cronlock die. It may be called again to replace the targets. It never
// blocks: when the guard has not read the earlier lines (it is stopped), or the pids do
// not fit in one line (maxArmLine), it says so with an error and arms what fits, or
// nothing; the caller tries again later.
func (g *Guard) Arm(pgid int, pids ...int) error {
	if g == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("arm ")
	b.WriteString(strconv.Itoa(pgid))
	dropped := 0
	for i, p := range pids {
		n := strconv.Itoa(p)
		if b.Len()+1+len(n)+1 > maxArmLine {
			dropped = len(pids) - i
			break
		}
		b.WriteByte(' ')
		b.WriteString(n)
	}
	b.WriteByte('\n')
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return errors.New("guard: already done")
	}
	// A raw write: EPIPE (a dead guard) must come back as an error, not as SIGPIPE.
	if err := g.write(b.String()); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	g.start()
	if dropped > 0 {
		return fmt.Errorf("guard: %d processes left out of its line", dropped)
	}
	return nil
}

// write puts line into the guard's pipe whole, or not at all (EAGAIN: the pipe is full).
func (g *Guard) write(line string) error {
	for {
		_, err := unix.Write(g.wfd, []byte(line))
		if err != unix.EINTR {
			return err
		}
	}
}

// Disarm clears the guard's targets when a job's processes are all gone, and keeps the
// guard for the next job of the run (a try of --retries): dismissing it would leave later
// tries unguarded, and a new guard per try would be taken for one of the job's processes
// by the hunt while the old one is still exiting. An error (a guard that is done, or not
// reading) is ignored: the targets it kept are gone.
func (g *Guard) Disarm() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_ = g.write("disarm\n")
	}
}

// Done dismisses the guard without it killing anything. Call it once every process of the
// job is gone, or when no job was started. It is safe to call more than once.
//
// It does not wait for the guard to exit: the guard may still be starting up, and a run
// must not pay for that. The guard reads "done" whenever it gets
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
	if g.write("done\n") == unix.EAGAIN {
		// The guard has stopped reading (someone sent it SIGSTOP): it is alive, as it
		// holds the pipe's read end, so its pid is still its own. Closing the pipe alone
		// would have it kill the targets once resumed, long after they are gone.
		g.fork.Do(g.none)
		if pid := g.PID(); pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	g.w.Close()
	g.w = nil
	g.fork.Do(g.none)
}
