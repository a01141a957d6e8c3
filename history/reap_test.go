package history

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"cronlock/procfs"
	"cronlock/runstatus"
)

// startHolder starts a helper process that Starts a run in path and keeps it running.
func startHolder(t *testing.T, path, node string) (id string, kill func(), stop func()) {
	t.Helper()
	id, _, kill, stop = startHelper(t, "hold", "HELPER_PATH="+path, "HELPER_NODE="+node)
	return id, kill, stop
}

func TestReapAbandoned(t *testing.T) {
	s, path := openTemp(t)

	deadID, kill, _ := startHolder(t, path, "n1")
	liveID, _, _ := startHolder(t, path, "n1")
	otherNodeDead, killOther, _ := startHolder(t, path, "n2")
	kill()
	killOther()
	// The dead run's pid is now reused by a live process (this one): Reap must not care.
	if _, err := s.db.Exec(`UPDATE runs SET pid = ? WHERE id = ?`, os.Getpid(), deadID); err != nil {
		t.Fatal(err)
	}
	// A run of this very Store is alive too.
	own := &Run{Key: "own", Node: "n1"}
	if err := s.Start(own); err != nil {
		t.Fatal(err)
	}
	// A running row whose lock file vanished (a crash before it existed, a cleaner…).
	missing := &Run{ID: "0190a7b2-0000-7000-8000-00000000abcd", Key: "m", Node: "n1"}
	if err := s.Insert(&Run{ID: missing.ID, Key: "m", Node: "n1", Status: runstatus.Succeeded}); err != nil {
		t.Fatal(err)
	}
	s.db.Exec(`UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?`, missing.ID)
	// Debris: a free lock file without a running row.
	debris := filepath.Join(s.runsDir, "0190a7b2-0000-7000-8000-00000000dead.lock")
	os.WriteFile(debris, nil, 0o600)
	// A running row of another machine, copied in: another node, another boot, no
	// per-run file here. Only that machine can judge it.
	foreign := &Run{ID: "0190a7b2-0000-7000-8000-0000000f0e19", Key: "f", Node: "elsewhere", PID: 1,
		BootID: []byte("another-boot-id!"), Status: runstatus.Succeeded}
	if err := s.Insert(foreign); err != nil {
		t.Fatal(err)
	}
	s.db.Exec(`UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?`, foreign.ID)

	n, err := s.Reap("n1")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("Reap marked %d rows, want 3", n)
	}
	for _, c := range []struct {
		id, want string
	}{
		{deadID, runstatus.Abandoned},
		{missing.ID, runstatus.Abandoned},
		{liveID, runstatus.Running},
		{own.ID, runstatus.Running},
		// This machine's run under another --node label: its per-run file is here, and
		// free.
		{otherNodeDead, runstatus.Abandoned},
		{foreign.ID, runstatus.Running},
	} {
		r := status(t, s, c.id)
		if r.Status != c.want {
			t.Errorf("run %s: status %s, want %s", c.id, r.Status, c.want)
		}
		if c.want == runstatus.Abandoned && (r.Error == "" || !r.FinishedAt.IsZero()) {
			t.Errorf("abandoned run %s: error %q, finished %v; want an explanation and no end time", c.id, r.Error, r.FinishedAt)
		}
	}
	for _, c := range []struct {
		id     string
		exists bool
	}{{deadID, false}, {liveID, true}, {own.ID, true}, {otherNodeDead, false}} {
		_, err := os.Stat(filepath.Join(s.runsDir, c.id+".lock"))
		if (err == nil) != c.exists {
			t.Errorf("lock file of %s: exists=%v, want %v", c.id, err == nil, c.exists)
		}
	}
	if _, err := os.Stat(debris); err == nil {
		t.Error("debris lock file not removed")
	}

	// Reaping again finds nothing new; the node-less Reap takes the foreign row too.
	if n, _ := s.Reap("n1"); n != 0 {
		t.Errorf("second Reap marked %d", n)
	}
	if n, _ := s.Reap(""); n != 1 || status(t, s, foreign.ID).Status != runstatus.Abandoned {
		t.Errorf("Reap(\"\") marked %d; the foreign run is %s", n, status(t, s, foreign.ID).Status)
	}

	// A run that a mistaken Reap marked still gets its real result from Finish.
	own.Status, own.ExitCode = runstatus.Succeeded, intp(0)
	if err := s.Finish(own); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, own.ID).Status; got != runstatus.Succeeded {
		t.Errorf("own run after Finish: %s", got)
	}
}

