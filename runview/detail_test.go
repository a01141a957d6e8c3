package runview

import (
	"strconv"
	"strings"
	"testing"

	"cronlock/history"
)

// Tests of the marked output tail of WriteDetail; cmd's TestHistoryShowRunStreams shows
// it through `history show`.

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
