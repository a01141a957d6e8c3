package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

func runHistory(t *testing.T, o historyOptions) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	o.Stdout, o.Stderr = &out, &errb
	if o.Loc == nil {
		o.Loc = time.FixedZone("CEST", 2*3600)
	}
	err := historyRun(&o)
	return out.String(), errb.String(), err
}

func TestHistoryJSON(t *testing.T) {
	path := historyFixture(t)
	out, _, err := runHistory(t, historyOptions{Path: path, JSON: true, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), out)
	}
	fields := []string{"id", "key", "node", "pid", "command", "status", "exit_code", "signal",
		"started_at", "finished_at", "duration_ms", "error", "holder", "fencing_token", "backend"}
	byStatus := map[string]map[string]any{}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("line %s lacks %q", l, f)
			}
		}
		if _, ok := m["command"].([]any); !ok {
			t.Errorf("command is not an array: %v", m["command"])
		}
		byStatus[m["status"].(string)] = m
	}
	for _, c := range []struct {
		status, field string
		want          any
	}{
		{"succeeded", "exit_code", 0.0},
		{"succeeded", "signal", nil},
		{"succeeded", "started_at", "2025-06-01T07:00:00Z"},
		{"succeeded", "finished_at", "2025-06-01T07:00:01.5Z"},
		{"succeeded", "duration_ms", 1500.0},
		{"succeeded", "fencing_token", 17.0},
		{"succeeded", "backend", "local /run/cronlock"},
		{"failed", "exit_code", 3.0},
		{"failed", "node", "evil\x1b[31m\x07"}, // JSON escapes it itself; the value is exact
		{"skipped", "holder", "web-1 (pid 10, run x)"},
		{"skipped", "exit_code", nil},
		{"interrupted", "signal", "SIGTERM"},
		{"interrupted", "exit_code", nil},
		{"running", "finished_at", nil},
		{"running", "duration_ms", nil},
		{"running", "exit_code", nil},
	} {
		if got := byStatus[c.status][c.field]; got != c.want {
			t.Errorf("%s: %s = %#v, want %#v", c.status, c.field, got, c.want)
		}
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Error("raw ESC in JSON output")
	}
	// Newest first.
	if !strings.Contains(lines[0], `"status":"running"`) || !strings.Contains(lines[4], `"status":"succeeded"`) {
		t.Errorf("not newest first:\n%s", out)
	}
}

func TestHistoryTable(t *testing.T) {
	path := historyFixture(t)
	out, _, err := runHistory(t, historyOptions{Path: path, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []byte{0x1b, 0x07} {
		if strings.IndexByte(out, b) >= 0 {
			t.Errorf("control byte %#x reached the terminal:\n%q", b, out)
		}
	}
	for _, want := range []string{
		"STARTED", "KEY", "NODE", "STATUS", "EXIT", "DURATION", "COMMAND",
		`evil\x1b[31m\a`,                              // node escaped
		`exit status 3\x1b[2J`,                        // error escaped
		`sh -c 'printf '\'$'\x1b'']0;pwned'$'\x07'\'`, // command shell-quoted, controls escaped
		"2025-06-01 09:00:00 CEST",                    // local time with zone
		"1.5s", "42ms", "SIGTERM", "held by web-1 (pid 10, run x)",
		"/opt/jobs/billing.sh --all",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Columns line up: every row has STATUS at the header's column.
	lines := strings.Split(out, "\n")
	col := strings.Index(lines[0], "STATUS")
	for _, l := range lines[1:6] {
		rest := l[col:]
		if !strings.HasPrefix(rest, "succeeded") && !strings.HasPrefix(rest, "failed") && !strings.HasPrefix(rest, "skipped") &&
			!strings.HasPrefix(rest, "interrupted") && !strings.HasPrefix(rest, "running") {
			t.Errorf("misaligned row %q", l)
		}
	}

	utc, _, _ := runHistory(t, historyOptions{Path: path, Limit: 1, UTC: true, Key: "billing"})
	if !strings.Contains(utc, "2025-06-01 07:01:00 UTC") || strings.Count(utc, "\n") != 2 {
		t.Errorf("--utc --key billing --limit 1:\n%s", utc)
	}
}

func TestHistoryColor(t *testing.T) {
	path := historyFixture(t)
	plain, _, _ := runHistory(t, historyOptions{Path: path, Color: false})
	if strings.Contains(plain, "\x1b[") {
		t.Errorf("colour codes with color=false:\n%q", plain)
	}
	colored, _, _ := runHistory(t, historyOptions{Path: path, Color: true})
	if !strings.Contains(colored, "\x1b[31mfailed") || !strings.Contains(colored, "\x1b[32msucceeded") {
		t.Errorf("no colours with color=true:\n%q", colored)
	}
	// The only escape sequences are our colours: the node's ESC is still escaped.
	if strings.Contains(colored, "\x1b[31m\a") || strings.Contains(colored, "evil\x1b") {
		t.Errorf("job bytes reached the terminal with colours on:\n%q", colored)
	}

	t.Setenv("NO_COLOR", "1")
	if wantColor(nil) {
		t.Error("colour wanted with NO_COLOR set")
	}
}

func TestHistoryFilters(t *testing.T) {
	path := historyFixture(t)
	for _, c := range []struct {
		o     historyOptions
		lines int
	}{
		{historyOptions{Status: runstatus.Skipped}, 1},
		{historyOptions{Node: "web-2"}, 2},
		{historyOptions{Key: "billing"}, 2},
		{historyOptions{Limit: 3}, 3},
		{historyOptions{Key: "nope"}, 0},
	} {
		c.o.Path, c.o.JSON = path, true
		out, _, err := runHistory(t, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out, "\n"); got != c.lines {
			t.Errorf("%+v: %d lines, want %d", c.o, got, c.lines)
		}
	}
}

func TestHistoryMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none", "history.db")
	out, _, err := runHistory(t, historyOptions{Path: path})
	if err != nil || !strings.Contains(out, "no runs recorded yet in "+path) {
		t.Errorf("missing file: %q, %v", out, err)
	}
	out, errs, err := runHistory(t, historyOptions{Path: path, JSON: true})
	if err != nil || out != "" || !strings.Contains(errs, "no runs recorded yet") {
		t.Errorf("missing file --json: stdout %q stderr %q, %v", out, errs, err)
	}
	if _, err := filepath.Glob(path); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Dir(path)); len(m) != 0 {
		t.Error("listing a missing history created it")
	}
}

func TestHistoryReapsDeadRuns(t *testing.T) {
	path := historyFixture(t) // its running row's Store is closed: the run is dead
	out, _, err := runHistory(t, historyOptions{Path: path, JSON: true, ThisNode: "web-1", Key: "live"})
	if err != nil || !strings.Contains(out, `"status":"abandoned"`) {
		t.Errorf("dead run not reaped: %s, %v", out, err)
	}
}

func TestHistoryCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	if err := writeFile(path, bytes.Repeat([]byte{0xde, 0xad}, 4096)); err != nil {
		t.Fatal(err)
	}
	_, _, err := runHistory(t, historyOptions{Path: path})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt file: %v", err)
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }
