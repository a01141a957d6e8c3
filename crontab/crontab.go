// Package crontab reads and rewrites crontab files for `cronlock crontab wrap` and
// `cronlock crontab lint`: it splits a crontab (a user's, or the system format with a user
// field of /etc/crontab and /etc/cron.d/*) into lines, puts `cronlock run` in front of
// its job lines, says what it left alone and why, and finds the pitfalls lint reports,
// among them every line Debian's cron refuses (it then ignores the whole file).
//
// It reads the text as the cron daemon does (Debian's cron, and cronie where they
// differ: CRON_TZ), so that a wrapped line gives the shell exactly the command the
// original line gave it. It is pure: it never reads or writes files, never asks which
// daemon is installed, and never runs anything; its callers do.
package crontab

import (
	"slices"
	"strings"
)

// Kind says what a crontab line is.
type Kind int

// The kinds of line. A Job may still be one that wrap leaves alone (a run-parts line, a
// command with an unescaped %); Line.Skip says why.
const (
	Blank   Kind = iota // empty or only blanks
	Comment             // first non-blank character is #
	Env                 // NAME=value
	Reboot              // @reboot: no tick, so no --schedule; left alone
	Job                 // a schedule (5 fields or @daily…), in system files a user, a command
	Wrapped             // a job whose command already starts with cronlock
	Invalid             // none of the above: cron itself would refuse it
)

// Line is one line of a crontab as cron reads it.
type Line struct {
	Num  int    // 1-based
	Text string // as in the file, without its newline
	Kind Kind
	// NoEOL marks the last line of a file that does not end in a newline: Debian's
	// cron then ignores the whole file unless that line is blank or a comment.
	NoEOL bool

	// Env lines.
	Name, Value string

	// Job, Wrapped and Reboot lines. Schedule is the schedule fields joined by one
	// space (or the @descriptor); User is the user field of a system file.
	Schedule string
	User     string
	Command  string // the rest of the line from its first non-blank byte, as cron reads it
	Prefix   string // Text up to Command, kept as it is when the line is rewritten

	// Env is the environment lines in force at this line, in file order, as NAME=value.
	Env []string
}

// Parse splits text into lines. system says the file has a user field after the
// schedule (/etc/crontab, /etc/cron.d/*). A final line without a newline is a line.
func Parse(text string, system bool) []Line {
	raw := strings.Split(text, "\n")
	if strings.HasSuffix(text, "\n") {
		raw = raw[:len(raw)-1]
	}
	var env []string
	lines := make([]Line, 0, len(raw))
	for i, t := range raw {
		l := parseLine(t, system)
		l.Num = i + 1
		l.NoEOL = i == len(raw)-1 && !strings.HasSuffix(text, "\n")
		if l.Kind == Env {
			env = append(slicesClip(env), l.Name+"="+l.Value)
		}
		l.Env = env
		lines = append(lines, l)
	}
	return lines
}

// slicesClip makes the next append copy, so each Line keeps its own Env.
func slicesClip(s []string) []string { return s[:len(s):len(s)] }

func parseLine(t string, system bool) Line {
	l := Line{Text: t}
	s := strings.TrimLeft(t, " \t")
	switch {
	case s == "":
		l.Kind = Blank
		return l
	case s[0] == '#':
		l.Kind = Comment
		return l
	}
	if name, value, ok := parseEnv(s); ok {
		l.Kind, l.Name, l.Value = Env, name, value
		return l
	}
	rest := s
	var sched []string
	if s[0] == '@' {
		w, r := nextWord(rest)
		sched, rest = []string{w}, r
	} else {
		for range 5 {
			w, r := nextWord(rest)
			if w == "" {
				l.Kind = Invalid
				return l
			}
			sched, rest = append(sched, w), r
		}
	}
	l.Schedule = strings.Join(sched, " ")
	if system {
		w, r := nextWord(rest)
		l.User, rest = w, r
	}
	rest = strings.TrimLeft(rest, " \t")
	if rest == "" {
		l.Kind = Invalid
		return l
	}
	l.Command = rest
	l.Prefix = t[:len(t)-len(rest)]
	switch {
	case sched[0] == "@reboot": // cron compares with strcmp: @REBOOT is no @reboot
		l.Kind = Reboot
	case isWrapped(rest):
		l.Kind = Wrapped
	default:
		l.Kind = Job
	}
	return l
}

// nextWord returns the first blank-separated word of s and what follows it.
func nextWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// parseEnv reads an environment line as Debian's cron does (env.c load_env): a name,
// maybe quoted, blanks allowed around =, and a value whose matching outer quotes are
// removed. A line whose first word is a schedule field never gets here as an env line:
// its name would hold a blank before the =.
func parseEnv(s string) (name, value string, ok bool) {
	var rest string
	if q := s[0]; q == '"' || q == '\'' {
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return "", "", false
		}
		name, rest = s[1:1+end], s[2+end:]
	} else {
		end := strings.IndexAny(s, "= \t")
		if end <= 0 {
			return "", "", false
		}
		name, rest = s[:end], s[end:]
	}
	rest = strings.TrimLeft(rest, " \t")
	if name == "" || !strings.HasPrefix(rest, "=") {
		return "", "", false
	}
	value = strings.TrimRight(strings.TrimLeft(rest[1:], " \t"), " \t")
	if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
		value = value[1 : len(value)-1]
	}
	return name, value, true
}

// isWrapped reports whether a command already runs under cronlock: its first word is a
// path whose last element is cronlock (any subcommand: wrap never nests cronlock), or
// one of its simple commands runs `cronlock run` (`cd /opt && cronlock run …`,
// `env TZ=UTC /usr/bin/cronlock run …`): wrapping that would hold a second lock, under
// a key of wrap's, around the line's own.
func isWrapped(cmd string) bool {
	w, _ := nextWord(cmd)
	if w == "cronlock" || strings.HasSuffix(w, "/cronlock") {
		return true
	}
	shell, _ := CronCommand(cmd)
	return runsCronlock(shell)
}

// ownWrapped returns lines with the job lines whose command starts with o.Cronlock marked
// Wrapped: wrap writes that path, which need not end in /cronlock (--cronlock, or a
// binary installed under another name), and its own output must come back unchanged
// rather than wrapped a second time.
func ownWrapped(lines []Line, o Options) []Line {
	lines = slices.Clone(lines)
	for i := range lines {
		if w, _ := nextWord(lines[i].Command); lines[i].Kind == Job && w == o.Cronlock {
			lines[i].Kind = Wrapped
		}
	}
	return lines
}

// Getenv returns the value of the last env line NAME in force at l, and whether one is.
func (l *Line) Getenv(name string) (string, bool) {
	for i := len(l.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(l.Env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// CronCommand returns what cron hands the shell for a command: the text before the
// first unescaped %, with each \% turned into % (Debian's do_command.c). unescaped
// reports whether there was such a % (cron then feeds the rest to the job's stdin).
func CronCommand(cmd string) (shell string, unescaped bool) {
	var b strings.Builder
	escaped := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		if escaped {
			escaped = false
			if c == '%' {
				b.WriteByte('%')
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(c)
			continue
		}
		switch c {
		case '\\':
			escaped = true
			continue
		case '%':
			return b.String(), true
		}
		b.WriteByte(c)
	}
	if escaped {
		b.WriteByte('\\')
	}
	return b.String(), false
}
