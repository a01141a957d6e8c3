package cmd

// Metrics for node_exporter's textfile collector. After every run (--metrics-dir),
// cronlock rewrites DIR/cronlock_<key>.prom with what the last run of that key on this
// host came to, and counters carried over from the file it replaces. cronlock serves no
// HTTP endpoint and pushes nowhere: node_exporter reads the folder.
//
// The text format is written, and read back, by the few functions below rather than by
// prometheus/client_golang and prometheus/common/expfmt: linking those cost every cronlock
// invocation, with or without --metrics-dir, about 1 ms of package init (client_golang's
// default registry, procfs, protobuf descriptors) and 3.5 MB of binary, several times
// the per-run overhead cronlock aims for. The tests check the files against expfmt's
// parser, as node_exporter reads them.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Metric names. Every series carries the labels key and node.
const (
	metricLastRun      = "cronlock_last_run_timestamp_seconds"
	metricLastSuccess  = "cronlock_last_success_timestamp_seconds"
	metricLastDuration = "cronlock_last_duration_seconds"
	metricLastExitCode = "cronlock_last_exit_code"
	metricLastStatus   = "cronlock_last_status"
	metricRuns         = "cronlock_runs_total"
)

// metricStatuses are the statuses a finished run can have. cronlock_last_status has one
// series for each (1 for the last run's, 0 for the others), and cronlock_runs_total
// starts each at 0, so a series never appears out of nowhere: `== 1` alerts and
// increase() see the first failure too.
var metricStatuses = []string{"succeeded", "failed", "timeout", "lock_lost", "interrupted", "skipped", "error"}

// metricsLockWait bounds the wait for another cronlock of the same key writing the file:
// it holds the lock for a read, a write and an fsync, so seconds mean a stuck disk.
const metricsLockWait = 10 * time.Second

// runFacts are what a finished run tells the metrics file.
type runFacts struct {
	Key, Node string
	Status    string    // the history status: succeeded, failed, skipped…
	ExitCode  int       // cronlock's own exit code, the one cron saw
	Started   time.Time // when cronlock started the run
	Finished  time.Time // when its outcome was known
}

// recordMetrics writes the metrics file of a finished run when --metrics-dir is set.
// A failure is one warning line, at most once an hour per host (a misconfigured folder
// under a per-minute job must not flood cron mail): monitoring never changes a run's exit
// code.
func (r *runner) recordMetrics(code int) {
	o := r.o
	if o.MetricsDir == "" || r.row == nil || r.row.Status == "" {
		return
	}
	f := runFacts{Key: o.Key, Node: o.Node, Status: r.row.Status, ExitCode: code,
		Started: r.row.StartedAt, Finished: r.row.FinishedAt}
	if err := writeRunMetrics(o.MetricsDir, f); err != nil && !o.Quiet && !r.warnedLately("metrics") {
		r.infof("warning: cannot write the metrics of this run (%v); its exit code is unchanged. Fix that folder, or unset --metrics-dir and CRONLOCK_METRICS_DIR", err)
	}
}

// checkMetricsDir refuses a relative --metrics-dir: cron starts jobs in the home folder,
// a login shell wherever it is, and node_exporter reads one fixed folder.
func checkMetricsDir(dir string) error {
	if dir != "" && !filepath.IsAbs(dir) {
		return fmt.Errorf("--metrics-dir %q is not an absolute path; give node_exporter's textfile folder, e.g. /var/lib/node_exporter/textfile_collector", dir)
	}
	return nil
}

// writeRunMetrics rewrites dir/cronlock_<key>.prom for run f. The previous file is read
// back and replaced under a flock on a sibling ".prom.lock" file, so that two runs of one
// key on one host never lose an increment; the new file is written beside it, fsynced
// and renamed over it, so a reader sees the old file or the new one, never a part.
// dir must exist: cronlock does not create node_exporter's folder, whose permissions are
// the admin's choice (see metricsFileMode).
func writeRunMetrics(dir string, f runFacts) error {
	mode, err := metricsFileMode(dir)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, metricsFileName(f.Key))
	unlock, err := lockMetrics(path+".lock", mode, metricsLockWait)
	if err != nil {
		return err
	}
	defer unlock()

	prev, err := readMetrics(path, f.Key, f.Node)
	if err != nil {
		return err
	}
	data, err := encodeMetrics(f, prev)
	if err != nil {
		return err
	}
	return replaceFile(path, mode, data)
}

