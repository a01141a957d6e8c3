package metrics

// The text format of node_exporter's textfile collector, as far as cronlock writes and
// reads it: one file per key, every series labelled with the key and the node.

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cronlock/runstatus"
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
var metricStatuses = []string{runstatus.Succeeded, runstatus.Failed, runstatus.Timeout,
	runstatus.LockLost, runstatus.Interrupted, runstatus.Skipped, runstatus.Error, runstatus.Missed, runstatus.Suspended}

// previous are the values carried over from the previous file.
type previous struct {
	runs        map[string]float64 // cronlock_runs_total by status
	lastSuccess float64            // 0 when no run of the key has succeeded
}

// carryOver picks the counters and the last success of key on node out of samples.
// Series of another node (the host was renamed with --node) start afresh.
func carryOver(samples []sample, key, node string) previous {
	prev := previous{runs: map[string]float64{}}
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

// A family is one metric of the file: its HELP and TYPE lines and its series.
type family struct {
	name, typ, help string
	samples         []sample
}

// encode is the metrics file of run f, with prev carried over: families in name order,
// each with its HELP and TYPE lines, and per-status series in status order, so that the
// file changes only where the values do.
func encode(f Facts, prev previous) ([]byte, error) {
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
	if f.Status == runstatus.Succeeded {
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

	families := []family{
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
	slices.SortFunc(families, func(a, b family) int { return strings.Compare(a.name, b.name) })

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

// errSyntax says a metrics file is not one cronlock wrote.
var errSyntax = errors.New("not a cronlock metrics file")

// parse parses a metrics file as encode writes it, and no more of the text format:
// "# HELP " and "# TYPE " lines, which it skips, and sample lines
// name{label="value",...} value, every line ending in a newline. Anything else (another
// comment, a blank line, a timestamp, a label without quotes, an unknown escape, invalid
// UTF-8, a value that is not a finite decimal number) is errSyntax.
func parse(data string) ([]sample, error) {
	var samples []sample
	for data != "" {
		line, rest, ok := strings.Cut(data, "\n")
		if !ok {
			return nil, errSyntax
		}
		data = rest
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		s, ok := parseSample(line)
		if !ok {
			return nil, errSyntax
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

// unixSeconds is t in Unix seconds, as the file writes times.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
