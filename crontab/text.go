package crontab

import (
	"slices"
	"strings"
	"time"
)

// A Rewrite is a crontab's whole text with its job lines wrapped (WrapText).
type Rewrite struct {
	Text  string // the new text; it ends with a newline where the old one did
	Notes []Note // as Wrap returns them

	old, new []string
	noEOL    bool
}

// WrapText wraps the job lines of a crontab's whole text, system or user format as
// o.System says (Parse, then Wrap). A text whose last line has no newline keeps it so:
// wrap changes job lines, nothing else.
func WrapText(text string, o Options) Rewrite {
	lines := Parse(text, o.System)
	out, notes := Wrap(lines, o)
	old := make([]string, len(lines))
	for i := range lines {
		old[i] = lines[i].Text
	}
	noEOL := text != "" && !strings.HasSuffix(text, "\n")
	newText := strings.Join(out, "\n")
	if len(out) > 0 && !noEOL {
		newText += "\n"
	}
	return Rewrite{Text: newText, Notes: notes, old: old, new: out, noEOL: noEOL}
}

// Diff is the rewrite as a unified diff of the file name (Diff).
func (r Rewrite) Diff(name string) string { return Diff(name, r.old, r.new, r.noEOL) }

// LintText lints a crontab's whole text (Parse, then Lint) and returns the findings
// with each job line's next tick (NextTicks, after now) among them, in line order, a
// line's ticks after its findings; problems counts the findings alone, which are what
// lint's exit code is about.
func LintText(text string, o Options, now time.Time) (shown []Finding, problems int) {
	lines := Parse(text, o.System)
	fs := Lint(lines, o)
	all := append(slices.Clone(fs), NextTicks(lines, o, now)...)
	slices.SortStableFunc(all, func(a, b Finding) int { return a.Line - b.Line })
	return all, len(fs)
}
