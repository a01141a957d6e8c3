package history

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"cronlock/runstatus"
)

// BenchmarkRunRows measures the history work of one cronlock run on an existing file:
// Open + Start + Finish (+ Close). "close-last" is a run alone on the machine: its Close
// checkpoints the WAL (fsyncs). "close-not-last" has another connection open (another
// cronlock running), so Close does not checkpoint: what a run costs when it skips Close.
func BenchmarkRunRows(b *testing.B) {
	for _, other := range []bool{false, true} {
		name := "close-last"
		if other {
			name = "close-not-last"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "history.db")
			if err := writeRuns(path, "seed", 1, 100); err != nil {
				b.Fatal(err)
			}
			if other {
				s, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				r := &Run{Key: "bench", Node: "n", PID: 1, Command: []string{"/opt/jobs/x.sh"}, Backend: "local /run/cronlock"}
				if err := s.Start(r); err != nil {
					b.Fatal(err)
				}
				r.Status, r.ExitCode, r.Output = runstatus.Succeeded, new(int), make([]byte, 4096)
				if err := s.Finish(r); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunProcess runs the history work of one run in a fresh process each time, as
// cronlock does, with and without Close; "baseline" is the process alone.
func BenchmarkRunProcess(b *testing.B) {
	path := filepath.Join(b.TempDir(), "history.db")
	if err := writeRuns(path, "seed", 1, 100); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, helper, close string }{
		{"baseline", "noop", "1"}, {"close", "runrow", "1"}, {"exit-without-close", "runrow", "0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cmd := helperCmd(b, c.helper, "HELPER_PATH="+path, "HELPER_CLOSE="+c.close)
				cmd.Stderr = nil
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}

// BenchmarkList measures `cronlock history` queries: newest 20 overall and of one key.
func BenchmarkList(b *testing.B) {
	for _, n := range []int{1000, 1000000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s, _ := openTemp(b)
			fill(b, s, n)
			for _, f := range []Filter{{Limit: 20}, {Key: "key-7", Limit: 20}, {Status: runstatus.Failed, Limit: 20}} {
				b.Run(fmt.Sprintf("key=%q,status=%q", f.Key, f.Status), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						runs, err := s.List(f)
						if err != nil || len(runs) != 20 {
							b.Fatalf("%d runs, %v", len(runs), err)
						}
					}
				})
			}
			b.Run("reap", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := s.Reap("n"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// fill inserts n finished runs over 50 keys in one transaction.
func fill(b *testing.B, s *Store, n int) {
	tx, err := s.db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.Prepare(`INSERT INTO runs (` + runColumns + `) VALUES ` + runValues)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-time.Duration(n) * time.Minute)
	for i := 0; i < n; i++ {
		st := runstatus.Succeeded
		if i%10 == 0 {
			st = runstatus.Failed
		}
		r := &Run{ID: fmt.Sprintf("run-%d", i), Key: fmt.Sprintf("key-%d", i%50), Node: "n", PID: i,
			Command: []string{"/opt/jobs/x.sh", "--flag"}, Status: st, ExitCode: new(int),
			StartedAt: t0.Add(time.Duration(i) * time.Minute), FinishedAt: t0.Add(time.Duration(i)*time.Minute + time.Second)}
		if _, err := stmt.Exec(rowArgs(r)...); err != nil {
			b.Fatal(err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
