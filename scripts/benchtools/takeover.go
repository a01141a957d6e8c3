package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// takeover measures standby takeover: N times, on a fresh key each (a fresh tick), a
// holder `CRONLOCK-ARGV -k KEY -- benchtools hold` runs its job, a standby
// `CRONLOCK-ARGV -v -k KEY -- benchtools stamp` starts and says it waits as a standby,
// and then, at a random moment of the renewal period (-period), the holder's host is
// lost: its cronlock and every process under it are stopped (so that none forks away)
// and SIGKILLed. Sample: the standby child's start
// minus the kill. CRONLOCK-ARGV must carry --schedule '* * * * *' and --standby, and a
// TTL of a few seconds: no trial starts in a minute's last 10 s. A standby that ends
// without waiting (the holder's tick was the minute before) is not a sample: the trial is
// run again on a new key.
//
//	benchtools takeover -n N -out F -- CRONLOCK-ARGV...
func takeover(args []string) {
	fs := flag.NewFlagSet("takeover", flag.ExitOnError)
	n := fs.Int("n", 50, "takeovers")
	out := fs.String("out", "", "sample file")
	period := fs.Duration("period", 0, "renewal period (ttl/3): the host dies at a random moment of one")
	argv := splitArgv(fs, args)
	self, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	samples := make([]int64, 0, *n)
	for trial := 0; len(samples) < *n; trial++ {
		if trial > *n+10 {
			fatalf("only %d takeovers in %d trials", len(samples), trial)
		}
		// A trial needs TTL + 1 s or so inside one minute (its tick, `* * * * *`): a
		// standby never outlives its tick.
		if now := time.Now(); now.Sub(now.Truncate(time.Minute)) > 50*time.Second {
			time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
		}
		key := fmt.Sprintf("takeover-%d-%d", os.Getpid(), trial)
		holder := start(append(append(argv, "-k", key, "--"), self, "hold"))
		holder.stamp("start", 10*time.Second)
		sb, waiting := startStandby(append(append(argv, "-v", "-k", key, "--"), self, "stamp"))
		if !waiting {
			holder.stdin.Close()
			holder.wait(30 * time.Second)
			sb.wait(30 * time.Second)
			continue
		}
		if *period > 0 {
			time.Sleep(rand.N(*period))
		}
		tree := stopTree(holder.cmd.Process.Pid)
		t0 := mono()
		for _, p := range tree {
			syscall.Kill(p, syscall.SIGKILL)
		}
		started := sb.stampOr("start", 30*time.Second)
		samples = append(samples, started-t0)
		holder.wait(10 * time.Second)
		if code := sb.wait(10 * time.Second); code != 0 {
			fatalf("the standby exited %d", code)
		}
	}
	writeSamples(*out, samples)
}

// startStandby starts argv with its stderr read here, and returns once it says it waits
// as a standby (true) or ended its stderr without (false).
func startStandby(argv []string) (*standby, bool) {
	cmd := exec.Command(argv[0], argv[1:]...)
	errp, err := cmd.StderrPipe()
	if err != nil {
		fatalf("%v", err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		fatalf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", argv[0], err)
	}
	p := &standby{proc: proc{cmd: cmd, lines: make(chan string, 8), exit: make(chan error, 1)}}
	sc := bufio.NewScanner(errp)
	waiting := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "waiting as a standby") {
			waiting = true
			break
		}
		fmt.Fprintln(os.Stderr, sc.Text())
	}
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for sc.Scan() {
			p.mu.Lock()
			p.buf.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	p.errsDone = errsDone
	go func() {
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exit <- cmd.Wait()
	}()
	return p, waiting
}

// standby is a standby's run: its stdout's stamps, and its stderr after it said it waits.
type standby struct {
	proc
	mu       sync.Mutex
	buf      strings.Builder
	errsDone chan struct{}
}

// stampOr is stamp, but a standby that ends without its job's stamp is a failed takeover:
// the driver stops, with what the standby said.
func (p *standby) stampOr(what string, within time.Duration) int64 {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.errsDone
				p.mu.Lock()
				defer p.mu.Unlock()
				fatalf("the standby (pid %d) ended without taking over: %s", p.cmd.Process.Pid, p.buf.String())
			}
			if v, found := strings.CutPrefix(l, what+" "); found {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					fatalf("bad stamp %q", l)
				}
				return n
			}
		case <-t.C:
			fatalf("no %q from the standby (pid %d) within %v", what, p.cmd.Process.Pid, within)
		}
	}
}

// stopTree SIGSTOPs pid and every process under it, again until no new one appears, and
// returns them.
func stopTree(pid int) []int {
	seen := map[int]bool{}
	var all []int
	for range 10 {
		fresh := false
		for _, p := range descendants(pid) {
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

// descendants is pid and every process below it, from /proc's parent links.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 {
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		for p, pp := range parent {
			if pp == tree[i] {
				tree = append(tree, p)
			}
		}
	}
	return tree
}
