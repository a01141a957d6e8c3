package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"cronlock/runstatus"
)

// Geometry of the timeline, in CSS pixels.
const (
	axisH      = 30   // the time axis on top
	rowH       = 22   // a key's heading row and each node's lane
	barY       = 8    // a bar's top within its lane: room above for the DUP mark
	barH       = 11   // a bar's height
	labelW     = 230  // the lane names' column
	minWidth   = 1100 // the timeline's narrowest
	maxWidth   = 32000
	pxPerRun   = 6  // the timeline widens with its busiest lane, so that bars stay apart
	minBarW    = 2  // a short run is still a visible bar
	pointBarW  = 5  // a run whose job never started (missed, suspended, error): a point in time
	labelChars = 34 // lane names longer than this are cut (the whole name is their title)
)

// view is what the page's template draws.
type view struct {
	Source, Made, From, To string
	Empty                  bool
	Width, Height          int
	LabelW                 int
	Labels                 []label
	Rows                   []row
	Grid                   []gridLine
	TickPaths              []string
	Bars                   []bar
	Marks                  []mark
	Cards                  [][]string
	Legend                 []legendItem
	Summary                string
}

type label struct {
	Y           int
	Text, Title string
	Key         bool // a key's heading, not a node's lane
}

type row struct {
	Y   int
	Key bool
}

type gridLine struct {
	X     string
	Label string
}

type bar struct {
	I          int
	X, Y, W, H string
	Class      string
}

type mark struct {
	Class string
	D     string // an SVG path
	X, Y  string // where Text goes
	Text  string
	Title string
	I     int // the run's card, -1 = none
}

type legendItem struct {
	Class, Name string
	Count       int
}

