package cmd

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
)

// TestHistoryShowStreams: each line of a marked tail carries its stream; a line that
// changes stream is cut at the change and the rest marked as its continuation; control
// bytes stay escaped.
func TestHistoryShowStreams(t *testing.T) {
	o := func(n int) history.Segment { return history.Segment{Stream: history.Stdout, Len: n} }
	e := func(n int) history.Segment { return history.Segment{Stream: history.Stderr, Len: n} }
	type seg = history.Segment
	for _, c := range []struct {
		name   string
		output string
		segs   []seg
		want   []string // lines after the header
		cont   bool     // the header explains continuations
	}{
		{"one line each", "a\nb\n", []seg{o(2), e(2)}, []string{"out| a", "err| b"}, false},
		{"no final newline", "a\nb", []seg{o(2), e(1)}, []string{"out| a", "err| b"}, false},
		{"several lines in a segment", "a\nb\nc\n", []seg{e(4), o(2)}, []string{"err| a", "err| b", "out| c"}, false},
		{"line split across segments", "abcdef\n", []seg{o(3), e(4)}, []string{"out| abc", "err+ def"}, true},
		{"line over three segments", "ab\ncdefg\nh\n", []seg{o(5), e(2), o(4)},
			[]string{"out| ab", "out| cd", "err+ ef", "out+ g", "out| h"}, true},
		{"empty lines", "\n\n", []seg{e(1), o(1)}, []string{"err| ", "out| "}, false},
		{"same stream twice", "abcd\n", []seg{o(2), o(3)}, []string{"out| abcd"}, false},
		{"escaped", "\x1b[31mred\n\xff\x00\n", []seg{e(9), o(3)}, []string{`err| \x1b[31mred`, `out| \xff\x00`}, false},
		{"segments short of the output", "ab\ncd\n", []seg{o(3)}, []string{"out| ab", "?  | cd"}, false},
		{"segments past the output", "ab\n", []seg{o(2), e(5)}, []string{"out| ab"}, false},
		{"newline from the other stream", "ab\ncd\n", []seg{o(2), e(1), o(3)}, []string{"out| ab", "out| cd"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Split(strings.TrimSuffix(markedOutput([]byte(c.output), c.segs, false), "\n"), "\n")
			header := "output (last " + strconv.Itoa(len(c.output)) + " bytes; out| stdout, err| stderr"
			if c.cont {
				header += ", out+ err+ the line above goes on"
			}
			header += "):"
			if got[0] != header {
				t.Fatalf("header %q, want %q", got[0], header)
			}
			if strings.Join(got[1:], "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got[1:], "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestHistoryShowStreamsColour: with colour, stderr lines are red and stdout lines plain;
// without it no escape sequence at all.
func TestHistoryShowStreamsColour(t *testing.T) {
	segs := []history.Segment{{Stream: history.Stdout, Len: 3}, {Stream: history.Stderr, Len: 4}}
	got := markedOutput([]byte("ok\nbad\n"), segs, true)
	if !strings.Contains(got, "\nout| ok\n") || !strings.Contains(got, "\x1b[31merr| bad\x1b[0m\n") {
		t.Fatalf("with colour: %q", got)
	}
	if got := markedOutput([]byte("ok\nbad\n"), segs, false); strings.Contains(got, "\x1b") {
		t.Fatalf("without colour: %q", got)
	}
}

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