// metricsFileMode is the mode of the files cronlock writes in dir. cronlock's files are
// private to their owner (0600), but node_exporter usually runs as another user: when
// dir itself grants its group read and search (e.g. root:node_exporter 2750), the admin
// has opted that group in, and the file gets group read (0640). Never world-readable.
func metricsFileMode(dir string) (os.FileMode, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, fmt.Errorf("metrics folder: %w", err)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("metrics folder %s is not a folder", dir)
	}
	if fi.Mode().Perm()&0o050 == 0o050 {
		return 0o640, nil
	}
	return 0o600, nil
}

// metricsFileName is cronlock_<key>.prom with every byte of key outside A-Z a-z 0-9 _ . -
// written as %XX (as lock files do), so "/" cannot make a sub-folder and ":" no odd name.
// A key too long for a file name once encoded keeps its first encoded bytes, then "="
// and 32 hex digits of its SHA-256 ("=" never appears in an encoded key); the limit
// leaves room for the ".lock" and ".tmp" siblings within the usual 255-byte NAME_MAX.
func metricsFileName(key string) string {
	const hexdigits = "0123456789ABCDEF"
	const maxEncoded = 200
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	enc := b.String()
	if len(enc) > maxEncoded {
		cut := maxEncoded - 33
		for cut >= 2 && (enc[cut-1] == '%' || enc[cut-2] == '%') { // do not split a %XX
			cut--
		}
		sum := sha256.Sum256([]byte(key))
		enc = enc[:cut] + "=" + hex.EncodeToString(sum[:16])
	}
	return "cronlock_" + enc + ".prom"
}

// lockMetrics takes an exclusive flock on the lock file at path (created with mode,
// never removed: removing a lock file lets two holders in). unlock releases it.
func lockMetrics(path string, mode os.FileMode, wait time.Duration) (unlock func(), err error) {
	// Read-only is enough for flock, and lets a group that may read the folder share it.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EWOULDBLOCK || time.Now().After(deadline) {
			unix.Close(fd)
			if err == unix.EWOULDBLOCK {
				return nil, fmt.Errorf("%s stayed locked for %v by another cronlock of this key", path, wait)
			}
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		time.Sleep(pause)
	}
}

// prevMetrics are the values carried over from the previous file.
type prevMetrics struct {
	runs        map[string]float64 // cronlock_runs_total by status
	lastSuccess float64            // 0 when no run of the key has succeeded
}

// maxMetricsFile bounds what readMetrics reads: cronlock's files are a few KB, so a
// bigger one is not one of them.
const maxMetricsFile = 1 << 20

// readMetrics reads the counters and the last success of key on node from the metrics
// file at path. A missing file is a first run. A file that does not parse (a disk that
// lost it, a hand edit) is replaced: the counters restart at 0, which Prometheus's rate()
// and increase() take for a reset. A file that cannot be read at all is an error, so that
// its counters are not thrown away by a run that lacks the rights to see them.
func readMetrics(path, key, node string) (prevMetrics, error) {
	prev := prevMetrics{runs: map[string]float64{}}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return prev, nil
	}
	if err != nil {
		return prev, fmt.Errorf("read %s: %w", path, err)
	}
	file := os.NewFile(uintptr(fd), path)
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxMetricsFile+1))
	if err != nil {
		return prev, fmt.Errorf("read %s: %w", path, err)
	}
	samples, err := parseMetrics(string(data))
	if err != nil || len(data) > maxMetricsFile {
		return prev, nil
	}
	return carryOver(samples, key, node), nil
}

// carryOver picks the counters and the last success of key on node out of samples.
// Series of another node (the host was renamed with --node) start afresh.
func carryOver(samples []sample, key, node string) prevMetrics {
	prev := prevMetrics{runs: map[string]float64{}}
	for _, s := range samples {
		if s.label("key") != key || s.label("node") != node {
			continue
		}
		switch s.name {
		case metricRuns:
			if status := s.label("status"); status != "" {
				prev.runs[status] = s.value
			}
		case metricLastSuccess:
			prev.lastSuccess = s.value
		}
	}
	return prev
}

