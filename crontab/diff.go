package crontab

import (
	"fmt"
	"strings"
)

// context is how many unchanged lines a hunk shows around a change, as diff -u does.
const context = 3

// Diff returns a unified diff (diff -u, patch(1) applies it) from old to new, which have
// the same number of lines: wrap replaces lines, it never adds or removes one, so every
// change is a line for a line and no longest-common-subsequence search is needed.
// noEOL says the file's last line has no newline. Diff returns "" when nothing changed.
func Diff(name string, old, new []string, noEOL bool) string {
	if len(old) != len(new) {
		panic("crontab: Diff of files with different line counts")
	}
	var changed []int
	for i := range old {
		if old[i] != new[i] {
			changed = append(changed, i)
		}
	}
	if len(changed) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", name, name)
	for k := 0; k < len(changed); {
		// A hunk runs from context lines before its first change to context lines after
		// its last, taking in every change whose context touches the one before.
		end := k
		for end+1 < len(changed) && changed[end+1]-changed[end] <= 2*context+1 {
			end++
		}
		lo := max(changed[k]-context, 0)
		hi := min(changed[end]+context+1, len(old))
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", span(lo, hi), span(lo, hi))
		last := len(old) - 1
		for i := lo; i < hi; {
			if old[i] == new[i] {
				writeDiffLine(&b, ' ', old[i], noEOL && i == last)
				i++
				continue
			}
			// A run of changed lines: its old lines, then its new ones.
			j := i
			for j < hi && old[j] != new[j] {
				j++
			}
			for x := i; x < j; x++ {
				writeDiffLine(&b, '-', old[x], noEOL && x == last)
			}
			for x := i; x < j; x++ {
				writeDiffLine(&b, '+', new[x], noEOL && x == last)
			}
			i = j
		}
		k = end + 1
	}
	return b.String()
}

// span is a hunk range: first line (1-based) and count, count left out when it is 1.
func span(lo, hi int) string {
	if hi-lo == 1 {
		return fmt.Sprint(lo + 1)
	}
	return fmt.Sprintf("%d,%d", lo+1, hi-lo)
}

func writeDiffLine(b *strings.Builder, mark byte, text string, noEOL bool) {
	b.WriteByte(mark)
	b.WriteString(text)
	b.WriteByte('\n')
	if noEOL {
		b.WriteString("\\ No newline at end of file\n")
	}
}
