package report

import (
	"bufio"
	"encoding/json"
	"html"
	"io"
	"strconv"
)

// The page is written by hand rather than with html/template: that package's reflection
// would keep every method of every type in cronlock's binary (12 MB more for every run
// to load), for a page with a dozen holes. Every text that comes from a run goes
// through html.EscapeString (attribute values are always quoted), and the runs' cards
// travel as JSON, whose encoder escapes <, > and & so that no text can close the script
// element; the page's script shows them with textContent only.
//
// Colours are the Okabe–Ito palette (safe for the common colour-vision deficiencies),
// and every status but succeeded also has a texture, so that colour is never the only
// cue. One element per run, and one delegated listener for the hover card: the page stays
// quick at 10,000 runs.

// pageHead is everything before the body: the styles.
const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>cronlock report</title>
<style>
body{font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:16px;color:#111;background:#fff}
h1{font-size:18px;margin:0 0 4px}
p.meta{margin:0 0 10px;color:#444}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:0 0 10px;padding:0;list-style:none}
.legend li{display:flex;align-items:center;gap:5px}
.legend svg{flex:none}
.tl{display:flex;border:1px solid #bbb;max-height:80vh;overflow:auto}
.labels{flex:none;position:sticky;left:0;background:#f7f7f7;border-right:1px solid #bbb;z-index:1}
.labels text{font-size:12px;fill:#222}
.labels text.key{font-weight:600}
.axis text{font-size:11px;fill:#444}
.axis line{stroke:#ddd}
.row{fill:#fff}.row.key{fill:#f2f2f2}
.ticks{stroke:#555;stroke-width:1;fill:none}
.r{stroke:#222;stroke-width:.6}
.r:hover{stroke-width:2}
.s-succeeded{fill:#009E73}
.s-failed{fill:url(#p-failed)}
.s-timeout{fill:url(#p-timeout)}
.s-lock_lost{fill:url(#p-lock_lost)}
.s-interrupted{fill:url(#p-interrupted)}
.s-error{fill:url(#p-error)}
.s-abandoned{fill:url(#p-abandoned)}
.s-missed{fill:#fff;stroke:#D55E00;stroke-width:1.2}
.s-suspended{fill:url(#p-suspended)}
.s-retried{fill:url(#p-retried)}
.s-running{fill:url(#p-running)}
.s-other{fill:#bbb}
.r.dup{stroke:#000;stroke-width:2}
.r.tk{stroke:#0072B2;stroke-width:1.6}
.mark{pointer-events:none}
.mark-dup{font:700 8px/1 sans-serif;fill:#000}
.mark-missed{stroke:#D55E00;stroke-width:1.8;fill:none}
.mark-suspended{fill:#0072B2}
.mark-neverfired{fill:url(#p-neverfired);stroke:#CC79A7;stroke-width:1.2;pointer-events:all}
.mark-takeover{fill:none;stroke:#0072B2;stroke-width:1.4;stroke-dasharray:3 2;marker-end:url(#arrow)}
#card{position:fixed;z-index:2;max-width:420px;background:#fffff0;border:1px solid #444;border-radius:4px;padding:6px 9px;box-shadow:0 2px 6px rgba(0,0,0,.25);font-size:12px;pointer-events:none}
#card dl{display:grid;grid-template-columns:auto 1fr;gap:1px 8px;margin:0}
#card dt{color:#555}#card dd{margin:0;overflow-wrap:anywhere;white-space:pre-wrap}
.empty{padding:24px;color:#444}
</style>
</head>
<body>
`

// patterns are the bars' textures and the takeover's arrowhead.
const patterns = `<defs>
<pattern id="p-failed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#D55E00"/><rect width="2" height="6" fill="#fff" fill-opacity=".55"/></pattern>
<pattern id="p-timeout" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#E69F00"/><path d="M0 0l6 6M6 0l-6 6" stroke="#000" stroke-opacity=".45"/></pattern>
<pattern id="p-lock_lost" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#CC79A7"/><rect width="2" height="6" fill="#000" fill-opacity=".4"/></pattern>
<pattern id="p-interrupted" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" fill="#F0E442"/><circle cx="2.5" cy="2.5" r="1" fill="#000" fill-opacity=".5"/></pattern>
<pattern id="p-error" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" fill="#000"/><circle cx="2.5" cy="2.5" r="1" fill="#fff"/></pattern>
<pattern id="p-abandoned" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#999"/><rect width="3" height="6" fill="#ddd"/></pattern>
<pattern id="p-suspended" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#56B4E9"/><rect width="4" height="1.5" fill="#fff" fill-opacity=".7"/></pattern>
<pattern id="p-retried" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#E69F00" fill-opacity=".55"/><rect width="1.5" height="6" fill="#000" fill-opacity=".35"/></pattern>
<pattern id="p-running" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(90)"><rect width="8" height="8" fill="#0072B2"/><rect width="3" height="8" fill="#fff" fill-opacity=".35"/></pattern>
<pattern id="p-neverfired" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="5" height="5" fill="#fff"/><rect width="1.5" height="5" fill="#CC79A7"/></pattern>
<marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto"><path d="M0 0l8 4-8 4z" fill="#0072B2"/></marker>
</defs>`

// legendMarks explains the marks, after the statuses in the legend.
const legendMarks = `<li><svg width="22" height="12" aria-hidden="true"><text class="mark-dup" x="1" y="9">DUP</text></svg>DUPLICATE (outlined)</li>
<li><svg width="14" height="12" aria-hidden="true"><path class="mark-missed" d="M3 2l8 8m0-8l-8 8"/></svg>missed</li>
<li><svg width="22" height="12" aria-hidden="true"><path class="mark-neverfired" d="M1 1h20v10h-20z"/></svg>never fired (in the key's row)</li>
<li><svg width="26" height="12" aria-hidden="true"><path class="mark-takeover" d="M1 6h20"/></svg>takeover</li>
<li><svg width="12" height="12" aria-hidden="true"><path class="mark-suspended" d="M1 1h3v10h-3zm6 0h3v10h-3z"/></svg>suspended</li>
<li><svg width="22" height="12" aria-hidden="true"><path class="ticks" d="M4 2v8M11 2v8M18 2v8"/></svg>ticks</li>
`

// cardScript shows a run's card on hover: one listener on the timeline for all bars.
const cardScript = `<script>
(function () {
  "use strict";
  var runs = JSON.parse(document.getElementById("runs").textContent);
  var names = ["Run", "Key", "Node", "Status", "Tick", "Started", "Finished", "Duration", "Exit", "Error", "Attempt", "Took over"];
  var tl = document.getElementById("tl"), card = document.getElementById("card"), dl = card.firstElementChild;
  var shown = -1;
  function place(ev) {
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + card.offsetWidth > innerWidth) x = ev.clientX - card.offsetWidth - 14;
    if (y + card.offsetHeight > innerHeight) y = ev.clientY - card.offsetHeight - 14;
    card.style.left = Math.max(0, x) + "px";
    card.style.top = Math.max(0, y) + "px";
  }
  function show(ev) {
    var i = ev.target.getAttribute("data-i");
    if (i === null) { card.hidden = true; shown = -1; return; }
    if (+i !== shown) {
      shown = +i;
      var r = runs[shown];
      dl.textContent = "";
      for (var k = 0; k < names.length; k++) {
        if (!r[k]) continue;
        var dt = document.createElement("dt"), dd = document.createElement("dd");
        dt.textContent = names[k];
        dd.textContent = r[k];
        dl.appendChild(dt);
        dl.appendChild(dd);
      }
    }
    card.hidden = false;
    place(ev);
  }
  tl.addEventListener("mouseover", show);
  tl.addEventListener("mousemove", function (ev) { if (!card.hidden) place(ev); });
  tl.addEventListener("mouseleave", function () { card.hidden = true; shown = -1; });
})();
</script>`

// writePage writes v as the page.
func writePage(w io.Writer, v *view) error {
	b := bufio.NewWriterSize(w, 64<<10)
	e := html.EscapeString
	p := func(ss ...string) {
		for _, s := range ss {
			b.WriteString(s)
		}
	}
	p(pageHead, "<h1>cronlock report</h1>\n<p class=\"meta\">From ", e(v.Source), ". ")
	if v.Empty {
		p("No runs in the window.")
	} else {
		p(e(v.Summary), ". ", v.From, " to ", v.To, " (UTC), made ", v.Made, ".")
	}
	p("</p>\n<ul class=\"legend\" aria-label=\"legend\">\n")
	for _, l := range v.Legend {
		p(`<li><svg width="22" height="12" aria-hidden="true"><rect class="r `, l.Class,
			`" x="1" y="1" width="20" height="10"/></svg>`, e(l.Name), " (", strconv.Itoa(l.Count), ")</li>\n")
	}
	p(legendMarks, "</ul>\n")
	if v.Empty {
		p("<p class=\"empty\">No runs to draw.</p>\n</body>\n</html>\n")
		return b.Flush()
	}
	h, wd := strconv.Itoa(v.Height), strconv.Itoa(v.Width)
	p(`<div class="tl">`, "\n", `<svg class="labels" width="`, strconv.Itoa(v.LabelW), `" height="`, h, `" role="presentation">`, "\n")
	for _, l := range v.Labels {
		cls, x := "", "18"
		if l.Key {
			cls, x = ` class="key"`, "6"
		}
		p("<text", cls, ` x="`, x, `" y="`, strconv.Itoa(l.Y), `" dy="15"><title>`, e(l.Title), "</title>", e(l.Text), "</text>\n")
	}
	p("</svg>\n", `<svg id="tl" width="`, wd, `" height="`, h, `" role="img" aria-label="timeline of runs">`, "\n", patterns, "\n<g class=\"rows\">\n")
	for _, r := range v.Rows {
		cls := "row"
		if r.Key {
			cls = "row key"
		}
		p(`<rect class="`, cls, `" x="0" y="`, strconv.Itoa(r.Y), `" width="100%" height="22"/>`, "\n")
	}
	p("</g>\n<g class=\"axis\">\n")
	for _, g := range v.Grid {
		p(`<line x1="`, g.X, `" x2="`, g.X, `" y1="6" y2="100%"/><text x="`, g.X, `" y="16" dx="4">`, e(g.Label), "</text>\n")
	}
	p("</g>\n<g class=\"ticks\">\n")
	for _, d := range v.TickPaths {
		p(`<path d="`, d, `"/>`, "\n")
	}
	p("</g>\n<g class=\"runs\">\n")
	for _, r := range v.Bars {
		p(`<rect class="`, r.Class, `" data-i="`, strconv.Itoa(r.I), `" x="`, r.X, `" y="`, r.Y, `" width="`, r.W, `" height="`, r.H, `"/>`, "\n")
	}
	p("</g>\n<g class=\"marks\">\n")
	for _, m := range v.Marks {
		run := ""
		if m.I >= 0 {
			run = ` data-run="` + strconv.Itoa(m.I) + `"`
		}
		if m.D == "" {
			p(`<text class="`, m.Class, `"`, run, ` x="`, m.X, `" y="`, m.Y, `">`, e(m.Text), "</text>\n")
			continue
		}
		p(`<path class="`, m.Class, `"`, run, ` d="`, m.D, `">`)
		if m.Title != "" {
			p("<title>", e(m.Title), "</title>")
		}
		p("</path>\n")
	}
	p("</g>\n</svg>\n</div>\n", `<div id="card" role="tooltip" hidden><dl></dl></div>`, "\n", `<script type="application/json" id="runs">`)
	data, err := json.Marshal(v.Cards) // escapes <, > and &: nothing closes the script element
	if err != nil {
		return err
	}
	b.Write(data)
	p("</script>\n", cardScript, "\n</body>\n</html>\n")
	return b.Flush()
}
