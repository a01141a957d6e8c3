package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// takeover measures standby takeover: N times, on a fresh key each (a fresh tick), a
// holder `CRONLOCK-ARGV -k KEY -- benchtools hold` runs its job, a standby
// `CRONLOCK-ARGV -v -k KEY -- benchtools stamp` starts and says it waits as a standby,
// and then the holder's host is lost: its cronlock and every process under it are
// stopped (so that none forks away) and SIGKILLed. Sample: the standby child's start
// minus the kill. CRONLOCK-ARGV must carry --schedule and --standby. A standby that ends
// without waiting (the holder's tick was the minute before) is not a sample: the trial is
// run again on a new key.
//
//	benchtools takeover -n N -out F -- CRONLOCK-ARGV...
func takeover(args []string) {
	fs := flag.NewFlagSet("takeover", flag.ExitOnError)
	n := fs.Int("n", 50, "takeovers")
	out := fs.String("out", "", "sample file")
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
		tree := stopTree(holder.cmd.Process.Pid)
		t0 := mono()
		for _, p := range tree {
			syscall.Kill(p, syscall.SIGKILL)
		}
		started := sb.stamp("start", 30*time.Second)
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
func startStandby(argv []string) (*proc, bool) {
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
	p := &proc{cmd: cmd, lines: make(chan string, 8), exit: make(chan error, 1)}
	sc := bufio.NewScanner(errp)
	waiting := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "waiting as a standby") {
			waiting = true
			break
		}
		fmt.Fprintln(os.Stderr, sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
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
