package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// now is the injected present of the prune tests.
var now = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// startHelper starts helper name (one that says a run id and then waits), and returns
// that id, the helper's pid, and functions that SIGKILL it or let it end.
func startHelper(t *testing.T, name string, env ...string) (id string, pid int, kill func(), stop func()) {
	t.Helper()
	cmd := helperCmd(t, name, env...)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id = waitLine(t, bufio.NewReader(out))
	return id, cmd.Process.Pid, func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() },
		func() { stdin.Close(); cmd.Wait() }
}

func status(t *testing.T, s *Store, id string) Run {
	t.Helper()
	r, err := s.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// otherUserOpen runs a helper as the user nobody (the tests run as root here, for whom
// permission bits do not apply): DefaultPath must come from nobody's password entry, and
// opening path (in a folder nobody cannot write) must fail clearly.
func otherUserOpen(t *testing.T, path string) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody:", err)
	}
	// nobody must be able to reach the test binary and the folder.
	exe, _ := os.Executable()
	bindir := t.TempDir()
	for _, d := range []string{bindir, filepath.Dir(bindir)} {
		os.Chmod(d, 0o755)
	}
	for d := filepath.Dir(path); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	copyExe := filepath.Join(bindir, "history.test")
	in, _ := os.Open(exe)
	outf, _ := os.OpenFile(copyExe, os.O_CREATE|os.O_WRONLY, 0o755)
	io.Copy(outf, in)
	in.Close()
	outf.Close()

	cmd := helperCmd(t, "other-user", "HELPER_PATH="+path, "HOME=/root")
	cmd.Path = copyExe
	cmd.Args[0] = copyExe
	var uid, gid uint32
	var u64 uint64
	for _, c := range nobody.Uid {
		u64 = u64*10 + uint64(c-'0')
	}
	uid = uint32(u64)
	u64 = 0
	for _, c := range nobody.Gid {
		u64 = u64*10 + uint64(c-'0')
	}
	gid = uint32(u64)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as nobody: %v", err)
	}
	got := string(out)
	wantDefault := "default=" + filepath.Join(nobody.HomeDir, ".local/state/cronlock/history.db") + " err=<nil>"
	if !strings.Contains(got, wantDefault) {
		t.Errorf("nobody's DefaultPath: %q, want %q (from the password database, not $HOME=/root)", got, wantDefault)
	}
	if !strings.Contains(got, "permission denied") || !strings.Contains(got, "CRONLOCK_HISTORY") || !strings.Contains(got, path) {
		t.Errorf("open in an unwritable folder as nobody: %q", got)
	}
}

// at is the start time of a run that began m minutes after statsBase.
func at(m int) time.Time { return statsBase.Add(time.Duration(m) * time.Minute) }

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "cronlock", "history.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func intp(i int) *int { return &i }

func userVersion(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func countRuns(t *testing.T, path string, where string) int {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM runs " + where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func syscallUmask(m int) int { return syscall.Umask(m) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
