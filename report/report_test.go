package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/report"
	"cronlock/runstatus"
)

// TestPageEscapesRunText: markup in every text a run brings (key, node, id, error,
// takeover) reaches the page only escaped: as text in the SVG, and in the cards' JSON
// with < and > escaped, so that nothing closes the script element or opens a tag.
func TestPageEscapesRunText(t *testing.T) {
	evil := `</script><img src=x onerror=alert(1)>"'&`
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	runs := []report.Run{
		{ID: "id" + evil, Key: "k" + evil, Node: "n" + evil, Status: runstatus.Failed, Start: at, End: at.Add(time.Minute),
			Error: "e" + evil, TakeoverOf: "t" + evil, Attempt: 2},
		{ID: "x", Key: "k" + evil, Node: "n" + evil, Status: "made-up<status>", Start: at.Add(time.Hour), End: at.Add(61 * time.Minute)},
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, runs, report.Options{Source: "s" + evil, Now: at.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, raw := range []string{"<img", "</script><", "made-up<", `"'&`} {
		if strings.Contains(page, raw) {
			t.Errorf("the page holds %q unescaped", raw)
		}
	}
	if n := strings.Count(page, "</script>"); n != 2 {
		t.Errorf("%d closing script tags, want the page's own 2", n)
	}
	if !strings.Contains(page, "k&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&#34;&#39;&amp;") {
		t.Error("the key's label is not the escaped key")
	}
	if !strings.Contains(page, `class="r s-other"`) {
		t.Error("an unknown status is not drawn as other")
	}
}

// TestFromHistory: a host's rows become runs: skips left out, two runs of one tick marked
// DUPLICATE, tries of one run and a takeover of the tick not.
func TestFromHistory(t *testing.T) {
	tick := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	row := func(id, runID, status string, s, d int) history.Run {
		st := tick.Add(time.Duration(s) * time.Second)
		return history.Run{ID: id, RunID: runID, Key: "k", Node: "n", Status: status, ScheduledFor: tick,
			StartedAt: st, FinishedAt: st.Add(time.Duration(d) * time.Second)}
	}
	tryA, tryB := row("a1", "a", runstatus.Retried, 0, 5), row("a2", "a", runstatus.Succeeded, 6, 5)
	took := row("b", "b", runstatus.Succeeded, 20, 5)
	took.TakeoverOf, took.TickAttempt = "a", 2
	skip := row("s", "s", runstatus.Skipped, 1, 0)
	dup1 := row("c", "c", runstatus.Succeeded, 60, 5)
	dup2 := row("d", "d", runstatus.Succeeded, 63, 5)
	dup1.ScheduledFor, dup2.ScheduledFor = tick.Add(time.Minute), tick.Add(time.Minute)
	runs := report.FromHistory([]history.Run{tryA, tryB, took, skip, dup1, dup2})
	got := map[string]bool{}
	for _, r := range runs {
		got[r.ID] = r.Duplicate
	}
	want := map[string]bool{"a1": false, "a2": false, "b": false, "c": true, "d": true}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	for id, d := range want {
		if got[id] != d {
			t.Errorf("%s: duplicate %v, want %v", id, got[id], d)
		}
	}
}

// TestWriteFile: the page replaces an older file whole, private, and leaves no temporary
// file; a folder that does not exist is an error that names the page.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "r.html")
	if err := os.WriteFile(page, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteFile(page, nil, report.Options{Source: "nowhere"}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(page)
	b, _ := os.ReadFile(page)
	if st.Mode().Perm() != 0o600 || !bytes.Contains(b, []byte("No runs")) {
		t.Errorf("mode %v, page %q", st.Mode().Perm(), b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left in the folder: %v", es)
	}
	bad := filepath.Join(dir, "none", "r.html")
	if err := report.WriteFile(bad, nil, report.Options{}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a missing folder: %v", err)
	}
}