// lane is one key and node's row, or a key's heading row (node "").
type lane struct{ key, node string }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// layout places runs on the timeline: lanes sorted by key then node, x by time on one
// scale from the window's start to its end.
func layout(runs []Run, o Options) *view {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	v := &view{Source: o.Source, Made: fmtTime(now), LabelW: labelW}
	if len(runs) == 0 {
		v.Empty, v.Width, v.Height = true, minWidth, axisH
		return v
	}

	// The window: from Since (or the first start) to the last end (or now, while a run
	// goes on).
	t0, t1 := o.Since, time.Time{}
	for _, r := range runs {
		if t0.IsZero() || r.Start.Before(t0) {
			t0 = r.Start
		}
		end := r.End
		if end.IsZero() && r.Status == runstatus.Running {
			end = now
		}
		if end.Before(r.Start) {
			end = r.Start
		}
		if end.After(t1) {
			t1 = end
		}
	}
	if !t1.After(t0) {
		t1 = t0.Add(time.Minute)
	}
	span := t1.Sub(t0)
	t0, t1 = t0.Add(-span/100), t1.Add(span/100) // room at the edges
	v.From, v.To = fmtTime(t0), fmtTime(t1)

	// Lanes: each key's heading, then its nodes.
	nodes := map[string]map[string]int{} // key -> node -> runs
	for _, r := range runs {
		if nodes[r.Key] == nil {
			nodes[r.Key] = map[string]int{}
		}
		if r.NeverFired == 0 {
			nodes[r.Key][r.Node]++
		}
	}
	keys := make([]string, 0, len(nodes))
	for k := range nodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	laneY := map[lane]int{}
	y, busiest := axisH, 0
	for _, k := range keys {
		laneY[lane{k, ""}] = y
		v.Rows = append(v.Rows, row{Y: y, Key: true})
		v.Labels = append(v.Labels, label{Y: y, Text: cut(k), Title: k, Key: true})
		y += rowH
		ns := make([]string, 0, len(nodes[k]))
		for n, c := range nodes[k] {
			ns = append(ns, n)
			busiest = max(busiest, c)
		}
		sort.Strings(ns)
		for _, n := range ns {
			laneY[lane{k, n + "\x00"}] = y
			v.Rows = append(v.Rows, row{Y: y})
			name := n
			if name == "" {
				name = "(no node)"
			}
			v.Labels = append(v.Labels, label{Y: y, Text: cut(name), Title: k + " on " + name})
			y += rowH
		}
	}
	v.Height = y + 4
	v.Width = min(max(busiest*pxPerRun, minWidth), maxWidth)
	scale := float64(v.Width) / float64(t1.Sub(t0))
	x := func(t time.Time) float64 { return float64(t.Sub(t0)) * scale }
	v.Grid = grid(t0, t1, v.Width)

	// Bars and their marks. The bar of each run id, for the takeovers' links.
	type placed struct{ x0, x1, y float64 }
	at := map[string]placed{}
	ticks := map[string]map[int]bool{} // key -> tick x (whole pixels: one mark per pixel)
	counts := map[string]int{}
	var carded []Run // the runs with a card, in the cards' order (never-fired marks have none)
	var dups, missed, suspended, takeovers, neverFired int
	for _, r := range runs {
		if r.NeverFired > 0 {
			hy := float64(laneY[lane{r.Key, ""}])
			a, b := x(r.Start), x(r.End)
			if b-a < 6 {
				a, b = a-3, a+3
			}
			neverFired += r.NeverFired
			what := fmt.Sprintf("never fired: %d tick(s) of %s no host claimed, %s to %s", r.NeverFired, r.Key, fmtTime(r.Start), fmtTime(r.End))
			v.Marks = append(v.Marks, mark{Class: "mark mark-neverfired", I: -1, Title: what,
				D: fmt.Sprintf("M%s %dh%sv9h-%sz", f1(a), int(hy)+10, f1(b-a), f1(b-a))})
			continue
		}
		i := len(v.Cards)
		ly := float64(laneY[lane{r.Key, r.Node + "\x00"}])
		x0 := x(r.Start)
		end := r.End
		if end.IsZero() && r.Status == runstatus.Running {
			end = now
		}
		x1 := x(end)
		point := r.Status == runstatus.Missed || r.Status == runstatus.Suspended || r.Status == runstatus.Error
		w := x1 - x0
		switch {
		case point:
			w, x0 = pointBarW, x0-pointBarW/2
		case end.IsZero() || w < minBarW:
			w = minBarW
		}
		cls := "r " + statusClass(r.Status)
		if r.Duplicate {
			cls += " dup"
		}
		if r.TakeoverOf != "" {
			cls += " tk"
		}
		v.Bars = append(v.Bars, bar{I: i, X: f1(x0), Y: strconv.Itoa(int(ly) + barY), W: f1(w), H: strconv.Itoa(barH), Class: cls})
		at[r.Key+"\x00"+r.ID] = placed{x0, x0 + w, ly + barY + barH/2}
		counts[r.Status]++
		mid := x0 + w/2
		by := ly + barY
		if r.Duplicate {
			dups++
			v.Marks = append(v.Marks, mark{Class: "mark mark-dup", I: i, X: f1(x0), Y: f1(by - 1.5), Text: "DUP"})
		}
		switch r.Status {
		case runstatus.Missed:
			missed++
			v.Marks = append(v.Marks, mark{Class: "mark mark-missed", I: i,
				D: fmt.Sprintf("M%s %sl8 8m0-8l-8 8", f1(mid-4), f1(by+barH/2-4))})
		case runstatus.Suspended:
			suspended++
			v.Marks = append(v.Marks, mark{Class: "mark mark-suspended", I: i,
				D: fmt.Sprintf("M%s %sh2.5v9h-2.5zm4.5 0h2.5v9h-2.5z", f1(mid-3.5), f1(by+1))})
		}
		if !r.Tick.IsZero() {
			if ticks[r.Key] == nil {
				ticks[r.Key] = map[int]bool{}
			}
			ticks[r.Key][int(x(r.Tick))] = true
		}
		v.Cards = append(v.Cards, card(r))
		carded = append(carded, r)
	}
	// Takeovers: a link from the end of the attempt taken over to the start of the one that
	// took the tick over (or a short arrow into it, when the first is outside the window).
	for i, r := range carded {
		if r.TakeoverOf == "" {
			continue
		}
		takeovers++
		to := at[r.Key+"\x00"+r.ID]
		from, ok := at[r.Key+"\x00"+r.TakeoverOf]
		if !ok {
			from = placed{to.x0 - 14, to.x0 - 14, to.y}
		}
		v.Marks = append(v.Marks, mark{Class: "mark mark-takeover", I: i,
			Title: "took over " + r.TakeoverOf,
			D: fmt.Sprintf("M%s %sC%s %s %s %s %s %s", f1(from.x1), f1(from.y), f1(from.x1+12), f1(from.y),
				f1(to.x0-12), f1(to.y), f1(to.x0), f1(to.y))})
	}
	for _, k := range keys {
		xs := make([]int, 0, len(ticks[k]))
		for tx := range ticks[k] {
			xs = append(xs, tx)
		}
		if len(xs) == 0 {
			continue
		}
		sort.Ints(xs)
		var d strings.Builder
		hy := laneY[lane{k, ""}]
		for _, tx := range xs {
			fmt.Fprintf(&d, "M%d %dv7", tx, hy+13)
		}
		v.TickPaths = append(v.TickPaths, d.String())
	}
	for _, s := range Statuses {
		if counts[s] > 0 {
			v.Legend = append(v.Legend, legendItem{Class: statusClass(s), Name: s, Count: counts[s]})
		}
	}
	other := 0
	for s, c := range counts {
		if statusClass(s) == "s-other" {
			other += c
		}
	}
	if other > 0 {
		v.Legend = append(v.Legend, legendItem{Class: "s-other", Name: "other", Count: other})
	}
	v.Summary = fmt.Sprintf("%d runs of %d keys; %d DUPLICATE, %d missed, %d never fired, %d takeovers, %d suspended",
		len(v.Cards), len(keys), dups, missed, neverFired, takeovers, suspended)
	return v
}

