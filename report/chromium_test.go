package report_test

import (
	"bytes"
	"flag"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/lockrun"
	"cronlock/report"
	"cronlock/runstatus"
)

var screenshotTo = flag.String("screenshot", "", "also write the fixture fleet's screenshot to this file (docs/report.png)")

// base is the fixture fleet's first tick.
var base = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func exit(n int) *int { return &n }

// entry is one fleet entry of the fixture: a run of key on node for the tick h hours
// after base, started s seconds after it and lasting d seconds.
func entry(id, key, node, status string, h, s, d int) lockrun.FleetEntry {
	tick := base.Add(time.Duration(h) * time.Hour)
	start := tick.Add(time.Duration(s) * time.Second)
	e := lockrun.FleetEntry{RunID: id, Key: key, Node: node, Status: status, TickUS: tick.UnixMicro(),
		StartUS: start.UnixMicro(), EndUS: start.Add(time.Duration(d) * time.Second).UnixMicro(),
		DurationMS: int64(d) * 1000, Exit: exit(0), Attempt: 1, Tries: 1}
	if status != runstatus.Succeeded {
		e.Exit = exit(1)
	}
	return e
}

// fixtureFleet is a fleet's record as fleetrecord.Read returns it for three hosts running
// two keys hourly: a DUPLICATE (two hosts claimed one tick), a missed tick, a takeover of
// a lost run, a suspension, ticks nobody claimed, a failure whose error holds markup, and
// a checkpoint that must never reach the page. DUPLICATE is marked by the record's own
// rule (lockrun.MarkDuplicates).
func fixtureFleet() []lockrun.FleetEntry {
	var es []lockrun.FleetEntry
	nodes := []string{"web-1", "web-2", "web-3"}
	for h := 0; h < 12; h++ {
		switch h {
		case 3: // two hosts ran the 09:00 tick: one with another clock, one late
			es = append(es, entry("b-dup-1", "billing", "web-1", runstatus.Succeeded, h, 2, 300),
				entry("b-dup-2", "billing", "web-2", runstatus.Succeeded, h, 40, 280))
		case 5:
			e := entry("b-missed", "billing", "web-3", runstatus.Missed, h, 900, 0)
			e.Error, e.Exit = "started 15m0s after its tick, past --start-deadline 5m", exit(0)
			es = append(es, e)
		case 6: // the holder was lost; a standby took the tick over
			lost := entry("b-lost", "billing", "web-1", runstatus.LockLost, h, 1, 600)
			lost.Error, lost.Exit = "lock lost: the lease expired while the job ran", exit(125)
			took := entry("b-takeover", "billing", "web-2", runstatus.Succeeded, h, 640, 420)
			took.Attempt, took.TakeoverOf = 2, "b-lost"
			es = append(es, lost, took)
		case 8, 9: // nobody claimed these ticks: one never_fired entry at 10:00 says so
		case 10:
			e := entry("b-suspended", "billing", "web-3", runstatus.Suspended, h, 0, 0)
			e.Error, e.Exit, e.Count = "suspended by ops@bastion: no billing tonight", exit(0), 3
			es = append(es, e)
		default:
			es = append(es, entry("b-ok-"+string(rune('a'+h)), "billing", nodes[h%3], runstatus.Succeeded, h, 1, 240+h*10))
		}
	}
	nf := lockrun.FleetEntry{RunID: "b-nf", Key: "billing", Node: "web-3", Status: lockrun.NeverFiredStatus,
		NeverFiredFrom: base.Add(8 * time.Hour).UnixMicro(), NeverFiredTo: base.Add(9 * time.Hour).UnixMicro(), NeverFired: 2,
		StartUS: base.Add(10 * time.Hour).UnixMicro(), EndUS: base.Add(10 * time.Hour).UnixMicro()}
	es = append(es, nf)
	for h := 0; h < 12; h += 2 {
		e := entry("r-"+string(rune('a'+h)), "reports", nodes[(h/2)%3], runstatus.Succeeded, h, 3, 1500)
		if h == 4 {
			e.Status, e.Exit = runstatus.Failed, exit(2)
			e.Error = `exit status 2: <script>alert("x")</script> & "quotes"`
			e.Checkpoint = []byte("SECRET-CHECKPOINT")
		}
		es = append(es, e)
	}
	lockrun.MarkDuplicates(es)
	return es
}

