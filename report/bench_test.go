package report_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cronlock/report"
	"cronlock/runstatus"
)

// bigFleet is n runs of 20 keys on 3 nodes each, every few minutes over a week, with a
// failure, a DUPLICATE and a missed run now and then.
func bigFleet(n int) []report.Run {
	runs := make([]report.Run, 0, n)
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	per := n / 20
	step := 7 * 24 * time.Hour / time.Duration(per)
	for i := 0; i < n; i++ {
		k, j := i%20, i/20
		start := t0.Add(time.Duration(j)*step + time.Duration(k)*time.Second)
		d := time.Duration(30+i%90) * time.Second
		r := report.Run{ID: fmt.Sprintf("0193%04x-%04x-7000-8000-%012x", k, j, i), Key: fmt.Sprintf("job-%02d", k),
			Node: fmt.Sprintf("web-%d", j%3+1), Status: runstatus.Succeeded, Tick: start.Truncate(time.Minute),
			Start: start, End: start.Add(d), Duration: d, Exit: new(int), Attempt: 1}
		switch {
		case i%97 == 0:
			r.Status, r.Error = runstatus.Failed, "exit status 1: <b>not bold</b>"
		case i%211 == 0:
			r.Status, r.End, r.Duration = runstatus.Missed, start, 0
		case i%307 == 0:
			r.Duplicate = true
		}
		runs = append(runs, r)
	}
	return runs
}

// BenchmarkWrite10k is the Go side of a report of 10,000 runs: layout and HTML.
func BenchmarkWrite10k(b *testing.B) {
	runs := bigFleet(10000)
	for b.Loop() {
		if err := report.Write(io.Discard, runs, report.Options{Source: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChromiumFirstPaint10k loads a report of 10,000 runs in headless Chromium and
// reports its first contentful paint, its load event and the first frame after it with
// the whole timeline drawn (an upper bound: it is asked for over the DevTools pipe after
// the load), in ms after navigation start on the browser's own clock, and the page's
// size. The goal is a first paint within 1 s.
func BenchmarkChromiumFirstPaint10k(b *testing.B) {
	page := filepath.Join(b.TempDir(), "report.html")
	if err := report.WriteFile(page, bigFleet(10000), report.Options{Source: "bench"}); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(page)
	br := startBrowser(b, 1400, 900)
	var fcp, load, painted, bars float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		br.open(page)
		var m struct{ FCP, Load, Painted, Bars float64 }
		br.eval(`new Promise(function(ok){function get(){var p=performance.getEntriesByName("first-contentful-paint")[0];
			var n=performance.getEntriesByType("navigation")[0];
			if(!p||!n||!n.loadEventEnd){setTimeout(get,10);return}
			requestAnimationFrame(function(){requestAnimationFrame(function(){
			ok({FCP:p.startTime,Load:n.loadEventEnd,Painted:performance.now(),Bars:document.querySelectorAll("#tl rect.r").length})})})}get()})`, &m)
		fcp += m.FCP
		load += m.Load
		painted += m.Painted
		bars = m.Bars
	}
	b.StopTimer()
	if bars != 10000 {
		b.Fatalf("%v bars drawn, want 10000", bars)
	}
	if p := br.Problems(); len(p) > 0 {
		b.Fatalf("console errors: %v", p)
	}
	b.ReportMetric(fcp/float64(b.N), "first-paint-ms")
	b.ReportMetric(load/float64(b.N), "load-ms")
	b.ReportMetric(painted/float64(b.N), "timeline-frame-ms")
	b.ReportMetric(float64(st.Size())/1e6, "page-MB")
}
