package cmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"cronlock/internal/proctest"
	"cronlock/internal/promtest"
)

// The metrics file as node_exporter and alerts see it: metric names, and the statuses
// that always have a series. Spelled out here rather than taken from package metrics, so
// that a change there fails these tests.
const (
	metricLastRun      = "cronlock_last_run_timestamp_seconds"
	metricLastSuccess  = "cronlock_last_success_timestamp_seconds"
	metricLastDuration = "cronlock_last_duration_seconds"
	metricLastExitCode = "cronlock_last_exit_code"
	metricLastStatus   = "cronlock_last_status"
	metricRuns         = "cronlock_runs_total"
)

var metricStatuses = []string{"succeeded", "failed", "timeout", "lock_lost", "interrupted", "skipped", "error", "missed", "suspended"}

// unixSeconds is t as the metrics file writes a timestamp.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// metricsCLI is a cli (local backend) with a metrics folder of the given mode.
func metricsCLI(t *testing.T, mode os.FileMode) (*cli, string) {
	c := newCLI(t, "")
	dir := filepath.Join(c.dir, "metrics")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // not subject to the umask
		t.Fatal(err)
	}
	return c, dir
}

// promFamilies parses a metrics file with expfmt, as node_exporter does.
func promFamilies(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fams, err := promtest.Parse(b)
	if err != nil {
		t.Fatalf("%s does not parse: %v\n%s", path, err, b)
	}
	return fams
}

// promValue is the value of the series of family name with the given status label
// ("" for none); it fails the test unless exactly one series matches.
func promValue(t *testing.T, fams map[string]*dto.MetricFamily, name, status string) float64 {
	t.Helper()
	var found []float64
	for _, m := range fams[name].GetMetric() {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "status" {
				got = l.GetValue()
			}
		}
		if got == status {
			found = append(found, promtest.Value(m))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s{status=%q}: %d series, want 1", name, status, len(found))
	}
	return found[0]
}

// checkLastStatus checks that cronlock_last_status is 1 for want and 0 for every other status.
func checkLastStatus(t *testing.T, fams map[string]*dto.MetricFamily, want string) {
	t.Helper()
	for _, s := range metricStatuses {
		v := 0.0
		if s == want {
			v = 1
		}
		if got := promValue(t, fams, metricLastStatus, s); got != v {
			t.Errorf("cronlock_last_status{status=%q} = %v, want %v", s, got, v)
		}
	}
}

// checkRuns checks cronlock_runs_total by status; statuses not in want must be 0.
func checkRuns(t *testing.T, fams map[string]*dto.MetricFamily, want map[string]float64) {
	t.Helper()
	for _, s := range metricStatuses {
		if got := promValue(t, fams, metricRuns, s); got != want[s] {
			t.Errorf("cronlock_runs_total{status=%q} = %v, want %v", s, got, want[s])
		}
	}
}

// checkTime checks that a timestamp gauge lies within [from, to].
func checkTime(t *testing.T, name string, got float64, from, to time.Time) {
	t.Helper()
	if got < unixSeconds(from)-0.001 || got > unixSeconds(to)+0.001 {
		t.Errorf("%s = %f, want between %f and %f", name, got, unixSeconds(from), unixSeconds(to))
	}
}

