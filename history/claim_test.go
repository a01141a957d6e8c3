package history

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

// A live run that has only claimed its file is shown by AddLive with its start facts, and
// counted once; when it dies, Reap marks that row abandoned.
func TestAddLiveClaimedRun(t *testing.T) {
	s, path := openTemp(t)
	id, pid, kill, _ := startHelper(t, "claim", "HELPER_PATH="+path)

	if n, err := s.AddLive(); err != nil || n != 1 {
		t.Fatalf("AddLive while the claimer lives: %d, %v; want 1, nil", n, err)
	}
	r := status(t, s, id)
	if r.Status != runstatus.Running || r.Key != "claimed" || r.Node != "n\xff1" || r.PID != pid ||
		r.FencingToken != 42 || r.Attempt != 3 || !r.StartedAt.Equal(time.Unix(1700000000, 5)) || !r.FinishedAt.IsZero() {
		t.Errorf("live row %+v; want the claim's facts, running", r)
	}
	if n, err := s.AddLive(); err != nil || n != 0 {
		t.Errorf("AddLive again: %d, %v; want 0 (the row is there)", n, err)
	}
	// Reap leaves a live run alone.
	if n, err := s.Reap(""); err != nil || n != 0 || status(t, s, id).Status != runstatus.Running {
		t.Fatalf("Reap while the claimer lives: %d, %v, %s", n, err, status(t, s, id).Status)
	}

	kill()
	if n, err := s.AddLive(); err != nil || n != 0 {
		t.Errorf("AddLive after the claimer died: %d, %v; want 0 (Reap's business)", n, err)
	}
	if n, err := s.Reap(""); err != nil || n != 1 {
		t.Fatalf("Reap after the claimer died: %d, %v; want 1", n, err)
	}
	if r := status(t, s, id); r.Status != runstatus.Abandoned {
		t.Errorf("dead run is %s, want abandoned", r.Status)
	}
	if _, err := os.Stat(filepath.Join(s.runsDir, id+".lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead run's file is still there (%v)", err)
	}
}

// A run that ends before it writes its running row (Claim, then Finish) is one final
// row, and its file is gone; Start after a reader wrote the row for it is no error.
func TestClaimThenFinish(t *testing.T) {
	s, path := openTemp(t)
	short := Run{ID: "01a20000-0000-7000-8000-000000005401", Key: "short", Node: "n", PID: os.Getpid(),
		Command: []string{"true"}, Attempt: 1}
	if err := Claim(path, short); err != nil {
		t.Fatal(err)
	}
	short.Status, short.ExitCode = runstatus.Succeeded, intp(0)
	if err := s.Finish(&short); err != nil {
		t.Fatal(err)
	}
	if r := status(t, s, short.ID); r.Status != runstatus.Succeeded || r.FinishedAt.IsZero() {
		t.Errorf("short run %+v, want succeeded and finished", r)
	}
	if _, err := os.Stat(filepath.Join(s.runsDir, short.ID+".lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the short run's file is still there (%v)", err)
	}

	long := Run{ID: "01a20000-0000-7000-8000-000000005402", Key: "long", Node: "n", PID: os.Getpid(),
		Command: []string{"sleep", "9"}, Attempt: 1}
	if err := Claim(path, long); err != nil {
		t.Fatal(err)
	}
	// A reader in another process sees the claim as a live run (its own Store here).
	reader, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if n, err := reader.AddLive(); err != nil || n != 1 {
		t.Fatalf("reader's AddLive: %d, %v; want 1", n, err)
	}
	if err := s.Start(&long); err != nil {
		t.Fatalf("Start after a reader wrote the row: %v", err)
	}
	if r := status(t, s, long.ID); r.Status != runstatus.Running {
		t.Errorf("long run is %s, want running", r.Status)
	}
	long.Status, long.ExitCode = runstatus.Succeeded, intp(0)
	if err := s.Finish(&long); err != nil {
		t.Fatal(err)
	}
	if r := status(t, s, long.ID); r.Status != runstatus.Succeeded {
		t.Errorf("long run is %s, want succeeded", r.Status)
	}
	if n := countRuns(t, path, ""); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
}

// A run with a long command line (arguments of 128 KiB, the most Linux allows one) that
// dies before its row is written is still recorded abandoned, with its whole command;
// while it lives, readers see it.
func TestClaimOfALongCommand(t *testing.T) {
	s, path := openTemp(t)
	long := strings.Repeat("x", 128<<10)
	r := Run{ID: "01a20000-0000-7000-8000-000000005403", Key: "long-argv", Node: "n", PID: os.Getpid(),
		Command: []string{"sh", "-c", long, long}, Attempt: 1}
	if err := Claim(path, r); err != nil {
		t.Fatal(err)
	}
	reader, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if n, err := reader.AddLive(); err != nil || n != 1 {
		t.Fatalf("AddLive of a live run with a long command: %d, %v; want 1", n, err)
	}
	s.db.Exec(`DELETE FROM runs WHERE id = ?`, r.ID) // as if no reader had come by
	takeClaim(r.ID).Close()                          // the run's cronlock dies: its lock goes
	if n, err := s.Reap(""); err != nil || n != 1 {
		t.Fatalf("Reap after the run died: %d, %v; want 1", n, err)
	}
	got := status(t, s, r.ID)
	if got.Status != runstatus.Abandoned || len(got.Command) != 4 || got.Command[3] != long {
		t.Fatalf("dead run: status %s, %d arguments; want abandoned with its whole command", got.Status, len(got.Command))
	}
}
