package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jsonLines parses every stderr line as one JSON object.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", line, err)
		}
		for _, f := range []string{"time", "level", "msg"} {
			if _, ok := m[f]; !ok {
				t.Errorf("line %q has no %q", line, f)
			}
		}
		out = append(out, m)
	}
	return out
}

// TestLogFormatJSON: with --log-format json (or CRONLOCK_LOG_FORMAT, or the config file)
// every cronlock message is one JSON object carrying the run's id, key, node and status;
// text stays "cronlock: …".
func TestLogFormatJSON(t *testing.T) {
	c := newCLI(t, "")
	missing := filepath.Join(c.dir, "no-such-job")
	code, stdout, stderr := c.run("run", "-k", "j/1", "--log-format", "json", "-v", "--", missing)
	if code != 127 || stdout != "" {
		t.Fatalf("exit %d, stdout %q; want 127", code, stdout)
	}
	lines := jsonLines(t, stderr)
	rows := c.history("j/1")
	if len(rows) != 1 {
		t.Fatalf("history %+v", rows)
	}
	var sawError bool
	for _, m := range lines {
		if m["run_id"] != rows[0].ID || m["key"] != "j/1" || m["node"] != "clinode" {
			t.Errorf("line %v: want run_id %s, key j/1, node clinode", m, rows[0].ID)
		}
		if m["level"] == "ERROR" {
			sawError = true
			if m["status"] != "error" || !strings.Contains(m["msg"].(string), "no-such-job") {
				t.Errorf("error line %v: want status error and the reason", m)
			}
		}
		if strings.HasPrefix(m["msg"].(string), "cronlock:") {
			t.Errorf("line %v: the msg keeps the text prefix", m)
		}
	}
	if !sawError || len(lines) < 3 { // acquired, not found, released
		t.Errorf("json lines %v: want the verbose steps and one ERROR", lines)
	}

	// The environment, a failed job's warning-free end, and a cronlock error with status.
	env := c.env
	c.env = append(env, "CRONLOCK_LOG_FORMAT=json")
	code, _, stderr = c.run("run", "-k", "j2", "--timeout", "100ms", "--grace", "100ms", "--", "sleep", "5")
	if code != 124 {
		t.Fatalf("exit %d, want 124", code)
	}
	lines = jsonLines(t, stderr)
	if len(lines) != 1 || lines[0]["status"] != "timeout" || lines[0]["key"] != "j2" || lines[0]["run_id"] == "" {
		t.Errorf("timeout lines %v: want one with status timeout, key and run_id", lines)
	}
	// An error before any run (a bad setting) is JSON too, without run fields.
	code, _, stderr = c.run("run", "-k", "j3", "--ttl", "1ms", "--", "true")
	if lines = jsonLines(t, stderr); code != 125 || len(lines) != 1 || lines[0]["level"] != "ERROR" {
		t.Errorf("bad --ttl: exit %d, lines %v; want 125 and one ERROR object", code, lines)
	}
	// So is a bad setting from the environment, whatever order the settings are read in.
	c.env = append(env, "CRONLOCK_LOG_FORMAT=json", "CRONLOCK_TTL=soon")
	for i := 0; i < 3; i++ {
		code, _, stderr = c.run("run", "-k", "j3", "--", "true")
		if lines = jsonLines(t, stderr); code != 125 || len(lines) != 1 || !strings.Contains(lines[0]["msg"].(string), "CRONLOCK_TTL") {
			t.Errorf("bad CRONLOCK_TTL: exit %d, lines %v; want 125 and one object naming CRONLOCK_TTL", code, lines)
		}
	}
	// Other commands' errors follow the setting from the config file.
	conf := filepath.Join(c.dir, "json.conf")
	os.WriteFile(conf, []byte("CRONLOCK_LOG_FORMAT=json\n"), 0o600)
	c.env = append(env, "CRONLOCK_CONFIG="+conf)
	code, _, stderr = c.run("history", "show", "no-such-run")
	if lines = jsonLines(t, stderr); code != 1 || len(lines) != 1 {
		t.Errorf("history show: exit %d, lines %v; want 1 and one JSON object", code, lines)
	}

	// text is the default and unchanged.
	c.env = env
	code, _, stderr = c.run("run", "-k", "j4", "-v", "--", missing)
	if code != 127 {
		t.Fatalf("exit %d", code)
	}
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if !strings.HasPrefix(line, "cronlock: ") {
			t.Errorf("text line %q lacks the cronlock: prefix", line)
		}
	}
}

// TestLogFormatBad: an unknown format is a usage error (125) with one line, from the flag,
// the environment or the config file, for run and the other commands.
func TestLogFormatBad(t *testing.T) {
	c := newCLI(t, "")
	conf := filepath.Join(c.dir, "bad.conf")
	os.WriteFile(conf, []byte("CRONLOCK_LOG_FORMAT=xml\n"), 0o600)
	env := c.env
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"run", "--log-format", "xml", "-k", "b", "--", "true"}, "--log-format"},
		{"", []string{"status", "--log-format", "JSON"}, "--log-format"},
		{"CRONLOCK_LOG_FORMAT=yaml", []string{"run", "-k", "b", "--", "true"}, "CRONLOCK_LOG_FORMAT"},
		{"CRONLOCK_LOG_FORMAT=yaml", []string{"history"}, "CRONLOCK_LOG_FORMAT"},
		{"CRONLOCK_CONFIG=" + conf, []string{"run", "-k", "b", "--", "true"}, conf},
	} {
		c.env = env
		if tc.env != "" {
			c.env = append(env, tc.env)
		}
		code, stdout, stderr := c.run(tc.args...)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 125 || stdout != "" || len(lines) != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "text or json") {
			t.Errorf("%s %q: exit %d, stderr %q; want 125 and one line naming %s", tc.env, tc.args, code, stderr, tc.want)
		}
	}
	c.env = env
	if rows := c.history("b"); len(rows) != 0 {
		t.Errorf("a refused run was recorded: %+v", rows)
	}
}
