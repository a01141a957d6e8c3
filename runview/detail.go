package runview

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fatih/color"

	"cronlock/history"
	"cronlock/tty"
)

// WriteDetail prints every field of run r, one "name: value" line each, then its output
// tail (`cronlock history show`). Everything that comes from a job or a machine is
// escaped; the output keeps its lines, each marked with its stream when the row knows
// them. Of o it uses Loc, UTC and Color (stderr lines in red); it returns w's errors.
func WriteDetail(w io.Writer, r history.Run, o Options) error {
	loc := Zone(o.Loc, o.UTC)
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(loc).Format("2006-01-02 15:04:05.000 MST")
	}
	exit, cronExit := "-", "-"
	if r.ExitCode != nil {
		exit = strconv.Itoa(*r.ExitCode)
	}
	if r.Exit != nil {
		cronExit = strconv.Itoa(*r.Exit)
	}
	sched := "-" // the tick in UTC, as cron on other hosts saw it, and in the display zone
	if !r.ScheduledFor.IsZero() {
		sched = r.ScheduledFor.UTC().Format(time.RFC3339)
		if loc != time.UTC {
			sched += " (" + r.ScheduledFor.In(loc).Format("2006-01-02 15:04 MST") + ")"
		}
		if r.TakeoverOf != "" {
			sched += fmt.Sprintf(", attempt %d: takeover of run %s", max(r.TickAttempt, 1), tty.Escape(r.TakeoverOf))
		}
	}
	token := "-"
	if r.FencingToken != 0 {
		token = strconv.FormatUint(r.FencingToken, 10)
	}
	orDash := func(s string) string {
		if s == "" {
			return "-"
		}
		return tty.Escape(s)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range [][2]string{
		{"run", tty.Escape(r.ID)},
		{"key", tty.Escape(r.Key)},
		{"status", tty.Escape(r.Status)},
		{"command", tty.Command(r.Command)},
		{"node", tty.Escape(r.Node)},
		{"pid", pidLine(r)},
		{"backend", orDash(r.Backend)},
		{"attempt", strconv.Itoa(max(r.Attempt, 1))},
		{"try", tryLine(r)},
		{"scheduled for", sched},
		{"started", when(r.StartedAt)},
		{"finished", when(r.FinishedAt)},
		{"duration", RunDuration(r)},
		{"exit code", exit},
		{"cronlock exit", cronExit},
		{"signal", orDash(r.Signal)},
		{"fencing token", token},
		{"holder", orDash(r.Holder)},
		{"error", orDash(r.Error)},
		{"checkpoint", CheckpointLine(r, when(r.CheckpointAt))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Output) == 0 {
		_, err := fmt.Fprintln(w, "output: none captured")
		return err
	}
	if len(r.Streams) == 0 {
		// Unmarked: stdout and stderr shared one pipe (cron, `>log 2>&1`), or an older row.
		fmt.Fprintf(w, "output (last %d bytes):\n", len(r.Output))
		_, err := io.WriteString(w, escapeLines(string(r.Output)))
		return err
	}
	_, err := io.WriteString(w, markedOutput(r.Output, r.Streams, o.Color))
	return err
}

// outputLine is one line of a marked output tail as shown: a line the job printed, or the
// part of it that came from one stream when the stream changed inside the line.
type outputLine struct {
	stream history.Stream
	cont   bool // goes on from the line above: same printed line, other stream
	text   []byte
}

// outputLines cuts out into lines, each marked with the stream it came from; a line made
// of two streams (stdout printed "abc", then stderr "def\n") becomes two shown lines, the
// second a continuation. Bytes past the segments (a damaged list) get stream 0, unknown.
func outputLines(out []byte, segs []history.Segment) []outputLine {
	var lines []outputLine
	atStart := true
	piece := func(s history.Stream, b []byte) {
		for len(b) > 0 {
			chunk, rest, nl := bytes.Cut(b, []byte{'\n'})
			switch last := len(lines) - 1; {
			case atStart:
				lines = append(lines, outputLine{stream: s, text: chunk})
			case len(chunk) == 0: // only the newline that ends the line above
			case lines[last].stream == s:
				lines[last].text = append(lines[last].text, chunk...)
			default:
				lines = append(lines, outputLine{stream: s, cont: true, text: chunk})
			}
			atStart, b = nl, rest
		}
	}
	at := 0
	for _, sg := range segs {
		n := min(sg.Len, len(out)-at)
		piece(sg.Stream, out[at:at+n:at+n]) // capped: appending to a line copies
		at += n
	}
	piece(0, out[at:len(out):len(out)])
	return lines
}

// streamMarks are the prefixes of marked output lines: a line that starts, and the rest of
// a line that another stream began.
var streamMarks = map[history.Stream][2]string{
	history.Stdout: {"out| ", "out+ "},
	history.Stderr: {"err| ", "err+ "},
}

// markedOutput shows a marked output tail line by line, escaped, each line prefixed with its
// stream; with colour, stderr lines are red.
func markedOutput(out []byte, segs []history.Segment, colour bool) string {
	lines := outputLines(out, segs)
	legend := "out| stdout, err| stderr"
	for _, l := range lines {
		if l.cont {
			legend += ", out+ err+ the line above goes on"
			break
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "output (last %d bytes; %s):\n", len(out), legend)
	red := color.New(color.FgRed)
	red.EnableColor() // colour already decided; the package default looks at os.Stdout
	for _, l := range lines {
		marks, ok := streamMarks[l.stream]
		if !ok {
			marks = [2]string{"?  | ", "?  + "}
		}
		mark := marks[0]
		if l.cont {
			mark = marks[1]
		}
		line := mark + tty.Escape(string(l.text))
		if colour && l.stream == history.Stderr {
			line = red.Sprint(line)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// escapeLines escapes each line of s but keeps the line breaks, so that captured output
// reads as it was printed, without its control bytes; it ends with a newline.
func escapeLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = tty.Escape(l)
	}
	return strings.Join(lines, "\n") + "\n"
}

// pidLine is the pid of the run's cronlock, with the boot it ran in (the first bytes of the
// boot id, as `journalctl --list-boots` shows them) when known.
func pidLine(r history.Run) string {
	if len(r.BootID) == 0 {
		return strconv.Itoa(r.PID)
	}
	return fmt.Sprintf("%d (boot %x)", r.PID, r.BootID[:min(4, len(r.BootID))])
}

// tryLine says which try of its run r is, and names the run when r is not its first try.
func tryLine(r history.Run) string {
	if r.Try <= 1 {
		return "1"
	}
	return fmt.Sprintf("%d (of run %s)", r.Try, tty.Escape(r.RunID))
}
