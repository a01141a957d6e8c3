package jobrun

import (
	"fmt"
	"io"
	"time"

	"cronlock/child"
	"cronlock/runstatus"
)

// endLine is cronlock's one line about a run that did not succeed, the same on stderr
// (after the output, so in cron's mail) and at the end of a failure ping's body: what
// happened (the outcome's message, if it has one) and the facts a reader of the mail
// has no other way to know — status, the job's exit code or signal, tries, duration.
//
// A job's own failure has no message: with --output always its output went out as it
// came and its exit code is the run's, so it gets a line only where it is held
// (heldOutput: --output on-failure), whose mail must say why it was sent; the ping body
// always gets it. A success gets none.
func (r *runner) endLine(out outcome, heldOutput bool) string {
	if out.Status == runstatus.Succeeded || out.Status == "" {
		return ""
	}
	facts := out.Status
	switch {
	case out.ExitCode != nil:
		facts += fmt.Sprintf(", exit %d", *out.ExitCode)
	case out.Signal != "":
		facts += ", signal " + out.Signal
	}
	tries := "1 try"
	if r.row.Try > 1 {
		tries = fmt.Sprintf("%d tries", r.row.Try)
	}
	facts += ", " + tries + ", " + roundDuration(wallNow().Sub(r.started))
	if out.Message != "" {
		return out.Message + " (" + facts + ")"
	}
	if !heldOutput {
		return ""
	}
	return r.o.Key + ": " + facts
}

// roundDuration shows d to a precision a person reads: 340ms, 2.1s, 1m3s.
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		d = d.Round(time.Millisecond)
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String()
}

// endsMidLine reports whether the job's output that went where cronlock's stderr goes
// ended without a newline ("partial"): cronlock's line must then start on a line of its
// own. It is known from the captured tail: all of it when stdout and stderr share one
// destination (Streams nil), else the stderr part's last byte. A spool (--output
// on-failure) holds all of it, --capture 0 or not, and knows. Without either nothing is
// known, and the line goes as it is.
func endsMidLine(res child.Result, spool *child.Spool) bool {
	if spool != nil {
		return spool.EndsMidLine()
	}
	outb := res.Output
	if len(outb) == 0 {
		return false
	}
	if res.Streams == nil {
		return outb[len(outb)-1] != '\n'
	}
	end := 0
	last := -1
	for _, sg := range res.Streams {
		end += sg.Len
		if sg.Stream == child.StreamStderr && sg.Len > 0 {
			last = end - 1
		}
	}
	return last >= 0 && last < len(outb) && outb[last] != '\n'
}

// sayEnd prints the run's end line (or its message alone, when there is no line): on a
// line of its own after output that ended mid-line.
func (r *runner) sayEnd(out outcome, line string, res child.Result, spool *child.Spool) {
	if line == "" {
		line = out.Message
	}
	if line == "" || (out.Warning && r.o.Quiet) {
		return
	}
	if endsMidLine(res, spool) {
		io.WriteString(r.o.Stderr, "\n")
	}
	if out.Warning {
		r.infof("%s", line)
	} else {
		r.errorf("%s", line)
	}
}
