package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// herd starts -n copies of `CRONLOCK-ARGV... -k herd-K --node host-I -- benchtools
// stamp` within -spread on -keys keys (-n/-keys hosts per key), like a fleet
// whose crons fire in the same second. It prints one line per process: "KEY run|skip NS"
// with NS the time from just before its exec to its decision: the job's start for a run,
// the process's exit for a skip.
//
//	benchtools herd -n 200 -keys 20 -spread 100ms -- CRONLOCK-ARGV...
func herd(args []string) {
	fs := flag.NewFlagSet("herd", flag.ExitOnError)
	n := fs.Int("n", 200, "processes")
	keys := fs.Int("keys", 20, "keys")
	spread := fs.Duration("spread", 100*time.Millisecond, "all processes start within this")
	fs.Parse(args)
	argv := fs.Args()
	if len(argv) == 0 {
		fatalf("herd: no cronlock command after --")
	}
	self, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	out := make([]string, *n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		key := "herd-" + strconv.Itoa(i%*keys)
		time.Sleep(time.Until(t0.Add(*spread * time.Duration(i) / time.Duration(*n))))
		a := append(append([]string{}, argv...), "-k", key, "--node", "host-"+strconv.Itoa(i), "--", self, "stamp")
		cmd := exec.Command(a[0], a[1:]...)
		cmd.Stderr = os.Stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			fatalf("%v", err)
		}
		before := mono()
		if err := cmd.Start(); err != nil {
			fatalf("start %s: %v", a[0], err)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sc := bufio.NewScanner(pipe)
			started := int64(0)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "start" {
					started, _ = strconv.ParseInt(f[1], 10, 64)
				}
			}
			err := cmd.Wait()
			done := mono()
			switch {
			case started > 0:
				out[i] = fmt.Sprintf("%s run %d", key, started-before)
			case err == nil:
				out[i] = fmt.Sprintf("%s skip %d", key, done-before)
			default:
				out[i] = fmt.Sprintf("%s error %d", key, done-before)
			}
		}(i)
	}
	wg.Wait()
	for _, l := range out {
		fmt.Println(l)
	}
}