// A sample is one series of a metrics file and its value: name{label="value",...} value.
type sample struct {
	name   string
	labels []label // in the file's order
	value  float64
}

// A label is one name="value" pair of a sample, its value unescaped.
type label struct{ name, value string }

// label is the value of s's label name, "" if it has none.
func (s sample) label(name string) string {
	for _, l := range s.labels {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

// A metricFamily is one metric of the file: its HELP and TYPE lines and its series.
type metricFamily struct {
	name, typ, help string
	samples         []sample
}

// encodeMetrics is the metrics file of run f, with prev carried over: families in name
// order, each with its HELP and TYPE lines, and per-status series in status order, so
// that the file changes only where the values do.
func encodeMetrics(f runFacts, prev prevMetrics) ([]byte, error) {
	for _, v := range []string{f.Key, f.Node} {
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("label value %q is not valid UTF-8, which Prometheus requires; give --node (or CRONLOCK_NODE) a UTF-8 name", v)
		}
	}
	finished := f.Finished
	if finished.IsZero() {
		finished = time.Now()
	}
	lastSuccess := prev.lastSuccess
	if f.Status == "succeeded" {
		lastSuccess = unixSeconds(finished)
	}
	series := func(name string, v float64, extra ...label) sample {
		return sample{name, append([]label{{"key", f.Key}, {"node", f.Node}}, extra...), v}
	}

	// Statuses outside metricStatuses (one a later cronlock adds) keep their series too.
	statuses := slices.Clone(metricStatuses)
	for _, s := range append(slices.Collect(maps.Keys(prev.runs)), f.Status) {
		if !slices.Contains(statuses, s) {
			statuses = append(statuses, s)
		}
	}
	slices.Sort(statuses)
	var last, runs []sample
	for _, s := range statuses {
		v, n := 0.0, prev.runs[s]
		if s == f.Status {
			v, n = 1, n+1
		}
		last = append(last, series(metricLastStatus, v, label{"status", s}))
		runs = append(runs, series(metricRuns, n, label{"status", s}))
	}

	families := []metricFamily{
		{metricLastRun, "gauge", "When the last run of this key on this node ended (Unix seconds), whatever its status.",
			[]sample{series(metricLastRun, unixSeconds(finished))}},
		{metricLastSuccess, "gauge", "When the last succeeded run of this key on this node ended (Unix seconds); 0 if none has succeeded yet.",
			[]sample{series(metricLastSuccess, lastSuccess)}},
		{metricLastDuration, "gauge", "How long the last run took, from cronlock's start to its outcome (seconds); short for skipped runs.",
			[]sample{series(metricLastDuration, finished.Sub(f.Started).Seconds())}},
		{metricLastExitCode, "gauge", "The exit code cronlock gave for the last run: the job's own, 124 timeout, 125 cronlock failed, 128+N signal, --conflict-exit-code when skipped.",
			[]sample{series(metricLastExitCode, float64(f.ExitCode))}},
		{metricLastStatus, "gauge", "1 for the status of the last run of this key on this node, 0 for every other status.", last},
		{metricRuns, "counter", "Runs of this key on this node by status, counted since the metrics file was first written.", runs},
	}
	slices.SortFunc(families, func(a, b metricFamily) int { return strings.Compare(a.name, b.name) })

	var b []byte
	for _, fam := range families {
		// The HELP texts hold no backslash or newline, the two bytes HELP would escape.
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", fam.name, fam.help, fam.name, fam.typ)
		for _, s := range fam.samples {
			b = appendSample(b, s)
		}
	}
	return b, nil
}

// appendSample appends s as one line of the text format. Its names must be valid
// metric and label names; its label values are escaped as the format requires.
func appendSample(b []byte, s sample) []byte {
	b = append(b, s.name...)
	b = append(b, '{')
	for i, l := range s.labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.name...)
		b = append(b, `="`...)
		b = append(b, labelEscaper.Replace(l.value)...)
		b = append(b, '"')
	}
	b = append(b, "} "...)
	b = appendValue(b, s.value)
	return append(b, '\n')
}

