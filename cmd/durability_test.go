package cmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
)

// The durability tests of the history through the built binary, on the local backend:
// many cronlock processes writing one file at once, cronlocks SIGKILLed in the middle of
// their writes, and history files that cannot be used (README, "History": every run is
// recorded, a dead cronlock's run as abandoned, and a history that cannot be written
// never stops a job). None of them asserts a
// duration; every wait has a generous bound and fails with what it was waiting for.

// procEnd is how one cronlock process ended.
type procEnd struct {
	code   int // exit code; -1 when killed by a signal
	killed bool
	stdout string
	stderr string
}

// durabWait waits for cmd and reports how it ended; out and errb are its stdout and stderr.
func durabWait(t *testing.T, cmd *exec.Cmd, out, errb *bytes.Buffer) procEnd {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Errorf("wait for cronlock: %v", err)
	}
	o := procEnd{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		o.killed = true
	}
	return o
}

// TestDurabilityConcurrentRuns starts 100 cronlocks at once on one history file, each on
// its own key; their jobs wait until all 100 have started, then all end together, so
// that 100 start rows and then 100 end rows are written at the same moment. Every run
// must exit 0 with nothing on stderr (no "database is locked", no "cannot record"), and
// the file must hold exactly 100 complete rows.
func TestDurabilityConcurrentRuns(t *testing.T) {
	skipIfShort(t, "100 cronlocks at once")
	c := newCLI(t, "")
	const n = 100
	started := filepath.Join(c.dir, "started")
	release := filepath.Join(c.dir, "go")
	if err := os.Mkdir(started, 0o700); err != nil {
		t.Fatal(err)
	}
	// The job marks that it runs, then waits for the release (at most ~30 s, so that a
	// broken test cannot leave jobs behind).
	job := fmt.Sprintf(`touch %s/$CRONLOCK_KEY; i=0; while [ ! -e %s ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done`, started, release)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	outcomes := make([]procEnd, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, cronlockBin, "run", "-k", fmt.Sprintf("k%d", i), "--", "sh", "-c", job)
			cmd.Env, cmd.Dir = c.env, c.dir
			cmd.WaitDelay = 10 * time.Second
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			<-gate
			if err := cmd.Start(); err != nil {
				t.Errorf("start cronlock %d: %v", i, err)
				return
			}
			outcomes[i] = durabWait(t, cmd, &out, &errb)
		}(i)
	}
	close(gate)
	// Let every job get going before any ends (bounded; a missing one fails below).
	deadline := time.Now().Add(90 * time.Second)
	for {
		ents, _ := os.ReadDir(started)
		if len(ents) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("only %d of %d jobs started within 90 s", len(ents), n)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("cronlock runs hung (killed after 3 minutes)")
	}
	for i, o := range outcomes {
		if o.code != 0 || o.stderr != "" {
			t.Errorf("run k%d: exit %d, stderr %q; want 0 and nothing", i, o.code, o.stderr)
		}
	}

	st, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.List(history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Key]++
		if r.Status != runstatus.Succeeded || r.FinishedAt.IsZero() || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("row of %s: status %s, finished %v, exit %v; want a complete succeeded row", r.Key, r.Status, r.FinishedAt, r.ExitCode)
		}
	}
	for i := 0; i < n; i++ {
		if k := fmt.Sprintf("k%d", i); seen[k] != 1 {
			t.Errorf("key %s has %d rows, want 1", k, seen[k])
		}
	}
	if len(rows) != n {
		t.Errorf("%d rows, want %d", len(rows), n)
	}
}

