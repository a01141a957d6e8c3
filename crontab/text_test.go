package crontab

import (
	"strings"
	"testing"
	"time"
)

// TestWrapText: the whole text comes back with its job lines wrapped and its last
// newline kept, and the diff names the file; a text with no newline at the end (Debian's
// cron refuses it) comes back as it is, with a note.
func TestWrapText(t *testing.T) {
	o := Options{Cronlock: goldenCronlock, User: "ann"}
	r := WrapText("# jobs\n*/5 * * * * backup\n", o)
	got := strings.Split(r.Text, "\n")
	if len(got) != 3 || got[0] != "# jobs" || !strings.HasPrefix(got[1], "*/5 * * * * "+goldenCronlock+" run --key ") || got[2] != "" {
		t.Fatalf("text %q", r.Text)
	}
	if d := r.Diff("/etc/cron.d/jobs"); !strings.HasPrefix(d, "--- /etc/cron.d/jobs\n") || !strings.Contains(d, "\n-*/5 * * * * backup\n") {
		t.Fatalf("diff:\n%s", d)
	}
	noEOL := "# jobs\n*/5 * * * * backup"
	if r := WrapText(noEOL, o); r.Text != noEOL || len(r.Notes) == 0 {
		t.Fatalf("no newline at the end: text %q, notes %v", r.Text, r.Notes)
	}
}

// TestLintText: each line's next tick follows its findings, in line order, and only the
// findings count as problems.
func TestLintText(t *testing.T) {
	text := "0 3 * * * backup %s\n30 4 * * * /usr/bin/true\n"
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	all, problems := LintText(text, Options{Cronlock: goldenCronlock, DaemonZone: "UTC"}, now)
	if problems != 2 || len(all) != 4 {
		t.Fatalf("%d problems in %d lines, want 2 (the %% on line 1, line 2 not wrapped) and 2 next ticks: %v", problems, len(all), all)
	}
	line, ticked := 0, false
	for _, f := range all {
		if f.Line < line {
			t.Fatalf("finding %v out of line order: %v", f, all)
		}
		if f.Line != line {
			line, ticked = f.Line, false
		}
		tick := strings.HasPrefix(f.Msg, "next tick")
		if ticked && !tick {
			t.Fatalf("finding %v after its line's next tick: %v", f, all)
		}
		ticked = ticked || tick
	}
}