// labelEscaper escapes a label value: backslash, double quote and newline are the
// three bytes the text format escapes; everything else, UTF-8 included, stays as is.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// appendValue formats v as expfmt does (strconv's shortest 'g', NaN, +Inf, -Inf), except
// that a whole number is written without exponent: 1000000, not 1e+06.
func appendValue(b []byte, v float64) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// errMetricsSyntax says a metrics file is not one cronlock wrote.
var errMetricsSyntax = errors.New("not a cronlock metrics file")

// parseMetrics parses a metrics file as encodeMetrics writes it, and no more of the text
// format: "# HELP " and "# TYPE " lines, which it skips, and sample lines
// name{label="value",...} value, every line ending in a newline. Anything else (another
// comment, a blank line, a timestamp, a label without quotes, an unknown escape, invalid
// UTF-8, a value that is not a finite decimal number) is errMetricsSyntax.
func parseMetrics(data string) ([]sample, error) {
	var samples []sample
	for data != "" {
		line, rest, ok := strings.Cut(data, "\n")
		if !ok {
			return nil, errMetricsSyntax
		}
		data = rest
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		s, ok := parseSample(line)
		if !ok {
			return nil, errMetricsSyntax
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// parseSample parses one sample line, reporting whether it is well-formed.
func parseSample(line string) (s sample, ok bool) {
	name, rest, ok := strings.Cut(line, "{")
	if !ok || !validName(name, true) {
		return s, false
	}
	s.name = name
	for !strings.HasPrefix(rest, "} ") {
		if len(s.labels) > 0 {
			if rest == "" || rest[0] != ',' {
				return s, false
			}
			rest = rest[1:]
		}
		var l label
		l.name, rest, ok = strings.Cut(rest, `="`)
		if !ok || !validName(l.name, false) || slices.ContainsFunc(s.labels, func(o label) bool { return o.name == l.name }) {
			return s, false
		}
		if l.value, rest, ok = unquoteLabel(rest); !ok {
			return s, false
		}
		s.labels = append(s.labels, l)
	}
	s.value, ok = parseValue(rest[len("} "):])
	return s, ok
}

// validName reports whether s is a metric name (colons allowed) or a label name.
func validName(s string, colons bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == ':' && colons || '0' <= c && c <= '9' && i > 0) {
			return false
		}
	}
	return s != ""
}

// unquoteLabel reads a label value up to its closing quote, undoing labelEscaper.
func unquoteLabel(s string) (value, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			value = b.String()
			return value, s[i+1:], utf8.ValidString(value)
		case '\\':
			if i++; i == len(s) {
				return "", "", false
			}
			switch s[i] {
			case '\\', '"':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", false
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// parseValue reads a sample value as appendValue writes it: a finite decimal number
// (no hexadecimal, underscores, Inf or NaN, which ParseFloat alone would take).
func parseValue(s string) (float64, bool) {
	if s == "" || strings.Trim(s, "0123456789.eE+-") != "" {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// replaceFile writes data to path atomically: a temporary sibling (not ending in .prom, so
// node_exporter ignores it), fsynced, given mode, then renamed over path. The caller holds
// the key's lock, so the temporary name is fixed: a crash leaves at most one, which the
// next run replaces. The folder is not fsynced: a power cut that loses the rename leaves
// the previous file, behind by one run, which is harmless for these metrics.
func replaceFile(path string, mode os.FileMode, data []byte) error {
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	// O_EXCL: a symbolic link planted at tmp is not followed.
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	file := os.NewFile(uintptr(fd), tmp)
	err = writeSyncChmod(file, mode, data)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeSyncChmod writes data, sets mode (Chmod on the open file: the umask does not
// apply, and the mode is right before the file gets its public name) and fsyncs.
func writeSyncChmod(file *os.File, mode os.FileMode, data []byte) error {
	if _, err := file.Write(data); err != nil {
		return err
	}
	if err := file.Chmod(mode); err != nil {
		return err
	}
	return file.Sync()
}
