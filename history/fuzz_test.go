package history

// Fuzz targets for what the history package encodes and decodes: the argv column, rows
// read back from SQLite (written by Insert, or by hand with any values), and the JSON
// line of a run. Without -fuzz they run their seeds (f.Add and testdata/fuzz) as
// ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzStoreRoundTrip$' -fuzztime 60s ./history/

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cronlock/runstatus"
)

// FuzzArgv: any stored bytes decode to an argv (never nil) without NUL, that encodes
// back to the same bytes (plus the final NUL a hand-written row may lack) and decodes
// again to itself; so every argv exec can take survives the round trip.
func FuzzArgv(f *testing.F) {
	for _, s := range []string{"", "\x00", "\x00\x00", "a", "a\x00", "a\x00b\x00", "a\x00\x00b", "sh\x00-c\x00echo hi\x00",
		"\xff\xfe\x00\x1b[2J\x00", "\x00a", strings.Repeat("x\x00", 100)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		argv := decodeArgv(data)
		if argv == nil {
			t.Fatalf("decodeArgv(%q) = nil", data)
		}
		for _, a := range argv {
			if strings.Contains(a, "\x00") {
				t.Fatalf("decodeArgv(%q) = %q", data, argv)
			}
		}
		want := data
		if len(data) > 0 && data[len(data)-1] != 0 {
			want = append(append([]byte{}, data...), 0)
		}
		enc := encodeArgv(argv)
		if enc == nil || !bytes.Equal(enc, want) {
			t.Fatalf("encodeArgv(decodeArgv(%q) = %q) = %q", data, argv, enc)
		}
		if back := decodeArgv(enc); !reflect.DeepEqual(back, argv) {
			t.Fatalf("decodeArgv(encodeArgv(%q)) = %q", argv, back)
		}
	})
}

