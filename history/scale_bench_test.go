package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cronlock/runstatus"
)

// BenchmarkScale measures what `cronlock history` and a run cost on a file of 1,000 runs
// and on one of 1,000,000: the newest 20 runs, the newest 20 of one key, Stats of one
// key, the rows of a new run (Start + Finish, and Insert of a skipped run), the file's
// size per run and the pages a new run writes. Each figure at 1M should stay close to
// its figure at 1k (scripts/bench.sh prints the ratios): every query walks an index, and
// a new row touches a few pages whatever the file holds. Timed operations also report
// their CPU time (cpu-ns/op), steadier than wall time on a busy machine.
//
// The files are built once per test process (the 1M one in 7 to 20 s here) and reused by
// every -count; CRONLOCK_SCALE_DIR=DIR builds them in DIR and keeps them there
// (scripts/bench.sh times the CLI on them afterwards), else they live in a temporary
// folder that the next benchmark process removes. Benchmarks only: nothing here runs
// without -bench.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, 1000000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			e := scaleFile(b, n)
			path := e.path
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.Run("list", func(b *testing.B) {
				defer cpuPerOp(b)()
				for i := 0; i < b.N; i++ {
					if runs, err := s.List(Filter{Limit: 20}); err != nil || len(runs) != 20 {
						b.Fatalf("%d runs, %v", len(runs), err)
					}
				}
			})
			b.Run("list-key", func(b *testing.B) {
				defer cpuPerOp(b)()
				for i := 0; i < b.N; i++ {
					if runs, err := s.List(Filter{Key: scaleKey, Limit: 20}); err != nil || len(runs) != 20 {
						b.Fatalf("%d runs of %s, %v", len(runs), scaleKey, err)
					}
				}
			})
			// The default `history` view: the newest 20 and one more, which says whether
			// older runs exist without counting them; then the table's short ids.
			newest, err := s.List(Filter{Limit: 21})
			if err != nil || len(newest) != 21 {
				b.Fatalf("%d runs, %v", len(newest), err)
			}
			ids := make([]string, 20)
			for i := range ids {
				ids[i] = newest[i].ID
			}
			b.Run("short-ids", func(b *testing.B) {
				defer cpuPerOp(b)()
				for i := 0; i < b.N; i++ {
					if short, err := s.ShortIDs(ids); err != nil || len(short) != len(ids) {
						b.Fatalf("%d short ids, %v", len(short), err)
					}
				}
			})
			b.Run("resolve", func(b *testing.B) {
				short, err := s.ShortIDs(ids[:1])
				if err != nil {
					b.Fatal(err)
				}
				defer cpuPerOp(b)()
				for i := 0; i < b.N; i++ {
					if id, err := s.Resolve(short[ids[0]]); err != nil || id != ids[0] {
						b.Fatalf("resolve %s: %s, %v", short[ids[0]], id, err)
					}
				}
			})
			// What the default view cost before: the newest 20, then a count of every
			// row, to say "20 of N runs shown".
			b.Run("list-count", func(b *testing.B) {
				defer cpuPerOp(b)()
				for i := 0; i < b.N; i++ {
					var n int
					if err := s.db.QueryRow(`SELECT count(*) FROM runs`).Scan(&n); err != nil || n < 1000 {
						b.Fatalf("count %d, %v", n, err)
					}
					if runs, err := s.List(Filter{Limit: 20}); err != nil || len(runs) != 20 {
						b.Fatalf("%d runs, %v", len(runs), err)
					}
				}
			})
			b.Run("start-finish", func(b *testing.B) {
				cpu := cpuPerOp(b)
				for i := 0; i < b.N; i++ {
					r := &Run{Key: scaleNewKey, Node: "app-prod-1", PID: 4242, Command: []string{"/opt/jobs/new.sh", "--quiet"},
						Backend: "redis 127.0.0.1:6379/0", FencingToken: uint64(time.Now().UnixMicro()), BootID: scaleBootID}
					if err := s.Start(r); err != nil {
						b.Fatal(err)
					}
					r.Status, r.ExitCode = runstatus.Succeeded, new(int)
					if err := s.Finish(r); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu()
				scaleForget(b, s, b.N)
			})
			b.Run("insert-skipped", func(b *testing.B) {
				cpu := cpuPerOp(b)
				for i := 0; i < b.N; i++ {
					r := &Run{Key: scaleNewKey, Node: "app-prod-2", PID: 4243, Command: []string{"/opt/jobs/new.sh", "--quiet"},
						Status: runstatus.Skipped, Holder: "app-prod-1 (pid 4242, run 019a0000-0000-7000-8000-000000000000)",
						Backend: "redis 127.0.0.1:6379/0", BootID: scaleBootID}
					if err := s.Insert(r); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu()
				scaleForget(b, s, b.N)
			})
			scaleStatsBench(b, s)
			b.Run("size", func(b *testing.B) {
				// Measured when the file was built, after a checkpoint: the other
				// benchmarks add and delete rows, which leaves free pages behind.
				b.ReportMetric(e.perRun, "bytes/run")
				b.ReportMetric(e.walPages, "wal-pages/run")
				b.ReportMetric(0, "ns/op")
			})
		})
	}
}

