package runview

// Fuzz targets for the renderers: without -fuzz they run their seeds (f.Add and
// testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzHistoryRender$' -fuzztime 60s ./runview/

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/fuzzcheck"
)

// sgr matches the colour codes the table writes on a terminal.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// FuzzHistoryRender renders a run with arbitrary strings, as a table (with and without
// colour) and as a JSON line. The table is one header and one row, '\n'-ended, with no
// control byte but the colour codes; the JSON is one valid line with no raw control byte
// that decodes to the run's strings (invalid UTF-8 as U+FFFD).
func FuzzHistoryRender(f *testing.F) {
	start := time.Date(2025, 6, 1, 7, 0, 0, 0, time.UTC).UnixNano()
	type seed struct {
		key, node, status, signal, errS, holder, argv string
		exit                                          int
		hasExit                                       bool
		started, finished                             int64
		token                                         uint64
		color                                         bool
	}
	for _, s := range []seed{
		{"billing", "web-1", "succeeded", "", "", "", "/opt/jobs/billing.sh\x00--all", 0, true, start, start + 1.5e9, 17, false},
		{"billing", "evil\x1b[31m\x07", "failed", "", "exit status 3\x1b[2J", "", "sh\x00-c\x00printf '\x1b]0;pwned\x07'", 3, true, start, start + 42e6, 0, true},
		{"report", "web-2", "skipped", "", "", "web-1\n(pid 10, run x)\r", "true", 0, false, start, start, 0, true},
		{"report", "web-2", "interrupted", "SIGTERM\x1b", "", "", "sleep\x009", 0, false, start, start + 2e9, 0, false},
		{"k", "\xff\xfe\u202e", "running", "", "", "", "", 0, false, start, 0, 1 << 63, true},
		{"\u009b2J", "\u2028", "bogus\x1b[0m", "", "\x00", "", "\x00\x00", -1, true, -1 << 63, 1<<63 - 1, 0, true},
		{"k", "n", "abandoned", "", "", "", "a b\x00'\"\x00\\$`\x00é\x00\uFFFD", 255, true, 0, 1, 0, false},
	} {
		f.Add(s.key, s.node, s.status, s.signal, s.errS, s.holder, s.argv, s.exit, s.hasExit, s.started, s.finished, s.token, s.color)
	}
	loc := time.FixedZone("CEST", 2*3600)
	f.Fuzz(func(t *testing.T, key, node, status, signal, errS, holder, argv string, exit int, hasExit bool,
		started, finished int64, token uint64, color bool) {
		r := history.Run{ID: "01970000-0000-7000-8000-000000000001", Key: key, Node: node, PID: 42,
			Status: status, Signal: signal, Error: errS, Holder: holder, FencingToken: token,
			StartedAt: time.Unix(0, started), Backend: "local /run/cronlock"}
		if argv != "" {
			r.Command = strings.Split(argv, "\x00") // NUL separates, as in the history file
		}
		if hasExit {
			r.ExitCode = &exit
		}
		if finished != 0 {
			r.FinishedAt = time.Unix(0, finished)
		}
		for _, utc := range []bool{false, true} {
			var out bytes.Buffer
			o := Options{Color: color, Loc: loc, UTC: utc}
			if utc {
				o.Width = 60 // COMMAND and NOTE cut to fit: still printable, one line a run
			}
			if err := WriteRunsTable(&out, []history.Run{r}, nil, o); err != nil {
				t.Fatal(err)
			}
			table := out.String()
			plain := table
			if color {
				plain = sgr.ReplaceAllString(table, "")
			}
			if !fuzzcheck.Printable(plain, true) || strings.Count(plain, "\n") != 2 || !strings.HasSuffix(plain, "\n") {
				t.Fatalf("table of %+v (argv %q):\n%q", r, r.Command, table)
			}
		}
		var out bytes.Buffer
		if err := WriteRunsJSON(&out, []history.Run{r}); err != nil {
			t.Fatalf("JSON of %+v: %v", r, err)
		}
		line := out.Bytes()
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' || !json.Valid(line) {
			t.Fatalf("JSON of %+v is not one valid line: %q", r, line)
		}
		for _, c := range string(line[:len(line)-1]) {
			if c < 0x20 || 0x7f <= c && c <= 0x9f {
				t.Fatalf("JSON of %+v has a raw control %U: %q", r, c, line)
			}
		}
		var j struct {
			Key, Node, Status, Error, Holder string
			Signal                           *string
			Command                          []string
			ExitCode                         *int   `json:"exit_code"`
			FencingToken                     uint64 `json:"fencing_token"`
		}
		if err := json.Unmarshal(line, &j); err != nil {
			t.Fatal(err)
		}
		u := func(s string) string { return string([]rune(s)) } // invalid UTF-8 → U+FFFD per byte
		if j.Key != u(key) || j.Node != u(node) || j.Status != u(status) || j.Error != u(errS) ||
			j.Holder != u(holder) || j.FencingToken != token || len(j.Command) != len(r.Command) ||
			(j.ExitCode != nil) != hasExit || hasExit && *j.ExitCode != exit ||
			(j.Signal != nil) != (signal != "") || j.Signal != nil && *j.Signal != u(signal) {
			t.Fatalf("JSON of %+v decodes as %+v", r, j)
		}
		for i, a := range r.Command {
			if j.Command[i] != u(a) {
				t.Fatalf("JSON command %q, want %q", j.Command, r.Command)
			}
		}
	})
}
