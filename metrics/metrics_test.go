package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"cronlock/internal/promtest"
)

// expfmtCarryOver parses data with expfmt, as node_exporter does, fails t unless every
// series is labelled key and node, and returns the counters and last success it holds.
func expfmtCarryOver(t testing.TB, data []byte, key, node string) previous {
	t.Helper()
	fams, err := promtest.Parse(data)
	if err != nil {
		t.Fatalf("expfmt does not parse the file: %v\n%s", err, data)
	}
	got := previous{runs: map[string]float64{}}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			status, ok := promtest.SeriesOf(m, key, node)
			if !ok {
				t.Fatalf("%s series labelled %v, want key %q, node %q\n%s", name, m.GetLabel(), key, node, data)
			}
			switch name {
			case metricRuns:
				got.runs[status] = promtest.Value(m)
			case metricLastSuccess:
				got.lastSuccess = promtest.Value(m)
			}
		}
	}
	return got
}

// TestMetricsAwkwardLabels writes two runs' files for keys and nodes full of what the
// text format escapes (or must not): each parses with expfmt with exactly those label
// values, the second carries the first's counters, and cronlock's parser agrees.
func TestMetricsAwkwardLabels(t *testing.T) {
	for _, tc := range []struct{ key, node string }{
		{`say "hi"`, "plain"},
		{`back\slash\`, `node\`},
		{"team/report:daily@x", "nœud-ünïcødé-節点-🐳"},
		{`a\"b\n"c`, "two\nlines\\n \"q\""},
		{`\\"\"`, "{},= #\t"},
	} {
		dir := t.TempDir()
		start := time.Unix(1795956040, 123456789)
		first := Facts{Key: tc.key, Node: tc.node, Status: "succeeded", ExitCode: 0,
			Started: start, Finished: start.Add(1500 * time.Millisecond)}
		second := Facts{Key: tc.key, Node: tc.node, Status: "failed", ExitCode: 3,
			Started: start.Add(time.Minute), Finished: start.Add(time.Minute + 250*time.Millisecond)}
		for _, f := range []Facts{first, second} {
			if err := Write(dir, f); err != nil {
				t.Fatalf("key %q node %q: %v", tc.key, tc.node, err)
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, fileName(tc.key)))
		if err != nil {
			t.Fatal(err)
		}
		got := expfmtCarryOver(t, data, tc.key, tc.node)
		want := map[string]float64{"succeeded": 1, "failed": 1}
		for _, s := range metricStatuses {
			if got.runs[s] != want[s] {
				t.Errorf("key %q node %q: expfmt reads runs_total{status=%q} %v, want %v\n%s", tc.key, tc.node, s, got.runs[s], want[s], data)
			}
		}
		if len(got.runs) != len(metricStatuses) {
			t.Errorf("key %q node %q: runs_total has statuses %v", tc.key, tc.node, got.runs)
		}
		if wantTS := unixSeconds(first.Finished); got.lastSuccess != wantTS {
			t.Errorf("key %q node %q: last success %v, want %v", tc.key, tc.node, got.lastSuccess, wantTS)
		}
		fams, _ := promtest.Parse(data)
		for name, want := range map[string]float64{
			metricLastRun: unixSeconds(second.Finished), metricLastDuration: 0.25, metricLastExitCode: 3,
		} {
			if v := promtest.Value(fams[name].GetMetric()[0]); v != want {
				t.Errorf("key %q node %q: %s = %v, want %v", tc.key, tc.node, name, v, want)
			}
		}
		samples, err := parse(string(data))
		if err != nil {
			t.Fatalf("key %q node %q: cronlock's parser refuses its own file: %v\n%s", tc.key, tc.node, err, data)
		}
		if ours := carryOver(samples, tc.key, tc.node); !reflect.DeepEqual(ours, got) {
			t.Errorf("key %q node %q: cronlock reads %+v, expfmt %+v", tc.key, tc.node, ours, got)
		}
	}
}

// TestMetricsInvalidUTF8Node: Prometheus label values are UTF-8, so a node name that is
// not gets an error (the run's warning), not a file node_exporter would refuse.
func TestMetricsInvalidUTF8Node(t *testing.T) {
	dir := t.TempDir()
	err := Write(dir, Facts{Key: "k", Node: "bad\xff", Status: "succeeded"})
	if err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("error %v, want one about UTF-8", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 { // the .lock file only
		t.Errorf("metrics folder holds %v, want only the lock file", ents)
	}
}

// clientGolangFile is a file as cronlock wrote it with client_golang and expfmt (whose
// counters past a million have an exponent): an upgrade carries its counters over.
const clientGolangFile = `# HELP cronlock_last_duration_seconds How long the last run took, from cronlock's start to its outcome (seconds); short for skipped runs.
# TYPE cronlock_last_duration_seconds gauge
cronlock_last_duration_seconds{key="team/rep:d@1",node="nöde \"x\\y"} 0.002783124
# HELP cronlock_last_status 1 for the status of the last run of this key on this node, 0 for every other status.
# TYPE cronlock_last_status gauge
cronlock_last_status{key="team/rep:d@1",node="nöde \"x\\y",status="failed"} 1
# HELP cronlock_last_success_timestamp_seconds When the last succeeded run of this key on this node ended (Unix seconds); 0 if none has succeeded yet.
# TYPE cronlock_last_success_timestamp_seconds gauge
cronlock_last_success_timestamp_seconds{key="team/rep:d@1",node="nöde \"x\\y"} 1.7959560408619604e+09
# HELP cronlock_runs_total Runs of this key on this node by status, counted since the metrics file was first written.
# TYPE cronlock_runs_total counter
cronlock_runs_total{key="team/rep:d@1",node="nöde \"x\\y",status="error"} 0
cronlock_runs_total{key="team/rep:d@1",node="nöde \"x\\y",status="failed"} 1
cronlock_runs_total{key="team/rep:d@1",node="nöde \"x\\y",status="succeeded"} 1.234567e+06
cronlock_runs_total{key="team/rep:d@1",node="other",status="succeeded"} 5
`

// TestMetricsParse: samples written by appendSample read back the same; cronlock's
// earlier client_golang files read; anything else is refused, without panicking.
func TestMetricsParse(t *testing.T) {
	kn := []label{{"key", "k"}, {"node", "n"}}
	for _, s := range []sample{
		{"cronlock_runs_total", append(kn, label{"status", "succeeded"}), 0},
		{"cronlock_runs_total", append(kn, label{"status", "a \"new\" one"}), 1234567},
		{"m", []label{{"key", `a"b\c/d:e`}, {"node", "ünï\ncødé 🐳"}}, 1.7959560408619604e+09},
		{"m:sub_1", nil, -3},
		{"m", kn, 0.002783124},
		{"m", kn, 1e-9},
		{"m", kn, 1 << 53},
		{"m", kn, 1<<53 + 2},
		{"m", kn, 1e300},
		{"m", kn, -1.5e-300},
		{"m", []label{{"_a", ""}, {"b9", `\\\n`}}, 42},
	} {
		line := appendSample(nil, s)
		got, err := parse(string(line))
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], s) {
			t.Errorf("%+v written as %q reads back as %+v, %v", s, line, got, err)
		}
		if _, err := promtest.Parse(line); err != nil {
			t.Errorf("expfmt refuses %q: %v", line, err)
		}
	}
	if got := string(appendValue(nil, 1234567)); got != "1234567" {
		t.Errorf("1234567 written as %s, want no exponent", got)
	}

	checkMetricsRoundTrip(t, []byte(clientGolangFile))
	samples, err := parse(clientGolangFile)
	if err != nil {
		t.Fatalf("a client_golang file does not parse: %v", err)
	}
	prev := carryOver(samples, "team/rep:d@1", `nöde "x\y`)
	want := previous{runs: map[string]float64{"error": 0, "failed": 1, "succeeded": 1234567}, lastSuccess: 1.7959560408619604e+09}
	if !reflect.DeepEqual(prev, want) {
		t.Errorf("client_golang file carries %+v, want %+v", prev, want)
	}

	for _, bad := range []string{
		`m{a="b"} 1`, // no final newline
		"m{a=\"b\"} 1\r\n",
		"\n",
		"# a comment\n",
		"#HELP m x\n",
		"m 1\n",
		"m{} \n",
		"m{}1\n",
		"m{} 1 1795956040000\n",
		"m{a=b} 1\n",
		`m{a="b} 1` + "\n",
		`m{a="b\"} 1` + "\n",
		`m{a="b\t"} 1` + "\n",
		`m{a="b\` + "\n",
		`m{a="b",} 1` + "\n",
		`m{a="b" c="d"} 1` + "\n",
		`m{a="b",a="c"} 1` + "\n",
		`m{a="b"}} 1` + "\n",
		`m{1a="b"} 1` + "\n",
		`m{a:b="c"} 1` + "\n",
		`9m{} 1` + "\n",
		`{} 1` + "\n",
		`m-x{} 1` + "\n",
		"m{a=\"\xff\"} 1\n",
		"m{} NaN\n", "m{} +Inf\n", "m{} -Inf\n", "m{} Inf\n",
		"m{} 0x10\n", "m{} 1_000\n", "m{} 1e999\n", "m{} 1..2\n", "m{} -\n", "m{} e\n",
		"m{} 1\nm{} 2\ngarbage",
		"cronlock_runs_total{key=\"k\" 3\x00garbage",
	} {
		if got, err := parse(bad); err == nil {
			t.Errorf("%q parses as %+v, want an error", bad, got)
		}
	}
}

// checkMetricsRoundTrip checks what FuzzMetricsParse asks of any previous file: reading
// it does not panic; if it parses, its samples written again read back the same; and a
// new file carrying its counters over holds them, read by cronlock and by expfmt alike.
func checkMetricsRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	samples, err := parse(string(data))
	if err != nil {
		return
	}
	var out []byte
	for _, s := range samples {
		out = appendSample(out, s)
	}
	if again, err := parse(string(out)); err != nil || !reflect.DeepEqual(again, samples) {
		t.Fatalf("%q parses as %+v, written again as %q reads as %+v, %v", data, samples, out, again, err)
	}
	if len(samples) == 0 {
		return
	}
	key, node := samples[0].label("key"), samples[0].label("node")
	prev := carryOver(samples, key, node)
	file, err := encode(Facts{Key: key, Node: node, Status: "skipped", ExitCode: 9,
		Started: time.Unix(100, 0), Finished: time.Unix(101, 0)}, prev)
	if err != nil {
		t.Fatalf("encode %+v: %v", prev, err)
	}
	want := previous{runs: map[string]float64{}, lastSuccess: prev.lastSuccess}
	for _, s := range metricStatuses {
		want.runs[s] = 0
	}
	for s, v := range prev.runs {
		want.runs[s] = v
	}
	want.runs["skipped"]++
	newSamples, err := parse(string(file))
	if err != nil {
		t.Fatalf("cronlock's parser refuses its own file: %v\n%s", err, file)
	}
	if got := carryOver(newSamples, key, node); !reflect.DeepEqual(got, want) {
		t.Fatalf("carried %+v over, the new file holds %+v\n%s", prev, got, file)
	}
	if got := expfmtCarryOver(t, file, key, node); !reflect.DeepEqual(got, want) {
		t.Fatalf("carried %+v over, expfmt reads %+v\n%s", prev, got, file)
	}
}

// TestMetricsEncodeGolden pins the file's layout, as expfmt wrote it before: families in
// name order, HELP then TYPE, series in status order (a status only an earlier file
// knew included), labels key, node, status; whole numbers without exponent.
func TestMetricsEncodeGolden(t *testing.T) {
	got, err := encode(Facts{Key: "k", Node: "n", Status: "failed", ExitCode: 3,
		Started: time.Unix(1795956040, 0), Finished: time.Unix(1795956041, 500000000)},
		previous{runs: map[string]float64{"succeeded": 1234567, "new": 2}, lastSuccess: 1795956000})
	if err != nil {
		t.Fatal(err)
	}
	const want = `# HELP cronlock_last_duration_seconds How long the last run took, from cronlock's start to its outcome (seconds); short for skipped runs.
# TYPE cronlock_last_duration_seconds gauge
cronlock_last_duration_seconds{key="k",node="n"} 1.5
# HELP cronlock_last_exit_code The exit code cronlock gave for the last run: the job's own, 124 timeout, 125 cronlock failed, 128+N signal, --conflict-exit-code when skipped.
# TYPE cronlock_last_exit_code gauge
cronlock_last_exit_code{key="k",node="n"} 3
# HELP cronlock_last_run_timestamp_seconds When the last run of this key on this node ended (Unix seconds), whatever its status.
# TYPE cronlock_last_run_timestamp_seconds gauge
cronlock_last_run_timestamp_seconds{key="k",node="n"} 1.7959560415e+09
# HELP cronlock_last_status 1 for the status of the last run of this key on this node, 0 for every other status.
# TYPE cronlock_last_status gauge
cronlock_last_status{key="k",node="n",status="error"} 0
cronlock_last_status{key="k",node="n",status="failed"} 1
cronlock_last_status{key="k",node="n",status="interrupted"} 0
cronlock_last_status{key="k",node="n",status="lock_lost"} 0
cronlock_last_status{key="k",node="n",status="missed"} 0
cronlock_last_status{key="k",node="n",status="new"} 0
cronlock_last_status{key="k",node="n",status="skipped"} 0
cronlock_last_status{key="k",node="n",status="succeeded"} 0
cronlock_last_status{key="k",node="n",status="suspended"} 0
cronlock_last_status{key="k",node="n",status="timeout"} 0
# HELP cronlock_last_success_timestamp_seconds When the last succeeded run of this key on this node ended (Unix seconds); 0 if none has succeeded yet.
# TYPE cronlock_last_success_timestamp_seconds gauge
cronlock_last_success_timestamp_seconds{key="k",node="n"} 1795956000
# HELP cronlock_runs_total Runs of this key on this node by status, counted since the metrics file was first written.
# TYPE cronlock_runs_total counter
cronlock_runs_total{key="k",node="n",status="error"} 0
cronlock_runs_total{key="k",node="n",status="failed"} 1
cronlock_runs_total{key="k",node="n",status="interrupted"} 0
cronlock_runs_total{key="k",node="n",status="lock_lost"} 0
cronlock_runs_total{key="k",node="n",status="missed"} 0
cronlock_runs_total{key="k",node="n",status="new"} 2
cronlock_runs_total{key="k",node="n",status="skipped"} 0
cronlock_runs_total{key="k",node="n",status="succeeded"} 1234567
cronlock_runs_total{key="k",node="n",status="suspended"} 0
cronlock_runs_total{key="k",node="n",status="timeout"} 0
`
	if string(got) != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
}

// TestNoPrometheusLibrary: the cronlock binary links no prometheus library (see the
// package comment); only the tests use expfmt, to read the files as node_exporter does.
func TestNoPrometheusLibrary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command("go", "list", "-deps", "cronlock").Output()
	if err != nil {
		t.Fatalf("go list -deps cronlock: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/prometheus/") {
			t.Errorf("the cronlock binary links %s", pkg)
		}
	}
}

// TestWriteFiles: Write leaves the metrics file and its lock file, with the folder's
// mode (0600, or 0640 when the folder grants its group read and search), and nothing
// else; a folder that is missing or not a folder is an error.
func TestWriteFiles(t *testing.T) {
	for dirMode, want := range map[os.FileMode]os.FileMode{0o700: 0o600, 0o710: 0o600, 0o750: 0o640, 0o2750: 0o640} {
		dir := filepath.Join(t.TempDir(), "m")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, dirMode); err != nil { // not subject to the umask
			t.Fatal(err)
		}
		for range 2 {
			if err := Write(dir, Facts{Key: "a/b", Node: "n", Status: "succeeded"}); err != nil {
				t.Fatalf("folder %04o: %v", dirMode, err)
			}
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode(); got != want {
				t.Errorf("folder %04o: %s has mode %v, want %v", dirMode, e.Name(), got, want)
			}
		}
		if got := strings.Join(names, " "); got != "cronlock_a%2Fb.prom cronlock_a%2Fb.prom.lock" {
			t.Errorf("folder %04o holds %s", dirMode, got)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		if err := Write(dir, Facts{Key: "k", Node: "n", Status: "failed"}); err == nil || !strings.Contains(err.Error(), "metrics folder") {
			t.Errorf("Write(%s): %v, want an error about the metrics folder", dir, err)
		}
	}
}