// scaleStatsBench measures `history stats` of one key (Store.Stats): with the default
// window (the newest DefaultStatsLast runs: all 50 of the key in the 1k file, 1000 in
// the 1M one, so its ratio shows the window's growth), and with a window of 50 runs in
// both files, whose ratio shows what the file's size alone adds.
func scaleStatsBench(b *testing.B, s *Store) {
	for _, c := range []struct {
		name string
		last int
	}{{"stats", 0}, {"stats-last50", 50}} {
		b.Run(c.name, func(b *testing.B) {
			defer cpuPerOp(b)()
			for i := 0; i < b.N; i++ {
				st, err := s.Stats(StatsFilter{Key: scaleKey, Last: c.last})
				if err != nil || len(st) != 1 || st[0].Runs < 50 {
					b.Fatalf("stats of %s: %+v, %v", scaleKey, st, err)
				}
			}
		})
	}
}

const (
	scaleKey    = "report-001"            // a busy key: 1/20 of the rows (50 in the 1k file)
	scaleNewKey = "scale-bench-new"       // the rows the benchmarks add, removed after each
	scaleEra    = 6 * time.Second         // time between two runs of the file, all keys together
	scaleDirEnv = "CRONLOCK_SCALE_DIR"    // keep the files in this folder
	scaleTmpPfx = "cronlock-scale-bench-" // temporary folders: prefix + pid
)

var scaleBootID = []byte("0123456789abcdef")