// TestMetricsAfterEachStatus runs one key through succeeded, failed, skipped, interrupted
// and error runs, and checks the file after each: last values, counters carried over,
// the last success kept through runs that did not succeed, labels, HELP and TYPE lines.
func TestMetricsAfterEachStatus(t *testing.T) {
	c, dir := metricsCLI(t, 0o700)
	key := "billing"
	path := filepath.Join(dir, "cronlock_billing.prom")
	runs := map[string]float64{}

	before := time.Now()
	code, _, stderr := c.run("run", "-k", key, "--metrics-dir", dir, "--", "true")
	after := time.Now()
	if code != 0 || stderr != "" {
		t.Fatalf("succeeded run: exit %d, stderr %q", code, stderr)
	}
	fams := promFamilies(t, path)
	for name, typ := range map[string]dto.MetricType{
		metricLastRun: dto.MetricType_GAUGE, metricLastSuccess: dto.MetricType_GAUGE,
		metricLastDuration: dto.MetricType_GAUGE, metricLastExitCode: dto.MetricType_GAUGE,
		metricLastStatus: dto.MetricType_GAUGE, metricRuns: dto.MetricType_COUNTER,
	} {
		mf := fams[name]
		if mf == nil {
			t.Fatalf("no %s in the file", name)
		}
		if mf.GetType() != typ || mf.GetHelp() == "" {
			t.Errorf("%s: type %v, help %q; want %v with a HELP text", name, mf.GetType(), mf.GetHelp(), typ)
		}
		for _, m := range mf.GetMetric() {
			if _, ok := promtest.SeriesOf(m, key, "clinode"); !ok {
				t.Errorf("%s series %v: want labels key=%q node=clinode", name, m.GetLabel(), key)
			}
		}
	}
	if len(fams) != 6 {
		t.Errorf("%d metric families, want 6", len(fams))
	}
	runs["succeeded"]++
	checkLastStatus(t, fams, "succeeded")
	checkRuns(t, fams, runs)
	lastRun := promValue(t, fams, metricLastRun, "")
	checkTime(t, metricLastRun, lastRun, before, after)
	success := promValue(t, fams, metricLastSuccess, "")
	if success != lastRun {
		t.Errorf("last success %f, want the last run's end %f", success, lastRun)
	}
	if d := promValue(t, fams, metricLastDuration, ""); d <= 0 || d > after.Sub(before).Seconds() {
		t.Errorf("last duration %v s, want within the run's %v", d, after.Sub(before))
	}
	if got := promValue(t, fams, metricLastExitCode, ""); got != 0 {
		t.Errorf("last exit code %v, want 0", got)
	}

	// failed: the last success stays.
	before = time.Now()
	code, _, _ = c.run("run", "-k", key, "--metrics-dir", dir, "--", "sh", "-c", "sleep 0.2; exit 3")
	after = time.Now()
	if code != 3 {
		t.Fatalf("failed run: exit %d, want 3", code)
	}
	fams = promFamilies(t, path)
	runs["failed"]++
	checkLastStatus(t, fams, "failed")
	checkRuns(t, fams, runs)
	checkTime(t, metricLastRun, promValue(t, fams, metricLastRun, ""), before, after)
	if got := promValue(t, fams, metricLastSuccess, ""); got != success {
		t.Errorf("after a failed run, last success %f, want the earlier %f", got, success)
	}
	if got := promValue(t, fams, metricLastExitCode, ""); got != 3 {
		t.Errorf("last exit code %v, want 3", got)
	}
	if d := promValue(t, fams, metricLastDuration, ""); d < 0.2 || d > after.Sub(before).Seconds() {
		t.Errorf("last duration %v s, want 0.2 s to %v", d, after.Sub(before))
	}

	// skipped, while another cronlock holds the key; then that one is interrupted.
	ready := filepath.Join(c.dir, "ready")
	holder := c.command("run", "-k", key, "--metrics-dir", dir, "--", "sh", "-c", "touch "+ready+"; exec sleep 30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	proctest.WaitFile(t, ready)
	code, _, stderr = c.run("run", "-k", key, "--metrics-dir", dir, "--conflict-exit-code", "9", "--", "true")
	if code != 9 || stderr != "" {
		t.Fatalf("skipped run: exit %d, stderr %q; want 9 and silence", code, stderr)
	}
	fams = promFamilies(t, path)
	runs["skipped"]++
	checkLastStatus(t, fams, "skipped")
	checkRuns(t, fams, runs)
	if got := promValue(t, fams, metricLastExitCode, ""); got != 9 {
		t.Errorf("last exit code %v, want 9 (--conflict-exit-code)", got)
	}
	if got := promValue(t, fams, metricLastSuccess, ""); got != success {
		t.Errorf("after a skipped run, last success %f, want %f", got, success)
	}

	holder.Process.Signal(syscall.SIGTERM)
	err := holder.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+15 {
		t.Fatalf("holder ended with %v, want exit 143", err)
	}
	fams = promFamilies(t, path)
	runs["interrupted"]++
	checkLastStatus(t, fams, "interrupted")
	checkRuns(t, fams, runs)
	if got := promValue(t, fams, metricLastExitCode, ""); got != 143 {
		t.Errorf("last exit code %v, want 143", got)
	}

	// error: the command does not exist.
	code, _, _ = c.run("run", "-k", key, "--metrics-dir", dir, "--", filepath.Join(c.dir, "no-such-job"))
	if code != 127 {
		t.Fatalf("error run: exit %d, want 127", code)
	}
	fams = promFamilies(t, path)
	runs["error"]++
	checkLastStatus(t, fams, "error")
	checkRuns(t, fams, runs)
	if got := promValue(t, fams, metricLastSuccess, ""); got != success {
		t.Errorf("after an error run, last success %f, want %f", got, success)
	}

	// succeeded again: the last success moves, the counters go on.
	before = time.Now()
	if code, _, _ = c.run("run", "-k", key, "--metrics-dir", dir, "--", "true"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	fams = promFamilies(t, path)
	runs["succeeded"]++
	checkRuns(t, fams, runs)
	checkTime(t, metricLastSuccess, promValue(t, fams, metricLastSuccess, ""), before, time.Now())
}

// TestMetricsNeverSeenHalfWritten runs many cronlocks of one key at once while a reader
// reads the file in a loop: every read parses with all families, the counters never go
// down, and at the end every run is counted once (no increment lost to a race).
func TestMetricsNeverSeenHalfWritten(t *testing.T) {
	c, dir := metricsCLI(t, 0o750)
	path := filepath.Join(dir, "cronlock_busy.prom")
	stop := make(chan struct{})
	var reads atomic.Int64
	readerDone := make(chan error, 1)
	go func() {
		last := 0.0
		for {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				readerDone <- err
				return
			}
			fams, err := promtest.Parse(b)
			if err != nil {
				readerDone <- errors.New("half-written file? " + err.Error() + "\n" + string(b))
				return
			}
			if len(fams) != 6 || len(fams[metricRuns].GetMetric()) != len(metricStatuses) {
				readerDone <- errors.New("incomplete file:\n" + string(b))
				return
			}
			total := 0.0
			for _, m := range fams[metricRuns].GetMetric() {
				total += promtest.Value(m)
			}
			if total < last {
				readerDone <- errors.New("runs_total went down")
				return
			}
			last = total
			reads.Add(1)
		}
	}()

	const workers, each = 4, 6
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if code, _, stderr := c.run("run", "-k", "busy", "--metrics-dir", dir, "--", "true"); code != 0 || stderr != "" {
					t.Errorf("exit %d, stderr %q", code, stderr)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("the reader never saw the file")
	}
	fams := promFamilies(t, path)
	total := promValue(t, fams, metricRuns, "succeeded") + promValue(t, fams, metricRuns, "skipped")
	if total != workers*each {
		t.Fatalf("runs_total succeeded+skipped = %v, want %d: an increment was lost", total, workers*each)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"cronlock_busy.prom", "cronlock_busy.prom.lock"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("metrics folder holds %q, want %q (no temporary file left)", names, want)
	}
}

// TestMetricsFileMode: 0600, plus group read when the folder grants its group read and
// search; never world-readable.
func TestMetricsFileMode(t *testing.T) {
	for _, tc := range []struct {
		dir, want os.FileMode
	}{
		{0o700, 0o600},
		{0o750, 0o640},
		{0o2750, 0o640},
		{0o755, 0o640},
		{0o777, 0o640},
		{0o710, 0o600}, // search without read: not an opt-in
		{0o740, 0o600}, // read without search: the group could not open the file anyway
	} {
		c, dir := metricsCLI(t, tc.dir)
		if code, _, stderr := c.run("run", "-k", "m", "--metrics-dir", dir, "--", "true"); code != 0 || stderr != "" {
			t.Fatalf("folder %04o: exit %d, stderr %q", tc.dir, code, stderr)
		}
		for _, name := range []string{"cronlock_m.prom", "cronlock_m.prom.lock"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Errorf("folder %04o: %s has mode %04o, want %04o", tc.dir, name, got, tc.want)
			}
		}
	}
}

