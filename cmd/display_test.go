package cmd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/history"
	"cronlock/internal/proctest"
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
// more match, a line on stderr says so and how to see them, so a reader does not take 20
// rows for the whole history. Not with --json (scripts), nor when all are shown, even
// when exactly as many match as the limit. It does not say how many: counting every
// matching run would cost a walk of them all, a million on a busy host (BENCHMARKS.md).
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
	const footer = "cronlock: the newest %d runs shown, older ones exist; --limit 0 shows all, --limit N the newest N\n"
	for _, check := range []struct {
		args   []string
		rows   int
		stderr string
	}{
		{[]string{"history"}, 20, fmt.Sprintf(footer, 20)},
		{[]string{"history", "--key", "many"}, 20, fmt.Sprintf(footer, 20)},
		{[]string{"history", "--key", "many", "-n", "5"}, 5, fmt.Sprintf(footer, 5)},
		{[]string{"history", "--key", "many", "-n", "21"}, 21, ""},
		{[]string{"history", "--key", "other"}, 2, ""},
		{[]string{"history", "--key", "other", "-n", "2"}, 2, ""},
		{[]string{"history", "-n", "22"}, 22, fmt.Sprintf(footer, 22)},
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

// TestHistoryTableFitsTerminal: on a terminal, the history table's lines fit its width
// (TIOCGWINSZ, or COLUMNS before it, as ps does): COMMAND and NOTE are cut with "…",
// a wide character counting two columns, while the id, the time and the status stay
// whole; --wide cuts nothing. Through a pipe nothing is cut unless COLUMNS is set.
func TestHistoryTableFitsTerminal(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "NO_COLOR=1", "TZ=UTC", "COLUMNS=") // the test's own COLUMNS must not count
	s, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour)
	long := []string{"/opt/jobs/nightly-export.sh", "--to", "s3://東京-archive/exports/" + strings.Repeat("x", 60), "--verbose"}
	for i, r := range []history.Run{
		{Key: "fit", Status: runstatus.Failed, Command: long, Error: "upload failed: " + strings.Repeat("connection reset by peer; ", 4)},
		{Key: "fit", Status: runstatus.Succeeded, Command: []string{"true"}},
		{Key: "fit", Status: runstatus.Succeeded, Command: long},
	} {
		r.Node, r.ExitCode = "clinode", new(int)
		r.StartedAt = started.Add(time.Duration(i) * time.Second)
		r.FinishedAt = r.StartedAt.Add(time.Second)
		if err := s.Insert(&r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	whole := tty.Command(long)

	onTerminal := func(cols uint16, env []string, args ...string) []string {
		t.Helper()
		m, pts := proctest.OpenPTY(t)
		if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: cols}); err != nil {
			t.Fatal(err)
		}
		cmd := c.command(append([]string{"history"}, args...)...)
		cmd.Env = append(cmd.Env, env...)
		var errb bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("history %v on a terminal: %v (%s)", args, err, errb.String())
		}
		var got []byte
		buf := make([]byte, 4096)
		for deadline := time.Now().Add(10 * time.Second); bytes.Count(got, []byte("\n")) < 4 && time.Now().Before(deadline); {
			m.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			n, _ := m.Read(buf)
			got = append(got, buf[:n]...)
		}
		return strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(got), "\r\n", "\n"), "\n"), "\n")
	}
	throughPipe := func(env []string, args ...string) []string {
		t.Helper()
		cmd := c.command(append([]string{"history"}, args...)...)
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("history %v through a pipe: %v", args, err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	}
	fits := func(what string, lines []string, cols int) {
		t.Helper()
		if len(lines) != 4 {
			t.Fatalf("%s: %d lines, want 4:\n%s", what, len(lines), strings.Join(lines, "\n"))
		}
		for _, l := range lines {
			if tty.Width(l) > cols {
				t.Errorf("%s: a line of %d columns, over %d:\n%s", what, tty.Width(l), cols, strings.Join(lines, "\n"))
			}
		}
		// Newest first: the long command alone, "true", then the long command and note.
		if !strings.HasSuffix(lines[1], "…") || strings.Count(lines[3], "…") != 2 || !strings.HasSuffix(lines[3], "…") {
			t.Errorf("%s: COMMAND and NOTE not cut with …:\n%s", what, strings.Join(lines, "\n"))
		}
		if !strings.HasSuffix(lines[2], "  true") || !strings.Contains(lines[3], "  failed  ") {
			t.Errorf("%s: short cells or the status cut:\n%s", what, strings.Join(lines, "\n"))
		}
		// The columns after a cut one still line up: NOTE where its header is.
		if want, got := columnAt(lines[0], regexp.MustCompile("NOTE")), columnAt(lines[3], regexp.MustCompile("upload")); got != want {
			t.Errorf("%s: NOTE at column %d, its header at %d:\n%s", what, got, want, strings.Join(lines, "\n"))
		}
	}
	uncut := func(what string, lines []string) {
		t.Helper()
		if len(lines) != 4 || strings.Contains(strings.Join(lines, "\n"), "…") || !strings.HasSuffix(lines[1], whole) ||
			!strings.HasSuffix(lines[3], strings.Repeat("connection reset by peer; ", 3)+"connection reset by peer;") {
			t.Errorf("%s: want every cell whole:\n%s", what, strings.Join(lines, "\n"))
		}
	}

	fits("a terminal of 120 columns", onTerminal(120, nil), 120)
	fits("COLUMNS=112 on a terminal of 200", onTerminal(200, []string{"COLUMNS=112"}), 112)
	uncut("--wide on a terminal of 120 columns", onTerminal(120, nil, "--wide"))
	uncut("a pipe", throughPipe(nil))
	fits("COLUMNS=110 through a pipe", throughPipe([]string{"COLUMNS=110"}), 110)
	uncut("--wide with COLUMNS=110", throughPipe([]string{"COLUMNS=110"}, "--wide"))
}