// cpuPerOp starts counting the CPU time of this process (all threads, user + system);
// the function it returns reports it per operation as "cpu-ns/op". Wall time (ns/op) is
// what a user waits, but on a busy machine it also counts the time spent waiting for a
// CPU: the CPU time of the same work is the steadier figure to compare two sizes by.
func cpuPerOp(b *testing.B) func() {
	t0 := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scaleForget deletes the n rows a benchmark added, so that the file keeps its size.
func scaleForget(b *testing.B, s *Store, n int) {
	res, err := s.db.Exec(`DELETE FROM runs WHERE key = ?`, scaleNewKey)
	if err != nil {
		b.Fatal(err)
	}
	if got, _ := res.RowsAffected(); got != int64(n) {
		b.Fatalf("deleted %d benchmark rows, want %d", got, n)
	}
}

var scaleCache struct {
	sync.Mutex
	dir   string
	files map[int]scaleEntry
}

type scaleEntry struct {
	path     string
	perRun   float64 // bytes of the file per run, after a checkpoint
	walPages float64 // pages a new run (Start + Finish) writes to the WAL
}

// scaleFile returns a history file of n runs, built on the first call of this process,
// with its size per run and the pages a new run writes.
func scaleFile(b *testing.B, n int) scaleEntry {
	scaleCache.Lock()
	defer scaleCache.Unlock()
	if e, ok := scaleCache.files[n]; ok {
		return e
	}
	if scaleCache.dir == "" {
		dir, err := scaleDir()
		if err != nil {
			b.Fatal(err)
		}
		scaleCache.dir, scaleCache.files = dir, map[int]scaleEntry{}
	}
	path := filepath.Join(scaleCache.dir, fmt.Sprintf("history-%d.db", n))
	// A kept file from an earlier process is rebuilt: it may hold leftovers of a
	// benchmark that was interrupted.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	os.RemoveAll(path + "-runs")
	start := time.Now()
	if err := buildScaleFile(path, n); err != nil {
		b.Fatalf("build a history of %d runs: %v", n, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	e := scaleEntry{path: path, perRun: float64(fi.Size()) / float64(n)}
	b.Logf("built %s: %d runs in %v, %d bytes, %.0f bytes/run", path, n, time.Since(start).Round(time.Millisecond), fi.Size(), e.perRun)
	if e.walPages, err = scaleWritePages(path); err != nil {
		b.Fatalf("count the pages a run writes: %v", err)
	}
	scaleCache.files[n] = e
	return e
}

// scaleWritePages counts the pages that 100 new runs (Start + Finish each) write to the
// WAL, with automatic checkpoints off, and returns the count per run: the I/O of a run,
// which must not grow with the file (wall time also shows the CPU of deeper B-trees).
// The runs are deleted afterwards and the WAL is checkpointed away.
func scaleWritePages(path string) (float64, error) {
	s, err := Open(path)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var pageSize int64
	if err := s.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		return 0, err
	}
	if _, err := s.db.Exec(`PRAGMA wal_autocheckpoint = 0; PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return 0, err
	}
	const runs = 100
	for i := 0; i < runs; i++ {
		r := &Run{Key: scaleNewKey, Node: "app-prod-1", PID: 4242, Command: []string{"/opt/jobs/new.sh", "--quiet"},
			Backend: "redis 127.0.0.1:6379/0", BootID: scaleBootID}
		if err := s.Start(r); err != nil {
			return 0, err
		}
		r.Status, r.ExitCode = runstatus.Succeeded, new(int)
		if err := s.Finish(r); err != nil {
			return 0, err
		}
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		return 0, err
	}
	frames := float64(fi.Size()-32) / float64(pageSize+24) // WAL header, then frames of header + page
	if _, err := s.db.Exec(`DELETE FROM runs WHERE key = ?`, scaleNewKey); err != nil {
		return 0, err
	}
	_, err = s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return frames / runs, err
}

// scaleDir is CRONLOCK_SCALE_DIR, or a new temporary folder named after this process;
// the folders of processes that are gone are removed on the way.
func scaleDir() (string, error) {
	if d := os.Getenv(scaleDirEnv); d != "" {
		return d, os.MkdirAll(d, 0o700)
	}
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), scaleTmpPfx+"*"))
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), scaleTmpPfx))
		if err == nil && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
	d := filepath.Join(os.TempDir(), scaleTmpPfx+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return d, nil
}

// scaleSQL inserts ?1 runs in one statement, oldest first, one every scaleEra (?2 ns)
// ending now (?3 ns): a million runs span 69 days, inside the default retention. Every
// value is derived from the row number by multiplicative hashes, so the file is the same
// on every build. Half of the runs belong to 10 busy keys (jobs every minute), the rest
// spread evenly over 290 others; six nodes; statuses as a healthy fleet has them (90 %
// succeeded, then failed, skipped, timeout, error, abandoned, interrupted, lock_lost); no
// output tails; UUIDv7 ids as Start makes them; the exit cron saw; no --schedule tick;
// one try each.
const scaleSQL = `
WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1 - 1),
h AS (
	SELECT i,
		?3 - (?1 - i) * ?2 + (i * 2654435761) % 1000000000 AS t,
		(i * 40503 + 17) % 1000 AS s,
		CASE WHEN i % 2 = 0 THEN (i / 2) % 10 ELSE 10 + ((i / 2) * 193) % 290 END AS k,
		(i * 3266489917) % 6 AS nd,
		(i * 668265263) % 4294967291 AS x
	FROM seq
),
r AS (
	SELECT *,
		CASE k % 5 WHEN 0 THEN 'billing-sync' WHEN 1 THEN 'report' WHEN 2 THEN 'cleanup-tmp'
			WHEN 3 THEN 'db-backup' ELSE 'send-digest' END || printf('-%03d', k) AS key,
		CASE WHEN s < 900 THEN 'succeeded' WHEN s < 950 THEN 'failed' WHEN s < 970 THEN 'skipped'
			WHEN s < 980 THEN 'timeout' WHEN s < 985 THEN 'error' WHEN s < 990 THEN 'abandoned'
			WHEN s < 995 THEN 'interrupted' ELSE 'lock_lost' END AS status,
		t / 1000000 AS ms
	FROM h
)
INSERT INTO runs (` + runColumns + `)
SELECT
	printf('%08x-%04x-7%03x-%04x-%012x', ms >> 16, ms & 65535, x % 4096, 32768 + x % 16384, x * 65536 + i % 65536),
	key,
	'app-prod-' || nd,
	1000 + x % 4000000,
	CAST('/opt/jobs/' || key || '.sh' AS BLOB) || x'00' || CAST('--quiet' AS BLOB) || x'00',
	status,
	CASE status WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 + x % 3 END,
	CASE status WHEN 'timeout' THEN 'SIGKILL' WHEN 'interrupted' THEN 'SIGTERM' ELSE '' END,
	t,
	CASE WHEN status = 'abandoned' THEN NULL ELSE t + 200000000 + x % 60000000000 END,
	CASE status
		WHEN 'timeout' THEN 'stopped after --timeout 30m'
		WHEN 'error' THEN 'redis 127.0.0.1:6379 unreachable: dial tcp 127.0.0.1:6379: i/o timeout'
		WHEN 'abandoned' THEN '` + abandonedError + `'
		WHEN 'lock_lost' THEN 'lock lost: renewal failed' ELSE '' END,
	CASE WHEN status = 'skipped'
		THEN 'app-prod-' || ((nd + 1) % 6) || ' (pid ' || (1000 + x % 3999) || ', run 019a3b2c-4d5e-7f60-8172-' || printf('%012x', x) || ')'
		ELSE '' END,
	CASE WHEN status IN ('skipped', 'error') THEN 0 ELSE t / 1000 END,
	'redis 127.0.0.1:6379/0',
	CASE WHEN s % 50 = 7 THEN 2 ELSE 1 END,
	CAST(printf('boot-of-node-%03d', nd) AS BLOB),
	100000 + x % 90000000,
	CASE status WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 + x % 3 WHEN 'skipped' THEN 0 WHEN 'timeout' THEN 124
		WHEN 'interrupted' THEN 143 WHEN 'abandoned' THEN NULL ELSE 125 END,
	NULL,
	NULL,
	1,
	NULL,
	''
FROM r`

// buildScaleFile creates a current history file at path holding n runs, in one
// transaction, and checkpoints it so that its size is the size of the database.
func buildScaleFile(path string, n int) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	// A large page cache only for the build: the file's layout is the same as with the
	// default, since the rows still go in one by one, oldest first, indexes in place.
	if _, err := s.db.Exec(`PRAGMA cache_size = -262144`); err != nil {
		return err
	}
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	res, err := tx.Exec(scaleSQL, n, int64(scaleEra), now)
	if err != nil {
		return err
	}
	if got, _ := res.RowsAffected(); got != int64(n) {
		return fmt.Errorf("inserted %d rows, want %d", got, n)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if _, err := s.db.Exec(`PRAGMA cache_size = -2000; PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	return nil
}
