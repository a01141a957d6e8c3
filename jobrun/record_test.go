package jobrun

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
)

// A run's running row is written only once the run has lasted StartRowDelay: a run that
// ends sooner has no row until its end, and then one final row.
func TestRunningRowWaitsForItsDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lasting bool // the delay passes before the run ends
	}{
		{"ends first", false},
		{"lasts", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "history.db")
			due := make(chan time.Time)
			waiting := make(chan struct{})
			r := &runner{
				o:     &Options{History: path, Node: "n", Stderr: os.Stderr, StampDir: dir},
				runID: "01a20000-0000-7000-8000-0000000de1a1",
				startRowAfter: func() <-chan time.Time {
					close(waiting) // the recorder is ready and holds the row back
					return due
				},
			}
			r.row = &history.Run{ID: r.runID, Key: "k", Node: "n", PID: os.Getpid(),
				Command: []string{"job"}, StartedAt: time.Now(), Attempt: 1, Status: runstatus.Running}
			r.openHistory()
			r.recordStart()
			select {
			case <-waiting:
			case <-time.After(10 * time.Second):
				t.Fatal("the recorder did not hold the running row back")
			}

			st, err := history.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Get(r.runID); !errors.Is(err, history.ErrNotFound) {
				t.Fatalf("a row before the delay passed: %v", err)
			}
			if tc.lasting {
				select {
				case due <- time.Now():
				case <-time.After(10 * time.Second):
					t.Fatal("the recorder stopped waiting for the running row's time")
				}
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					if got, err := st.Get(r.runID); err == nil && got.Status == runstatus.Running {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("no running row 10 s after the delay passed")
					}
				}
			}
			code := 0
			r.row.Status, r.row.ExitCode, r.row.FinishedAt = runstatus.Succeeded, &code, time.Now()
			r.queueFinish()
			r.rec.wait()
			got, err := st.Get(r.runID)
			if err != nil || got.Status != runstatus.Succeeded {
				t.Fatalf("final row %+v, %v; want succeeded", got, err)
			}
			if left, _ := filepath.Glob(path + "-runs/*"); len(left) != 0 {
				t.Errorf("per-run files left: %v", left)
			}
		})
	}
}
