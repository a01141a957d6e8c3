package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
	"cronlock/tty"
)

// columnAt returns the display column (tty.Width of what precedes it) at which re first
// matches in line, or -1.
func columnAt(line string, re *regexp.Regexp) int {
	loc := re.FindStringIndex(line)
	if loc == nil {
		return -1
	}
	return tty.Width(line[:loc[0]])
}

// TestTablesAlignByDisplayWidth: node names and commands with East Asian wide
// characters (two columns each) and combining marks (none) must not push the columns
// after them out of line, in history and in status. A table padded by counting
// characters put STATUS two columns early on the 東京 row.
func TestTablesAlignByDisplayWidth(t *testing.T) {
	c := newCLI(t, "")
	for _, node := range []string{"東京", "plain-node", "Ame\u0301lie"} {
		if code, _, errs := c.run("run", "--backend", "local", "-k", "wide", "--node", node, "--", "echo", "日本語", "x"); code != 0 {
			t.Fatalf("run on %s exited %d: %s", node, code, errs)
		}
	}
	code, out, errs := c.run("history", "--key", "wide")
	if code != 0 {
		t.Fatalf("history exited %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("history table:\n%s", out)
	}
	for _, col := range []struct{ header, cell string }{
		{"STATUS", "succeeded"}, {"EXIT", "0  "}, {"DURATION", "[0-9.]+m?s"},
	} {
		want := columnAt(lines[0], regexp.MustCompile(col.header))
		for _, l := range lines[1:] {
			// The cell is the first match after NODE's column: skip the time and key.
			if got := columnAt(l[strings.Index(l, "wide"):], regexp.MustCompile(col.cell)) + tty.Width(l[:strings.Index(l, "wide")]); got != want {
				t.Errorf("%s of %q at column %d, header at %d:\n%s", col.header, l, got, want, out)
			}
		}
	}

	// status: a lock held by a run on a node with a wide name.
	job := c.command("run", "--backend", "local", "-k", "wide", "--node", "東京大阪", "--", "sleep", "30")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { job.Process.Kill(); job.Wait() }()
	var status string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, status, _ = c.run("status", "--backend", "local")
		if strings.Contains(status, "東京大阪") || time.Now().After(deadline) {
			break
		}
	}
	lines = strings.Split(strings.TrimRight(status, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("status:\n%s", status)
	}
	for _, col := range []struct{ header, cell string }{{"PID", `\b[0-9]+\b`}, {"SINCE", `[0-9]{4}-[0-9]{2}-`}} {
		want := columnAt(lines[1], regexp.MustCompile(col.header))
		row := lines[2]
		after := strings.Index(row, "東京大阪") + len("東京大阪")
		if got := tty.Width(row[:after]) + columnAt(row[after:], regexp.MustCompile(col.cell)); got != want {
			t.Errorf("status %s at column %d, header at %d:\n%s", col.header, got, want, status)
		}
	}
}

// TestJSONDurationsRoundAsTablesDo: a run of 12.6ms is 13ms in the table and must be
// duration_ms 13 in --json, not 12 (JSON truncated, tables rounded); the same in
// history stats, and history show.
func TestJSONDurationsRoundAsTablesDo(t *testing.T) {
	c := newCLI(t, "")
	s, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Minute)
	if err := s.Insert(&history.Run{Key: "round", Node: "clinode", Status: runstatus.Succeeded, ExitCode: new(int),
		Command: []string{"true"}, StartedAt: started, FinishedAt: started.Add(12600 * time.Microsecond)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, check := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "--key", "round"}, " 13ms "},
		{[]string{"history", "--key", "round", "--json"}, `"duration_ms":13,`},
		{[]string{"history", "stats", "--key", "round"}, " 13ms "},
		{[]string{"history", "stats", "--key", "round", "--json"}, `"p50_ms":13,"p95_ms":13,"max_ms":13,`},
	} {
		code, out, errs := c.run(check.args...)
		if code != 0 || !strings.Contains(out, check.want) {
			t.Errorf("cronlock %s: exit %d, want %q in:\n%s%s", strings.Join(check.args, " "), code, check.want, out, errs)
		}
	}
}

// TestHistoryFooterSaysOlderRunsExist: the default view shows the newest 20 runs; when
// more match, a line on stderr says how many and how to see them, so a reader does not
// take 20 rows for the whole history. Not with --json (scripts), nor when all are shown.
func TestHistoryFooterSaysOlderRunsExist(t *testing.T) {
	c := newCLI(t, "")
	s, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour)
	for i := range 23 {
		key := "many"
		if i >= 21 {
			key = "other"
		}
		at := started.Add(time.Duration(i) * time.Second)
		if err := s.Insert(&history.Run{Key: key, Node: "clinode", Status: runstatus.Succeeded, ExitCode: new(int),
			Command: []string{"true"}, StartedAt: at, FinishedAt: at.Add(time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	const footer = "cronlock: %d of %d runs shown, the newest; --limit 0 shows all, --limit N the newest N\n"
	for _, check := range []struct {
		args   []string
		rows   int
		stderr string
	}{
		{[]string{"history"}, 20, fmt.Sprintf(footer, 20, 23)},
		{[]string{"history", "--key", "many"}, 20, fmt.Sprintf(footer, 20, 21)},
		{[]string{"history", "--key", "many", "-n", "5"}, 5, fmt.Sprintf(footer, 5, 21)},
		{[]string{"history", "--key", "other"}, 2, ""},
		{[]string{"history", "-n", "23"}, 23, ""},
		{[]string{"history", "-n", "0"}, 23, ""},
		{[]string{"history", "--json"}, 20, ""},
	} {
		code, out, errs := c.run(check.args...)
		rows := strings.Count(out, "\n")
		if !slices.Contains(check.args, "--json") {
			rows-- // the header
		}
		if code != 0 || rows != check.rows || errs != check.stderr {
			t.Errorf("cronlock %s: exit %d, %d rows, stderr %q; want 0, %d rows, stderr %q",
				strings.Join(check.args, " "), code, rows, errs, check.rows, check.stderr)
		}
	}
}

// TestReadmeSpeaksOfTheProjectOnly: the README is the user's whole documentation; it
// must not send readers to a document the repository does not have (a "SPEC", its §
// numbers, "the contract") instead of saying what it says.
func TestReadmeSpeaksOfTheProjectOnly(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`\bSPEC\b`, `§`, `(?i)\bthe contract\b`, `(?i)\bthe spec(ification)?\b`} {
		if loc := regexp.MustCompile(re).FindIndex(b); loc != nil {
			line := bytes.Count(b[:loc[0]], []byte("\n")) + 1
			t.Errorf("README.md line %d cites %q, which is not in the repository: say what it says instead", line, b[loc[0]:loc[1]])
		}
	}
}