// TestMetricsKeyInFileName: key bytes outside A-Z a-z 0-9 _ . - are %-encoded, so "/"
// makes no sub-folder and ".." no way out; a very long key gets a hashed name that fits.
func TestMetricsKeyInFileName(t *testing.T) {
	c, dir := metricsCLI(t, 0o700)
	long := strings.Repeat("/", 200)
	// The 600 encoded bytes are cut before the triple the 167th byte is in, then hashed.
	longFile := "cronlock_" + strings.Repeat("%2F", 55) + "=a9edaa36c97b0b8200699dcc7a4f4e94.prom"
	for key, file := range map[string]string{
		"team/report:daily": "cronlock_team%2Freport%3Adaily.prom",
		"../up@x":           "cronlock_..%2Fup%40x.prom",
		"a.b_c-d":           "cronlock_a.b_c-d.prom",
		long:                longFile,
	} {
		if code, _, stderr := c.run("run", "-k", key, "--metrics-dir", dir, "--", "true"); code != 0 || stderr != "" {
			t.Fatalf("key %q: exit %d, stderr %q", key, code, stderr)
		}
		fams := promFamilies(t, filepath.Join(dir, file))
		if _, ok := promtest.SeriesOf(fams[metricLastRun].GetMetric()[0], key, "clinode"); !ok {
			t.Errorf("key %q: the file's series are labelled %v", key, fams[metricLastRun].GetMetric()[0].GetLabel())
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() || strings.Contains(e.Name(), "/") {
			t.Errorf("metrics folder holds %q: a key made a sub-folder", e.Name())
		}
	}
	if len(ents) != 8 {
		t.Errorf("metrics folder has %d entries, want 4 .prom files and 4 .lock files", len(ents))
	}
	if _, err := os.Stat(filepath.Join(c.dir, "cronlock_..%2Fup%40x.prom")); err == nil {
		t.Error("a key with .. wrote outside the metrics folder")
	}
}

// TestMetricsUnwritableDir: a metrics folder that cannot be written costs one warning line
// at most once an hour per folder and cause (a per-minute job must not flood cron mail) and changes no
// exit code; a relative one is a usage error.
func TestMetricsUnwritableDir(t *testing.T) {
	c := newCLI(t, "")
	file := filepath.Join(c.dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Each folder's problem is its own: the first run with it warns at once.
	for _, dir := range []string{filepath.Join(c.dir, "missing"), file, filepath.Join(file, "sub")} {
		for i, job := range []struct {
			argv []string
			code int
		}{{[]string{"true"}, 0}, {[]string{"sh", "-c", "exit 7"}, 7}, {[]string{"true"}, 0}} {
			code, _, stderr := c.run(append([]string{"run", "-k", "u", "--metrics-dir", dir, "--"}, job.argv...)...)
			if code != job.code {
				t.Errorf("--metrics-dir %s, job %q: exit %d, want %d", dir, job.argv, code, job.code)
			}
			if i > 0 {
				if stderr != "" {
					t.Errorf("--metrics-dir %s, run %d within the hour: stderr %q, want nothing", dir, i+1, stderr)
				}
				continue
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "cronlock: warning: cannot write the metrics") || !strings.Contains(lines[0], "CRONLOCK_METRICS_DIR") {
				t.Errorf("--metrics-dir %s: stderr %q, want one warning line", dir, stderr)
			}
		}
	}
	// A folder given through the environment behaves the same, once an hour has passed.
	stamps, _ := filepath.Glob(filepath.Join(c.dir, "locks", ".metrics-*-warned"))
	if len(stamps) != 3 {
		t.Errorf("stamps of the metrics warnings: %v, want one per folder", stamps)
	}
	for _, stamp := range stamps {
		os.Remove(stamp)
	}
	c.env = append(c.env, "CRONLOCK_METRICS_DIR="+filepath.Join(c.dir, "missing"))
	if code, _, stderr := c.run("run", "-k", "u", "--", "sh", "-c", "exit 5"); code != 5 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("CRONLOCK_METRICS_DIR missing: exit %d, stderr %q; want 5 and one warning", code, stderr)
	}
	code, _, stderr := c.run("run", "-k", "u", "--metrics-dir", "rel/dir", "--", "true")
	if code != 125 || !strings.Contains(stderr, "absolute") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("relative --metrics-dir: exit %d, stderr %q; want 125 and one line", code, stderr)
	}
}

// TestMetricsCorruptPreviousFile: a file that does not parse is replaced; the counters
// restart (Prometheus sees a counter reset).
func TestMetricsCorruptPreviousFile(t *testing.T) {
	c, dir := metricsCLI(t, 0o700)
	path := filepath.Join(dir, "cronlock_k.prom")
	if err := os.WriteFile(path, []byte("cronlock_runs_total{key=\"k\" 3\x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := c.run("run", "-k", "k", "--metrics-dir", dir, "--", "true"); code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	checkRuns(t, promFamilies(t, path), map[string]float64{"succeeded": 1})
}