// TestChromiumReport renders the fixture fleet and checks the page in a real headless
// Chromium: the bars by status, the marks, the hover card, no console errors, no blank
// render.
func TestChromiumReport(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	runs := report.FromFleet(fixtureFleet())
	if err := report.WriteFile(page, runs, report.Options{Source: "the fleet's record on redis 127.0.0.1:6379/0",
		Now: base.Add(13 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(page)
	if bytes.Contains(html, []byte("SECRET-CHECKPOINT")) {
		t.Fatal("the page holds a checkpoint value")
	}
	for _, bad := range []string{"http://", "https://", "//fonts", "src="} {
		if bytes.Contains(html, []byte(bad)) {
			t.Fatalf("the page refers to something outside it: %q", bad)
		}
	}

	b := startBrowser(t, 1400, 430)
	b.open(page)

	var bars map[string]int
	b.eval(`(function(){var m={};document.querySelectorAll("#tl rect.r").forEach(function(r){
		var c=[].slice.call(r.classList).filter(function(c){return c.indexOf("s-")===0})[0];
		var bb=r.getBoundingClientRect(); if(bb.width>0&&bb.height>0) m[c]=(m[c]||0)+1});return m})()`, &bars)
	want := map[string]int{"s-succeeded": 14, "s-missed": 1, "s-lock_lost": 1, "s-suspended": 1, "s-failed": 1}
	for c, n := range want {
		if bars[c] != n {
			t.Errorf("%d visible bars of %s, want %d (all: %v)", bars[c], c, n, bars)
		}
	}
	if len(bars) != len(want) {
		t.Errorf("bars by status %v, want %v", bars, want)
	}

	var marks map[string]int
	b.eval(`(function(){var m={};["mark-dup","mark-missed","mark-neverfired","mark-takeover","mark-suspended"].forEach(function(c){
		m[c]=document.querySelectorAll("#tl ."+c).length});m.dupbars=document.querySelectorAll("#tl rect.dup").length;
		m.ticks=document.querySelectorAll("#tl .ticks path").length;return m})()`, &marks)
	wantMarks := map[string]int{"mark-dup": 2, "mark-missed": 1, "mark-neverfired": 1, "mark-takeover": 1, "mark-suspended": 1, "dupbars": 2, "ticks": 2}
	for c, n := range wantMarks {
		if marks[c] != n {
			t.Errorf("%d of %s, want %d", marks[c], c, n)
		}
	}
	var dupText string
	b.eval(`document.querySelector("#tl .mark-dup").textContent`, &dupText)
	if dupText != "DUP" {
		t.Errorf("the DUPLICATE mark says %q", dupText)
	}

	// The markup in the failed run's error stays text: no script of its own ran.
	var scripts int
	b.eval(`document.scripts.length`, &scripts)
	if scripts != 2 {
		t.Errorf("%d script elements, want the page's own 2", scripts)
	}

	// Hover the failed run: its card shows id, node, tick, duration, exit and error.
	var box struct{ X, Y float64 }
	b.eval(`(function(){var r=document.querySelector("#tl rect.s-failed");r.scrollIntoView({block:"center",inline:"center"});
		var bb=r.getBoundingClientRect();return {X:bb.left+bb.width/2,Y:bb.top+bb.height/2}})()`, &box)
	b.hover(box.X, box.Y)
	var cardText string
	var hidden bool
	b.eval(`document.getElementById("card").hidden`, &hidden)
	b.eval(`document.getElementById("card").innerText`, &cardText)
	if hidden {
		t.Fatal("hovering the failed run shows no card")
	}
	for _, s := range []string{"r-e", "web-3", "reports", "failed", "2026-11-30 10:00:00Z", "25m0s", "Exit\n2",
		`exit status 2: <script>alert("x")</script> & "quotes"`} {
		if !strings.Contains(cardText, s) {
			t.Errorf("the card lacks %q:\n%s", s, cardText)
		}
	}
	if strings.Contains(cardText, "SECRET") {
		t.Error("the card shows a checkpoint")
	}
	shot := b.screenshot() // with the failed run's card, as the README shows it
	// Hovering the takeover's bar names the run it took over.
	b.eval(`(function(){var r=document.querySelector("#tl rect.tk");var bb=r.getBoundingClientRect();return {X:bb.left+bb.width/2,Y:bb.top+bb.height/2}})()`, &box)
	b.hover(box.X, box.Y)
	b.eval(`document.getElementById("card").innerText`, &cardText)
	if !strings.Contains(cardText, "b-takeover") || !strings.Contains(cardText, "Took over\nb-lost") {
		t.Errorf("the takeover's card:\n%s", cardText)
	}
	b.hover(2, 2)
	b.eval(`document.getElementById("card").hidden`, &hidden)
	if !hidden {
		t.Error("the card stays after the mouse left the runs")
	}

	if n := colours(t, shot); n < 6 {
		t.Errorf("the screenshot has %d colours: a blank render", n)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("console errors or exceptions:\n%s", strings.Join(p, "\n"))
	}
	if *screenshotTo != "" {
		if err := os.WriteFile(*screenshotTo, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// colours counts the distinct colours of a PNG, up to 64: a page that rendered nothing
// (white, or white and a heading) has a few.
func colours(t *testing.T, data []byte) int {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	seen := map[[3]uint32]bool{}
	bnd := img.Bounds()
	for y := bnd.Min.Y; y < bnd.Max.Y && len(seen) < 64; y += 3 {
		for x := bnd.Min.X; x < bnd.Max.X && len(seen) < 64; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 12, g >> 12, bl >> 12}] = true
		}
	}
	return len(seen)
}

var _ image.Image // image/png registers the decoder through image