// TestReapRace: runs finishing while Reap works are never marked abandoned.
func TestReapRace(t *testing.T) {
	s, path := openTemp(t)
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 300; i++ {
			r := &Run{Key: "race", Node: "n"}
			if err := s2.Start(r); err != nil {
				t.Error(err)
				return
			}
			r.Status = runstatus.Succeeded
			if err := s2.Finish(r); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			if n := countRuns(t, path, "WHERE status = 'abandoned'"); n != 0 {
				t.Fatalf("%d live runs marked abandoned", n)
			}
			return
		default:
		}
		if _, err := s.Reap("n"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReapOtherBoot: a running row written in another boot is dead even while its lock
// file is locked (a folder restored from a backup, a lock held by an unrelated process),
// and a row of this boot with a held lock stays running.
func TestReapOtherBoot(t *testing.T) {
	if procfs.BootID() == nil {
		t.Fatal("no /proc/sys/kernel/random/boot_id on this Linux")
	}
	s, path := openTemp(t)
	liveID, _, _ := startHolder(t, path, "n1")
	otherBoot, _, _ := startHolder(t, path, "n1")
	foreign := append([]byte(nil), procfs.BootID()...)
	foreign[0] ^= 0xff
	if _, err := s.db.Exec(`UPDATE runs SET boot_id = ? WHERE id = ?`, foreign, otherBoot); err != nil {
		t.Fatal(err)
	}
	n, err := s.Reap("n1")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Reap marked %d runs, want 1", n)
	}
	if got := status(t, s, otherBoot).Status; got != runstatus.Abandoned {
		t.Errorf("run of another boot is %s, want abandoned", got)
	}
	if got := status(t, s, liveID); got.Status != runstatus.Running || !bytes.Equal(got.BootID, procfs.BootID()) || got.PIDStart == 0 {
		t.Errorf("live run of this boot read back as %+v, want running with this boot id and a process start", got)
	}
}

// TestReapClaimedWithoutRow: a run whose cronlock died after claiming its per-run file but
// before its row reached the database is recorded abandoned from what the file says; an
// empty per-run file without a row (a cronlock before Claim) is only removed.
func TestReapClaimedWithoutRow(t *testing.T) {
	s, path := openTemp(t)
	id, helperPID, kill, _ := startHelper(t, "claim", "HELPER_PATH="+path)

	// Alive: nothing to record yet.
	if n, err := s.Reap("n\xff1"); err != nil || n != 0 {
		t.Fatalf("Reap while the claimer lives: %d, %v; want 0, nil", n, err)
	}
	if _, err := s.Get(id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a row exists while the claimer lives: %v", err)
	}
	kill()

	// An old-style empty lock file of a dead run without a row.
	empty := filepath.Join(s.runsDir, "01a20000-0000-7000-8000-0000000e0e0e.lock")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	n, err := s.Reap("")
	if err != nil || n != 1 {
		t.Fatalf("Reap after the claimer died: %d, %v; want 1 recorded", n, err)
	}
	r, err := s.Get(id)
	if err != nil {
		t.Fatalf("no row for the claimed run: %v", err)
	}
	want := Run{ID: id, Key: "claimed", Node: "n\xff1", PID: helperPID,
		Command: []string{"/opt/jobs/x.sh", "a\xfe"}, Status: runstatus.Abandoned, Error: abandonedError,
		StartedAt: time.Unix(1700000000, 5), Backend: "local /run/cronlock", FencingToken: 42, Attempt: 3}
	if r.ID != want.ID || r.Key != want.Key || r.Node != want.Node || r.PID != want.PID ||
		!reflect.DeepEqual(r.Command, want.Command) || r.Status != want.Status || r.Error != want.Error ||
		!r.StartedAt.Equal(want.StartedAt) || !r.FinishedAt.IsZero() || r.Backend != want.Backend ||
		r.FencingToken != want.FencingToken || r.Attempt != want.Attempt ||
		!bytes.Equal(r.BootID, procfs.BootID()) || r.PIDStart == 0 {
		t.Errorf("recorded as\n%+v\nwant\n%+v (with this boot and a process start)", r, want)
	}
	for _, f := range []string{filepath.Join(s.runsDir, id+".lock"), empty} {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there (%v)", f, err)
		}
	}
	if runs, _ := s.List(Filter{}); len(runs) != 1 {
		t.Errorf("%d rows, want only the claimed run's", len(runs))
	}
	// Reaping again records nothing twice.
	if n, err := s.Reap(""); err != nil || n != 0 {
		t.Errorf("second Reap: %d, %v; want 0, nil", n, err)
	}
}