// checkJSONLine checks the JSON line of r: one line, valid JSON, no raw control byte,
// every documented field, and the strings of r (invalid UTF-8 as U+FFFD per byte).
func checkJSONLine(t *testing.T, r Run) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", r, err)
	}
	if !json.Valid(b) {
		t.Fatalf("JSON of %+v is not valid: %q", r, b)
	}
	for _, c := range string(b) {
		if c < 0x20 || 0x7f <= c && c <= 0x9f {
			t.Fatalf("JSON of %+v has a raw control %U: %q", r, c, b)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "key", "node", "pid", "command", "status", "exit_code", "signal",
		"started_at", "finished_at", "duration_ms", "error", "holder", "fencing_token", "backend", "attempt"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("JSON of %+v has no %q: %s", r, k, b)
		}
	}
	var j struct {
		Key, Node, Status, Error, Holder, Backend string
		Command                                   []string
		Signal                                    *string
		ExitCode                                  *int    `json:"exit_code"`
		StartedAt                                 string  `json:"started_at"`
		FinishedAt                                *string `json:"finished_at"`
		DurationMS                                *int64  `json:"duration_ms"`
		FencingToken                              uint64  `json:"fencing_token"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	u := func(s string) string { return string([]rune(s)) }
	if j.Key != u(r.Key) || j.Node != u(r.Node) || j.Status != u(r.Status) || j.Error != u(r.Error) ||
		j.Holder != u(r.Holder) || j.Backend != u(r.Backend) || j.FencingToken != r.FencingToken ||
		j.Command == nil || len(j.Command) != len(r.Command) ||
		(j.ExitCode == nil) != (r.ExitCode == nil) || r.ExitCode != nil && *j.ExitCode != *r.ExitCode ||
		(j.Signal == nil) != (r.Signal == "") || j.Signal != nil && *j.Signal != u(r.Signal) ||
		(j.FinishedAt == nil) != r.FinishedAt.IsZero() || (j.DurationMS == nil) != r.FinishedAt.IsZero() {
		t.Fatalf("JSON of %+v decodes as %+v", r, j)
	}
	for i, a := range r.Command {
		if j.Command[i] != u(a) {
			t.Fatalf("JSON command %q, want %q", j.Command, r.Command)
		}
	}
	for _, ts := range []*string{&j.StartedAt, j.FinishedAt} {
		if ts == nil {
			continue
		}
		if !strings.HasSuffix(*ts, "Z") {
			t.Fatalf("JSON time %q is not UTC", *ts)
		}
		if _, err := time.Parse(time.RFC3339Nano, *ts); err != nil {
			t.Fatalf("JSON time %q is not RFC 3339: %v", *ts, err)
		}
	}
}

// FuzzRunJSON: the JSON line of any run (any strings, times, codes) is one valid line
// with every documented field, and gives back the run's values.
func FuzzRunJSON(f *testing.F) {
	start := time.Date(2025, 6, 1, 7, 0, 0, 0, time.UTC).UnixNano()
	f.Add("billing", "web-1", "succeeded", "", "", "", []byte("/opt/jobs/billing.sh\x00--all\x00"), 0, true, start, start+15e8, uint64(17))
	f.Add("k", "evil\x1b[31m\x07", "failed", "SIGTERM", "exit \u2028 \u2029 <&>", "web-1 (pid 1, run x)", []byte("\xff\x00\x00"), 3, false, start, int64(0), uint64(1<<63))
	f.Add("", "", "", "", "\x00", "\"\\", []byte(""), -1, true, int64(-1<<63), int64(1<<63-1), uint64(1<<64-1))
	f.Fuzz(func(t *testing.T, key, node, status, signal, errS, holder string, argv []byte, exit int, hasExit bool,
		started, finished int64, token uint64) {
		r := Run{ID: "01970000-0000-7000-8000-000000000001", Key: key, Node: node, PID: 7, Command: decodeArgv(argv),
			Status: status, Signal: signal, Error: errS, Holder: holder, FencingToken: token,
			StartedAt: time.Unix(0, started), Backend: "redis 127.0.0.1:6379/0"}
		if hasExit {
			r.ExitCode = &exit
		}
		if finished != 0 {
			r.FinishedAt = time.Unix(0, finished)
		}
		checkJSONLine(t, r)
		if len(argv) == 0 {
			r.Command = nil // a Run made in code, not read back: still an array
			checkJSONLine(t, r)
		}
	})
}

// fuzzStore opens one history per fuzz process in a folder of f.
func fuzzStore(f *testing.F) *Store {
	s, err := Open(filepath.Join(f.TempDir(), "history.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s
}

var fuzzRowN atomic.Int64

// fuzzID returns a new run id for this process.
func fuzzID() string {
	return fmt.Sprintf("01970000-0000-7000-8000-%012d", fuzzRowN.Add(1))
}

// FuzzStoreRoundTrip: a run with any strings, argv, exit code, times, fencing token and
// output tail, written by Insert, reads back equal from Get and from List, byte for byte.
func FuzzStoreRoundTrip(f *testing.F) {
	start := time.Date(2025, 6, 1, 7, 0, 0, 0, time.UTC).UnixNano()
	f.Add("billing", "web-1", uint8(1), "", "", "", []byte("/opt/jobs/billing.sh\x00--all\x00"), 0, true, start, start+15e8, uint64(17), []byte("ok\n"))
	f.Add("k", "evil\x1b[31m\x07", uint8(2), "SIGTERM", "exit\x00status", "n\x00ode (pid 1, run x)", []byte("\xff\x00\x00"), 3, false, start, int64(0), uint64(1<<63), []byte("\x00\xff"))
	f.Add("", "\xff\xfe", uint8(6), "", "", "", []byte("a"), -1, true, int64(-1<<63), int64(1<<63-1), uint64(1<<64-1), []byte{})
	f.Add("k", "n", uint8(8), "", "", "", []byte(""), 0, false, int64(0), int64(-1), uint64(0), []byte(nil))
	store := fuzzStore(f)
	f.Fuzz(func(t *testing.T, key, node string, status uint8, signal, errS, holder string, argv []byte,
		exit int, hasExit bool, started, finished int64, token uint64, output []byte) {
		// Only what exec can take: decodeArgv drops what a NUL-separated argv cannot hold.
		r := Run{ID: fuzzID(), Key: key, Node: node, PID: 7, Command: decodeArgv(argv),
			Status: runstatus.All[1+int(status)%(len(runstatus.All)-1)], Signal: signal, Error: errS,
			Holder: holder, FencingToken: token, StartedAt: time.Unix(0, started),
			FinishedAt: time.Unix(0, finished), Backend: "local /run/cronlock", Output: output}
		if hasExit {
			r.ExitCode = &exit
		}
		want := r
		if err := store.Insert(&r); err != nil {
			t.Fatalf("Insert(%+v): %v", want, err)
		}
		got, err := store.Get(r.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", r.ID, err)
		}
		if len(want.Output) == 0 {
			want.Output = nil
		}
		if len(got.Output) == 0 {
			got.Output = nil
		}
		if got.Output == nil && want.Output != nil {
			// The tail cap: a run that is not among its key's newest tailsPerKey with
			// output (the fuzzer starts runs at any time) keeps no tail.
			var newer int
			if err := store.db.QueryRow(`SELECT count(*) FROM run_output WHERE run_key = ? AND run_started_at >= ?`,
				key, started).Scan(&newer); err != nil {
				t.Fatal(err)
			}
			if newer < tailsPerKey {
				t.Fatalf("the tail of run %s was dropped with only %d tails of key %q as new", r.ID, newer, key)
			}
			want.Output, want.Streams = nil, nil
		}
		sameRun(t, "Get", want, got)
		if key != "" && node != "" { // "" filters nothing
			list, err := store.List(Filter{Key: key, Node: node, Status: r.Status, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case len(list) == 1 && list[0].ID == r.ID:
				want.Output = nil
				sameRun(t, "List", want, list[0])
			case started >= maxStarted(t, store, key, node, r.Status):
				t.Fatalf("List(key %q, node %q) does not show run %s first: %+v", key, node, r.ID, list)
			}
		}
		checkJSONLine(t, got)
	})
}

// maxStarted returns the newest start time of the matching rows (List's first).
func maxStarted(t *testing.T, s *Store, key, node, status string) int64 {
	var n int64
	if err := s.db.QueryRow(`SELECT max(started_at) FROM runs WHERE key = ? AND node = ? AND status = ?`,
		key, node, status).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func sameRun(t *testing.T, how string, want, got Run) {
	t.Helper()
	if got.ID != want.ID || got.Key != want.Key || got.Node != want.Node || got.PID != want.PID ||
		!reflect.DeepEqual(got.Command, want.Command) || got.Status != want.Status ||
		(got.ExitCode == nil) != (want.ExitCode == nil) || got.ExitCode != nil && *got.ExitCode != *want.ExitCode ||
		got.Signal != want.Signal || !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) ||
		got.Error != want.Error || got.Holder != want.Holder || got.FencingToken != want.FencingToken ||
		got.Backend != want.Backend || !bytes.Equal(got.Output, want.Output) ||
		!reflect.DeepEqual(got.Streams, want.Streams) || got.Attempt != max(want.Attempt, 1) ||
		!bytes.Equal(got.BootID, want.BootID) || got.PIDStart != want.PIDStart {
		t.Fatalf("%s read back\n%+v\nwritten as\n%+v", how, got, want)
	}
}

// FuzzScanRow: a row written by hand, with any value in any column (a text command, a
// status cronlock does not know, a negative token, NULLs), reads back without a panic:
// either an error or a run whose JSON line is valid and whose argv is decodeArgv's.
func FuzzScanRow(f *testing.F) {
	f.Add("k", "n", []byte("a\x00b\x00"), false, "succeeded", int64(0), false, int64(1), int64(2), false, int64(-1), "", "")
	f.Add("k", "\x1b", []byte("a"), true, "bogus\x00", int64(1<<40), true, int64(-1<<63), int64(1<<63-1), true, int64(-1<<63), "\xff", "\u2028")
	f.Add("", "", []byte{}, true, "", int64(-1), false, int64(0), int64(0), false, int64(0), "", "")
	store := fuzzStore(f)
	f.Fuzz(func(t *testing.T, key, node string, cmd []byte, cmdAsText bool, status string, exit int64, exitNull bool,
		started, finished int64, finNull bool, token int64, errS, holder string) {
		id := fuzzID()
		var cmdArg any = cmd
		if cmdAsText {
			cmdArg = string(cmd) // SQLite keeps it as TEXT
		}
		var exitArg, finArg any = exit, finished
		if exitNull {
			exitArg = nil
		}
		if finNull {
			finArg = nil
		}
		if _, err := store.db.Exec(`INSERT INTO runs (`+runColumns+`) VALUES `+runValues,
			id, key, node, int64(9), cmdArg, status, exitArg, "", started, finArg, errS, holder, token, "",
			int64(1), cmd, started, exitArg, nil, errS, exit, exitArg, holder); err != nil {
			t.Fatalf("insert: %v", err)
		}
		got, err := store.Get(id)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if !reflect.DeepEqual(got.Command, decodeArgv(cmd)) || got.Key != key || got.Node != node ||
			got.Status != status || got.FencingToken != uint64(token) || got.StartedAt.UnixNano() != started ||
			(got.ExitCode == nil) != exitNull || !exitNull && int64(*got.ExitCode) != exit ||
			finNull != got.FinishedAt.IsZero() {
			t.Fatalf("row read back as %+v", got)
		}
		checkJSONLine(t, got)
		if _, err := store.List(Filter{Key: key, Limit: 5}); err != nil {
			t.Fatalf("List: %v", err)
		}
	})
}

// FuzzSegments: any bytes in run_output.streams decode without a panic into segments that
// never claim more bytes than the tail holds, and a valid list survives a round trip.
func FuzzSegments(f *testing.F) {
	f.Add(encodeSegments([]Segment{{Stdout, 3}, {Stderr, 2}}), 5)
	f.Add([]byte{0xff, 0xff, 0xff}, 10)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, b []byte, total int) {
		if total < 0 {
			total = -total
		}
		segs := decodeSegments(b, total)
		sum := 0
		for _, sg := range segs {
			if sg.Len < 0 {
				t.Fatalf("negative segment %+v", sg)
			}
			sum += sg.Len
		}
		if sum > total {
			t.Fatalf("segments %v claim %d bytes of %d", segs, sum, total)
		}
		if again := decodeSegments(encodeSegments(segs), sum); !reflect.DeepEqual(again, segs) {
			t.Fatalf("round trip %v → %v", segs, again)
		}
	})
}