// TestDurabilitySigkill SIGKILLs cronlock processes at random moments while others write
// to the same history file: some before their start row, some in the middle of a write,
// some after their end row. Others are killed once their running row is visible. The
// file must pass PRAGMA integrity_check, `cronlock history` must work, every run that
// ended by itself must have its complete row, every killed run whose job had started must
// have a row, and a killed run shows as abandoned (or as what it had fully recorded before
// the kill), never as running.
func TestDurabilitySigkill(t *testing.T) {
	skipIfShort(t, "about a hundred cronlocks, most of them SIGKILLed")
	c := newCLI(t, "")
	path := filepath.Join(c.dir, "history.db")
	const (
		workers = 6  // goroutines looping runs, each run on a key of its own
		loops   = 16 // runs per worker
		held    = 6  // runs killed once their running row is written
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(key string, job ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, error) {
		cmd := exec.CommandContext(ctx, cronlockBin, append([]string{"run", "-k", key, "--"}, job...)...)
		cmd.Env, cmd.Dir = c.env, c.dir
		cmd.WaitDelay = 10 * time.Second // the guard of a killed cronlock may hold stderr a moment
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		return cmd, &out, &errb, cmd.Start()
	}

	var mu sync.Mutex
	results := map[string]procEnd{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(4, uint64(w))) // the same kill plan on every run of the test
			for i := 0; i < loops && ctx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				// The job's first act leaves a mark: a run whose job started must be in
				// the history, however soon after that cronlock is killed.
				cmd, out, errb, err := start(key, "sh", "-c", `: > "$0"`, filepath.Join(c.dir, "started-"+key))
				if err != nil {
					t.Errorf("start cronlock: %v", err)
					return
				}
				var timer *time.Timer
				if rng.IntN(3) > 0 { // two runs in three get a SIGKILL within 40 ms
					p := cmd.Process
					timer = time.AfterFunc(time.Duration(rng.IntN(40000))*time.Microsecond, func() { p.Signal(syscall.SIGKILL) })
				}
				o := durabWait(t, cmd, out, errb)
				if timer != nil {
					timer.Stop()
				}
				mu.Lock()
				results[key] = o
				mu.Unlock()
			}
		}(w)
	}

	// The held runs: SIGKILL once the running row is in the file.
	st, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for h := 0; h < held; h++ {
		key := fmt.Sprintf("held-%d", h)
		cmd, out, errb, err := start(key, "sleep", "30")
		if err != nil {
			t.Fatalf("start cronlock: %v", err)
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			rows, err := st.List(history.Filter{Key: key, Status: runstatus.Running})
			if err != nil {
				t.Fatalf("read the running row of %s: %v", key, err)
			}
			if len(rows) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no running row for %s within 60 s", key)
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		if o := durabWait(t, cmd, out, errb); !o.killed {
			t.Fatalf("%s: cronlock was not killed (exit %d, stderr %q)", key, o.code, o.stderr)
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("cronlock runs hung (killed after 3 minutes)")
	}

	// The file is sound.
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check []string
	rs, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	for rs.Next() {
		var s string
		rs.Scan(&s)
		check = append(check, s)
	}
	rs.Close()
	if len(check) != 1 || check[0] != "ok" {
		t.Fatalf("PRAGMA integrity_check: %q", check)
	}

	// `history` works, and reaps the dead runs of this node first.
	if code, out, errs := c.run("history", "--limit", "0"); code != 0 || errs != "" || !strings.Contains(out, "held-0") {
		t.Fatalf("history: exit %d, stderr %q", code, errs)
	}
	code, out, errs := c.run("history", "--json", "--limit", "0")
	if code != 0 || errs != "" {
		t.Fatalf("history --json: exit %d, stderr %q", code, errs)
	}
	rows := map[string][]historyRow{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r historyRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		rows[r.Key] = append(rows[r.Key], r)
	}

	killed, whole := 0, 0
	for key, o := range results {
		rs := rows[key]
		switch {
		case o.killed:
			killed++
			// Killed before its job started (no row, or one), after (abandoned), or after
			// its end row (succeeded).
			_, serr := os.Stat(filepath.Join(c.dir, "started-"+key))
			if serr == nil && len(rs) != 1 {
				t.Errorf("killed run %s: its job started, but rows %+v; want one abandoned or succeeded", key, rs)
			}
			if len(rs) > 1 || len(rs) == 1 && rs[0].Status != runstatus.Abandoned && rs[0].Status != runstatus.Succeeded {
				t.Errorf("killed run %s: rows %+v; want none, or one abandoned or succeeded", key, rs)
			}
		default:
			whole++
			if o.code != 0 || o.stderr != "" {
				t.Errorf("run %s ended by itself with exit %d, stderr %q; want 0 and nothing", key, o.code, o.stderr)
			}
			if len(rs) != 1 || rs[0].Status != runstatus.Succeeded || rs[0].ExitCode == nil || *rs[0].ExitCode != 0 {
				t.Errorf("run %s ended by itself: rows %+v; want one succeeded", key, rs)
			}
		}
	}
	for h := 0; h < held; h++ {
		key := fmt.Sprintf("held-%d", h)
		if rs := rows[key]; len(rs) != 1 || rs[0].Status != runstatus.Abandoned {
			t.Errorf("%s, killed while running: rows %+v; want one abandoned", key, rs)
		}
	}
	for key, rs := range rows {
		for _, r := range rs {
			if r.Status == runstatus.Running {
				t.Errorf("%s is still running after `history` reaped", key)
			}
		}
	}
	// The per-run lock files of the dead runs are gone too.
	if locks, _ := filepath.Glob(path + "-runs/*.lock"); len(locks) > 0 {
		t.Errorf("per-run lock files left behind: %v", locks)
	}
	t.Logf("%d runs SIGKILLed at random moments, %d ended by themselves, %d killed while running", killed, whole, held)
	if killed == 0 || whole == 0 {
		t.Errorf("the kill plan missed: %d killed, %d whole; the test proves nothing", killed, whole)
	}
}

// TestDurabilityBadHistoryFile: a history file that cannot be used never stops the job.
// cronlock prints one `cronlock:` line that names the file and what to do, the job runs
// and its exit code is cronlock's. (cmd/badinput_test.go has a text file of junk and a
// folder given as the history; these are the other ways a file goes bad.)
func TestDurabilityBadHistoryFile(t *testing.T) {
	random := make([]byte, 64<<10)
	rand.Read(random)
	cases := []struct {
		name  string
		setup func(t *testing.T, path string) // makes the history file at path
		asWho string                          // "nobody" to run cronlock as uid 65534
		want  []string                        // the stderr line contains each
	}{
		{name: "random bytes", want: []string{"corrupt", "CRONLOCK_HISTORY"},
			setup: func(t *testing.T, path string) { durabWrite(t, path, random, 0o600) }},
		{name: "sqlite header then random bytes", want: []string{"corrupt", "CRONLOCK_HISTORY"},
			setup: func(t *testing.T, path string) {
				durabWrite(t, path, append([]byte("SQLite format 3\x00"), random[16:]...), 0o600)
			}},
		{name: "a newer schema", want: []string{"newer", "upgrade cronlock", "CRONLOCK_HISTORY"},
			setup: func(t *testing.T, path string) {
				durabHistory(t, path)
				db, err := sql.Open("sqlite3", "file:"+path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "unreadable", asWho: "nobody", want: []string{"permissions", "CRONLOCK_HISTORY"},
			setup: func(t *testing.T, path string) {
				durabHistory(t, path)
				if os.Geteuid() == 0 {
					// Root ignores modes: the run goes as nobody, whose file it is.
					os.Chown(path, 65534, 65534)
				}
				if err := os.Chmod(path, 0); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, "")
			path := filepath.Join(c.dir, "history.db")
			var cred *syscall.Credential
			bin := cronlockBin
			if tc.asWho == "nobody" && os.Geteuid() == 0 {
				cred, bin = durabAsNobody(t, c)
				path = filepath.Join(c.dir, "history.db")
			}
			tc.setup(t, path)
			before, _ := os.ReadFile(path)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", "-k", "bad", "--", "sh", "-c", "echo ran; exit 3")
			cmd.Env, cmd.Dir = append(c.env, "CRONLOCK_HISTORY="+path), c.dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				if cred != nil {
					t.Skipf("cannot run cronlock as nobody here (%v); the folder-as-history case of badinput_test.go covers root", err)
				}
				t.Fatal(err)
			}
			o := durabWait(t, cmd, &out, &errb)
			if ctx.Err() != nil {
				t.Fatal("cronlock hung (killed after 60 s)")
			}
			if o.code != 3 || o.stdout != "ran\n" {
				t.Errorf("exit %d, stdout %q; want the job's 3 and its output", o.code, o.stdout)
			}
			line := strings.TrimSuffix(o.stderr, "\n")
			if strings.Count(o.stderr, "\n") != 1 || !strings.HasPrefix(line, "cronlock: ") {
				t.Fatalf("stderr %q; want one cronlock: line", o.stderr)
			}
			for _, w := range append([]string{path, "the job runs anyway"}, tc.want...) {
				if !strings.Contains(line, w) {
					t.Errorf("stderr %q does not say %q", line, w)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("cronlock changed the file it could not use")
			}
		})
	}
}

func durabWrite(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}

// durabHistory makes a valid, current history file with one run in it.
func durabHistory(t *testing.T, path string) {
	t.Helper()
	st, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(&history.Run{Key: "before", Status: runstatus.Succeeded, ExitCode: new(int)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