// card is what hovering a run shows, in the order of the page's script's names: id,
// key, node, status, tick, started, finished, duration, exit, error, attempt, took over.
// Never checkpoint values or output: the page gets mailed.
func card(r Run) []string {
	st := r.Status
	if r.Duplicate {
		st += ", DUPLICATE"
	}
	if r.Count > 1 {
		st += fmt.Sprintf(" (×%d)", r.Count)
	}
	dur := ""
	if !r.End.IsZero() || r.Duration > 0 {
		dur = r.Duration.Round(time.Millisecond).String()
	}
	att := ""
	if r.Attempt > 1 {
		att = strconv.Itoa(r.Attempt)
	}
	return []string{r.ID, r.Key, r.Node, st, fmtTime(r.Tick), fmtTime(r.Start), fmtTime(r.End), dur,
		fmtExit(r.Exit), r.Error, att, r.TakeoverOf}
}

// cut shortens a lane's name to labelChars runes.
func cut(s string) string {
	rs := []rune(s)
	if len(rs) <= labelChars {
		return s
	}
	return string(rs[:labelChars-1]) + "…"
}

// gridSteps are the spacings the time axis picks from: the first that puts its lines at
// least minGridPx apart.
var gridSteps = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour,
	6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour}

const minGridPx = 110

// grid returns the time axis's lines and labels (UTC) from t0 to t1 over width pixels.
func grid(t0, t1 time.Time, width int) []gridLine {
	span := t1.Sub(t0)
	step := gridSteps[len(gridSteps)-1]
	for _, s := range gridSteps {
		if float64(s)/float64(span)*float64(width) >= minGridPx {
			step = s
			break
		}
	}
	layoutStr := "01-02 15:04"
	if step < time.Minute {
		layoutStr = "15:04:05"
	}
	var out []gridLine
	for t := t0.UTC().Truncate(step).Add(step); t.Before(t1); t = t.Add(step) {
		x := float64(t.Sub(t0)) / float64(span) * float64(width)
		l := gridLine{X: f1(x), Label: t.Format(layoutStr)}
		if x > float64(width)-90 { // its label would be cut at the edge
			l.Label = ""
		}
		out = append(out, l)
	}
	return out
}
