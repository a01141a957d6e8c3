package history

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"cronlock/runstatus"
)

// The tests re-execute their own binary to get separate processes (concurrent writers, a
// run that is SIGKILLed, a process of another user). TestMain dispatches on this variable.
const helperEnv = "CRONLOCK_HISTORY_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	// Helpers built with -race would otherwise linger 1 s at exit.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

func runHelper(name string) int {
	if v, err := strconv.Atoi(os.Getenv("HELPER_CKPT")); err == nil {
		walCheckpointAt = v
	}
	path := os.Getenv("HELPER_PATH")
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	switch name {
	case "write":
		// HELPER_N runs in each of HELPER_G goroutines, each with its own Store (its own
		// SQLite connection), like that many cronlock processes.
		n, _ := strconv.Atoi(os.Getenv("HELPER_N"))
		g, _ := strconv.Atoi(os.Getenv("HELPER_G"))
		if err := writeRuns(path, os.Getenv("HELPER_KEY"), g, n); err != nil {
			return fail(err)
		}
		return 0
	case "claim":
		// Claim a run (no database opened), say its id, and wait to be killed.
		r := Run{ID: "01a20000-0000-7000-8000-00000000c1a1", Key: "claimed", Node: "n\xff1",
			PID: os.Getpid(), Command: []string{"/opt/jobs/x.sh", "a\x00b"[:1] + "\xfe"},
			StartedAt: time.Unix(1700000000, 5), Backend: "local /run/cronlock", FencingToken: 42, Attempt: 3}
		if err := Claim(path, r); err != nil {
			return fail(err)
		}
		fmt.Println(r.ID)
		bufio.NewReader(os.Stdin).ReadString('\n')
		return 0
	case "hold":
		// Start a run, say its id, and wait to be killed.
		s, err := Open(path)
		if err != nil {
			return fail(err)
		}
		r := &Run{Key: "held", Node: os.Getenv("HELPER_NODE"), PID: os.Getpid(), Command: []string{"sleep", "1000"}}
		if err := s.Start(r); err != nil {
			return fail(err)
		}
		fmt.Println(r.ID)
		bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes stdin or kills us
		return 0
	case "runrow":
		// One cronlock run's worth of history work; HELPER_CLOSE=0 exits without Close, and
		// HELPER_SHORT=1 claims the run instead of starting it, as a run shorter than a
		// second does.
		s, err := Open(path)
		if err != nil {
			return fail(err)
		}
		r := &Run{Key: "bench", Node: "n", PID: os.Getpid(), Command: []string{"true"}}
		if os.Getenv("HELPER_SHORT") == "1" {
			// A run that ends within a second: claimed, then written once.
			r.ID = fmt.Sprintf("01a20000-0000-7000-8000-%012d", os.Getpid())
			if err := Claim(path, *r); err != nil {
				return fail(err)
			}
		} else if err := s.Start(r); err != nil {
			return fail(err)
		}
		r.Status, r.ExitCode = runstatus.Succeeded, new(int)
		if err := s.Finish(r); err != nil {
			return fail(err)
		}
		if os.Getenv("HELPER_CLOSE") != "0" {
			if err := s.Close(); err != nil {
				return fail(err)
			}
		}
		return 0
	case "noop":
		return 0
	case "other-user":
		// Runs as another user: report DefaultPath and the error of opening path.
		p, err := DefaultPath()
		fmt.Printf("default=%s err=%v\n", p, err)
		_, err = Open(path)
		fmt.Printf("open=%v\n", err)
		return 0
	}
	return fail(fmt.Errorf("unknown helper %q", name))
}

// writeRuns starts and finishes n runs in each of g goroutines, each with its own Store.
func writeRuns(path, key string, g, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(path)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for j := 0; j < n; j++ {
				r := &Run{Key: key, Node: "node", PID: os.Getpid(), Command: []string{"job", strconv.Itoa(i), strconv.Itoa(j)}}
				if err := s.Start(r); err != nil {
					errs <- err
					return
				}
				r.Status, r.ExitCode, r.Output = runstatus.Succeeded, new(int), []byte("out")
				if err := s.Finish(r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when the channel is empty
}

// helperCmd prepares a re-execution of the test binary as helper name.
func helperCmd(t testing.TB, name string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+name), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// waitLine reads one line from the helper with a deadline.
func waitLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		ch <- s
	}()
	select {
	case s := <-ch:
		if len(s) == 0 {
			t.Fatal("helper said nothing")
		}
		return s[:len(s)-1]
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not answer in 20s")
	}
	return ""
}

// queryPlan returns the detail lines of EXPLAIN QUERY PLAN for q on s.
func queryPlan(t testing.TB, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
