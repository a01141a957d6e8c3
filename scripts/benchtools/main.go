// Command benchtools is the measuring half of scripts/bench.sh: the small jobs that stamp
// the time when they start, exit or get SIGTERM, and the drivers that run cronlock many
// times around them. It is built by bench.sh only and is not part of cronlock.
//
// Every time stamp is CLOCK_MONOTONIC in nanoseconds, which all processes of the machine
// share. Samples are written one per line, in nanoseconds, to the file given with -out.
//
//	benchtools noop                         exit at once (its start-up cost is in every stamp)
//	benchtools hold                         print "start NS", read stdin to EOF, print "exit NS", exit
//	benchtools term                         print "start NS", wait for SIGTERM, print "term NS", exit
//	benchtools handoff -n N -out F [-redis ADDR -channel CH] -- CRONLOCK-ARGV...
//	    N lock hand-offs between two `CRONLOCK-ARGV... benchtools hold` runs: a waiter is
//	    started while the holder holds the lock and is let wait (and, with -redis, until it
//	    has subscribed to CH); then the holder's child exits. Sample: the waiter child's
//	    start minus the holder child's exit.
//	benchtools lockloss -n N -out F -redis ADDR -lockkey KEY -period D -- CRONLOCK-ARGV...
//	    N runs of `CRONLOCK-ARGV... benchtools term`; at a random moment of the renewal
//	    period D the lock key is deleted (DEL). Sample: the child's SIGTERM minus the DEL.
//	benchtools stamp                        print "start NS", exit
//	benchtools herd -n N -keys K -spread D -- CRONLOCK-ARGV...   (see herd.go)
//	benchtools takeover -n N -out F -- CRONLOCK-ARGV...          (see takeover.go)
//	benchtools peakrss -- ARGV...
//	    run ARGV with its stdout on a pipe this process drains, and print the peak resident
//	    set size (VmHWM, KiB) that ARGV's process reached.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func main() {
	if len(os.Args) < 2 {
		fatalf("usage: benchtools noop|hold|term|handoff|lockloss|peakrss|herd|takeover ...")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "noop":
	case "hold":
		fmt.Printf("start %d\n", mono())
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Printf("exit %d\n", mono())
	case "term":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Printf("start %d\n", mono())
		<-c
		fmt.Printf("term %d\n", mono())
	case "handoff":
		handoff(args)
	case "lockloss":
		lockloss(args)
	case "peakrss":
		peakRSS(args)
	case "stamp":
		fmt.Printf("start %d\n", mono())
	case "herd":
		herd(args)
	case "takeover":
		takeover(args)
	default:
		fatalf("unknown subcommand %q", os.Args[1])
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "benchtools: "+format+"\n", a...)
	os.Exit(2)
}

// proc is one cronlock run with its stdin and stdout on pipes.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	exit  chan error
}

func start(argv []string) *proc {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fatalf("%v", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatalf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", argv[0], err)
	}
	p := &proc{cmd: cmd, stdin: in, lines: make(chan string, 8), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exit <- cmd.Wait()
	}()
	return p
}

// stamp waits for the line "WHAT NS" from p and returns NS.
func (p *proc) stamp(what string, within time.Duration) int64 {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				fatalf("pid %d ended its output before %q", p.cmd.Process.Pid, what)
			}
			if v, found := strings.CutPrefix(l, what+" "); found {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					fatalf("bad stamp %q", l)
				}
				return n
			}
		case <-t.C:
			fatalf("no %q from pid %d within %v", what, p.cmd.Process.Pid, within)
		}
	}
}

func (p *proc) wait(within time.Duration) int {
	select {
	case err := <-p.exit:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			fatalf("%v", err)
		}
		return 0
	case <-time.After(within):
		fatalf("pid %d still running after %v", p.cmd.Process.Pid, within)
	}
	return -1
}

func writeSamples(path string, samples []int64) {
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "%d\n", s)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fatalf("%v", err)
	}
}

// resp sends one command to Redis and returns the reply line (enough for integer and
// status replies, and the first line of others).
type resp struct {
	c net.Conn
	r *bufio.Reader
}

func dialRedis(addr string) *resp {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fatalf("redis: %v", err)
	}
	return &resp{c: c, r: bufio.NewReader(c)}
}

func (r *resp) send(args ...string) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(r.c, b.String()); err != nil {
		fatalf("redis: %v", err)
	}
}

