package cmd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
	"cronlock/tty"
)

// TestHistoryShowRunStreams: history show prints a stored marked tail with its marks, and a
// tail stored without segments (one shared pipe, or a row of schema v1) as plain lines.
func TestHistoryShowRunStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	marked := history.Run{Key: "k", Node: "n", PID: 1, Command: []string{"job"}, Status: runstatus.Failed,
		StartedAt: now, FinishedAt: now, Output: []byte("fine\noops\x1b\n"),
		Streams: []history.Segment{{Stream: history.Stdout, Len: 5}, {Stream: history.Stderr, Len: 6}}}
	plain := marked
	plain.Streams = nil
	for _, r := range []*history.Run{&marked, &plain} {
		if err := st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	show := func(id string) string {
		t.Helper()
		var b bytes.Buffer
		if err := historyShowRun(&historyShowOptions{Path: path, ID: id, Stdout: &b}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := show(marked.ID); !strings.HasSuffix(got, "output (last 11 bytes; out| stdout, err| stderr):\nout| fine\nerr| oops\\x1b\n") {
		t.Fatalf("marked run:\n%s", got)
	}
	if got := show(plain.ID); !strings.HasSuffix(got, "output (last 11 bytes):\nfine\noops\\x1b\n") {
		t.Fatalf("unmarked run:\n%s", got)
	}
}

// TestHistoryShortIDs: the history table shows each run's shortest unique id start (at
// least 7 characters, longer where runs share more), and history show takes it; a start
// that several ids share exits 2 with one line that says how many, one that none has 1.
func TestHistoryShortIDs(t *testing.T) {
	c := newCLI(t, "")
	c.env = append(c.env, "COLUMNS=") // the test's own must not cut the table
	s, err := history.Open(filepath.Join(c.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour)
	runs := []struct{ key, id, short string }{
		{"twin-a", "01a22768-2c8c-7ed4-9d0e-e89f8e311398", "01a22768-2c8c-7ed4-9d0e-e"}, // same millisecond as twin-b
		{"twin-b", "01a22768-2c8c-7ed4-9d0e-000000000001", "01a22768-2c8c-7ed4-9d0e-0"},
		{"near", "01a22768-2dd5-709a-8e5a-75aabc6802ff", "01a22768-2d"},
		{"alone", "01b00000-0000-7000-8000-000000000000", "01b0000"},
	}
	for i, r := range runs {
		at := started.Add(time.Duration(i) * time.Second)
		if err := s.Insert(&history.Run{ID: r.id, Key: r.key, Node: "clinode", Status: runstatus.Succeeded, ExitCode: new(int),
			Command: []string{"true"}, StartedAt: at, FinishedAt: at.Add(time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	code, out, errs := c.run("history")
	if code != 0 {
		t.Fatalf("history exited %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(runs)+1 || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("history table, want an ID column first:\n%s", out)
	}
	for _, r := range runs {
		var cell string
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 3 && slices.Contains(f, r.key) {
				cell = f[0]
			}
		}
		if cell != r.short {
			t.Errorf("run %s (%s): ID %q, want %q:\n%s", r.id, r.key, cell, r.short, out)
		}
		code, show, errs := c.run("history", "show", cell)
		if code != 0 || !strings.Contains(show, "run:            "+r.id+"\n") || !strings.Contains(show, "key:            "+r.key+"\n") {
			t.Errorf("history show %s: exit %d, %s\n%s; want run %s", cell, code, errs, show, r.id)
		}
	}
	if code, show, _ := c.run("history", "show", runs[2].id); code != 0 || !strings.Contains(show, runs[2].id) {
		t.Errorf("history show with the whole id: exit %d\n%s", code, show)
	}
	for _, amb := range []struct {
		prefix string
		n      int
	}{{"01a22768-2c8c", 2}, {"01a2", 3}, {"0", 4}} {
		code, show, errs := c.run("history", "show", amb.prefix)
		want := fmt.Sprintf("cronlock: run id prefix %s matches %d runs in ", amb.prefix, amb.n)
		if code != ExitAmbiguousRun || show != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("history show %s: exit %d, stdout %q, stderr %q; want %d and one line %q…", amb.prefix, code, show, errs, ExitAmbiguousRun, want)
		}
	}
	for _, none := range []string{"01a22768-2c8c-7ed4-9d0e-e89f8e311398x", "01c", "zz"} {
		if code, _, errs := c.run("history", "show", none); code != ExitNoSuchRun || !strings.Contains(errs, "no run "+none) {
			t.Errorf("history show %s: exit %d, %s; want %d, no such run", none, code, errs, ExitNoSuchRun)
		}
	}
}

// TestHistoryFleetShortIDs: history --fleet shows each run's id start too, unique among
// the runs it lists, and history show on the host that ran it takes it; its NOTE is cut
// to fit COLUMNS.
func TestHistoryFleetShortIDs(t *testing.T) {
	hosts := newFleet(t, "redis", "vmA", "vmB")
	for _, h := range hosts {
		h.env = append(h.env, "COLUMNS=") // the test's own must not cut the table
	}
	for i := range 3 {
		for _, h := range hosts {
			args := []string{"run", "-k", "fleetids", "--", "true"}
			if i == 0 && h == hosts[0] { // a run whose entry has an error: a NOTE to cut
				args = []string{"run", "-k", "fleetids", "--timeout", "50ms", "--", "sleep", "5"}
			}
			if code, _, errs := h.run(args...); code != 0 && code != 124 {
				t.Fatalf("run %d on %s: exit %d (%s)", i, h.node, code, errs)
			}
		}
	}
	t.Cleanup(func() {
		for _, k := range []string{"ledger", "order", "days"} {
			redistest.Do(redistest.Addr(t), "DEL", sibling(hosts[0].cli, "fleetids", k))
		}
	})
	rows := fleetRows(t, hosts[0].cli, "--key", "fleetids")
	code, out, errs := hosts[0].run("history", "--fleet", "--key", "fleetids")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(rows) != 6 || len(lines) != 7 || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("history --fleet: exit %d (%s), %d runs in --json; want 6 and an ID column first:\n%s", code, errs, len(rows), out)
	}
	seen := map[string]bool{}
	for i, l := range lines[1:] {
		cell, node := strings.Fields(l)[0], rows[i].Node
		if len(cell) < 7 || !strings.HasPrefix(rows[i].ID, cell) || seen[cell] {
			t.Errorf("row %d: ID %q; want a start of %s, 7 characters or more, unique:\n%s", i, cell, rows[i].ID, out)
		}
		seen[cell] = true
		for _, other := range rows {
			if other.ID != rows[i].ID && strings.HasPrefix(other.ID, cell) {
				t.Errorf("ID %q of %s also starts %s", cell, rows[i].ID, other.ID)
			}
		}
		h := hosts[0]
		if node == "vmB" {
			h = hosts[1]
		}
		if code, show, errs := h.run("history", "show", cell); code != 0 || !strings.Contains(show, "run:            "+rows[i].ID+"\n") {
			t.Errorf("history show %s on %s: exit %d (%s)\n%s; want run %s", cell, node, code, errs, show, rows[i].ID)
		}
	}
	if !strings.Contains(out, "--timeout 50ms") {
		t.Fatalf("history --fleet: no NOTE with the timeout's error:\n%s", out)
	}
	width := tty.Width(lines[0]) + 8 // room for 8 columns of NOTE beyond its header
	cmd := hosts[0].command("history", "--fleet", "--key", "fleetids")
	cmd.Env = append(cmd.Env, "COLUMNS="+strconv.Itoa(width))
	cut, err := cmd.Output()
	if err != nil || !strings.Contains(string(cut), "…") || strings.Contains(string(cut), "--timeout 50ms") {
		t.Fatalf("history --fleet with COLUMNS=%d: %v; want the NOTE cut:\n%s", width, err, cut)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(cut), "\n"), "\n") {
		if tty.Width(l) > width {
			t.Errorf("history --fleet with COLUMNS=%d: a line of %d columns:\n%s", width, tty.Width(l), cut)
		}
	}
}