func (r *resp) line() string {
	l, err := r.r.ReadString('\n')
	if err != nil {
		fatalf("redis: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

// numsub returns PUBSUB NUMSUB's count for channel.
func (r *resp) numsub(channel string) int {
	r.send("PUBSUB", "NUMSUB", channel)
	r.line() // *2
	r.line() // $len
	r.line() // channel
	n, _ := strconv.Atoi(strings.TrimPrefix(r.line(), ":"))
	return n
}

func splitArgv(fs *flag.FlagSet, args []string) []string {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fatalf("%s: no command after --", fs.Name())
	}
	return argv
}

func handoff(args []string) {
	fs := flag.NewFlagSet("handoff", flag.ExitOnError)
	n := fs.Int("n", 200, "hand-offs")
	out := fs.String("out", "", "sample file")
	addr := fs.String("redis", "", "Redis host:port, to see the waiter subscribed")
	channel := fs.String("channel", "", "the lock's release channel")
	settle := fs.Duration("settle", 40*time.Millisecond, "time a waiter is given to start waiting")
	argv := splitArgv(fs, args)
	self, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	argv = append(argv, self, "hold")
	var rc *resp
	if *addr != "" {
		rc = dialRedis(*addr)
	}

	holder := start(argv)
	holder.stamp("start", 10*time.Second)
	samples := make([]int64, 0, *n)
	overlaps := 0
	for range *n {
		waiter := start(argv)
		time.Sleep(*settle)
		if rc != nil {
			for deadline := time.Now().Add(5 * time.Second); rc.numsub(*channel) < 1; {
				if time.Now().After(deadline) {
					fatalf("the waiter never subscribed to %s", *channel)
				}
				time.Sleep(time.Millisecond)
			}
		}
		holder.stdin.Close()
		exited := holder.stamp("exit", 10*time.Second)
		started := waiter.stamp("start", 10*time.Second)
		if started < exited {
			overlaps++ // both children ran at once: mutual exclusion broken
		}
		samples = append(samples, started-exited)
		if code := holder.wait(10 * time.Second); code != 0 {
			fatalf("holder exited %d", code)
		}
		holder = waiter
	}
	holder.stdin.Close()
	holder.wait(10 * time.Second)
	writeSamples(*out, samples)
	if overlaps > 0 {
		fatalf("%d waiters started before the holder's child exited", overlaps)
	}
}

func lockloss(args []string) {
	fs := flag.NewFlagSet("lockloss", flag.ExitOnError)
	n := fs.Int("n", 20, "trials")
	out := fs.String("out", "", "sample file")
	addr := fs.String("redis", "", "Redis host:port")
	key := fs.String("lockkey", "", "the Redis key of the lock, to DEL")
	period := fs.Duration("period", time.Second, "renewal period: the DEL falls at a random moment of one")
	argv := splitArgv(fs, args)
	self, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	argv = append(argv, self, "term")
	rc := dialRedis(*addr)
	samples := make([]int64, 0, *n)
	for range *n {
		p := start(argv)
		p.stamp("start", 10*time.Second)
		time.Sleep(*period/5 + rand.N(*period))
		t0 := mono()
		rc.send("DEL", *key)
		if got := rc.line(); got != ":1" {
			fatalf("DEL %s: %s (the lock key was not there)", *key, got)
		}
		term := p.stamp("term", 10**period)
		samples = append(samples, term-t0)
		p.stdin.Close()
		if code := p.wait(10 * time.Second); code != 125 {
			fatalf("cronlock exited %d after a lost lock, want 125", code)
		}
	}
	writeSamples(*out, samples)
}

func peakRSS(args []string) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fatalf("peakrss: no command")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatalf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		fatalf("%v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	// VmHWM only grows; the last value read before the process exits is its peak, up to
	// what the last 5 ms added.
	status := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"
	peak := 0
	for {
		b, err := os.ReadFile(status)
		if err != nil {
			break
		}
		v, ok := field(string(b), "VmHWM:")
		if !ok {
			break // a zombie: its memory is gone
		}
		peak = max(peak, v)
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Wait(); err != nil {
		fatalf("peakrss: %v", err)
	}
	fmt.Println(peak)
}

func field(status, name string) (int, bool) {
	for l := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, err := strconv.Atoi(f[0])
				return n, err == nil
			}
		}
	}
	return 0, false
}
