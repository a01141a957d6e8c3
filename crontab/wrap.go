package crontab

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"cronlock/schedule"
)

// Options say how wrap writes a line.
type Options struct {
	// Cronlock is the path written in front of each job: absolute, because Debian's cron
	// runs jobs with PATH=/usr/bin:/bin. It must hold no %, newline or NUL (Check).
	Cronlock string
	// System says the file has a user field (/etc/crontab, /etc/cron.d/*).
	System bool
	// Local adds --backend local: a system file's jobs (logrotate, sysstat) belong to
	// each machine, so the caller sets it for system files unless asked for the fleet.
	Local bool
	// CronTZ says the cron daemon honours CRON_TZ= lines (cronie does, Debian's cron
	// does not): only then does a CRON_TZ= line in force go into --schedule.
	CronTZ bool
	// DaemonZone is the zone the cron daemon fires lines in that no CRON_TZ= it honours
	// covers (the name of /etc/localtime's zone); lint compares a wrapped line's
	// --schedule in it. "" = unknown: UTC stands in.
	DaemonZone string
	// RunZone is the zone cronlock run reads a --schedule in that has neither CRON_TZ=
	// nor --tz, when the settings give one (CRONLOCK_TZ), and RunZoneFrom says where
	// from ("CRONLOCK_TZ in /etc/cronlock/cronlock.conf"). "" = /etc/localtime's, as run.
	RunZone, RunZoneFrom string
	// InCronPath says whether a command name is found in Debian cron's default
	// PATH=/usr/bin:/bin; lint reports relative commands only when it is not. nil: never.
	InCronPath func(name string) bool
	// UserExists says whether a system file's user field names a user of this machine
	// (Debian's cron refuses the file when not). nil: not checked.
	UserExists func(name string) bool
	// User owns a user crontab (which has no user field): it goes into each key, so
	// that alice's and bob's identical lines do not share a lock. Unused for system files.
	User string
}

// Check says why o cannot be used, or nil.
func (o Options) Check() error {
	if !path.IsAbs(o.Cronlock) {
		return fmt.Errorf("the path of cronlock %q is not absolute: cron runs jobs with PATH=/usr/bin:/bin", o.Cronlock)
	}
	if strings.ContainsAny(o.Cronlock, "%\n\x00") {
		return fmt.Errorf("the path of cronlock %q holds %%, a newline or NUL, which a crontab line cannot carry", o.Cronlock)
	}
	return nil
}

// A Note says why wrap left a job line as it is.
type Note struct {
	Line int
	Msg  string
}

// Wrap returns the lines of the wrapped file (one per line of lines: wrap never adds or
// removes a line) and a note for each job line it left alone (among them lines that
// start a service or leave work in the background, and lines whose wrapped command
// would be too long for Debian's cron) and for each line Debian's cron refuses.
// Comments, blanks, env lines, @reboot lines and lines already under cronlock come back
// as they are, so wrapping Wrap's own output changes nothing.
func Wrap(lines []Line, o Options) (out []string, notes []Note) {
	lines = ownWrapped(lines, o)
	out = make([]string, len(lines))
	for i := range lines {
		l := &lines[i]
		text, why := wrapLine(l, o)
		if r := refused(l, o); r != "" {
			// Wrapping would not make cron read the file; say why it will not.
			text, why = l.Text, r+leftAlone
		}
		out[i] = text
		if why != "" {
			notes = append(notes, Note{l.Num, why})
		}
	}
	return out, notes
}

// wrapLine returns the new text of l, or its own text and why it was left alone.
func wrapLine(l *Line, o Options) (string, string) {
	if l.Kind != Job {
		return l.Text, ""
	}
	if why := leaveAlone(l); why != "" {
		return l.Text, why
	}
	sched := l.Schedule
	if tz, ok := l.Getenv("CRON_TZ"); ok && tz != "" && o.CronTZ {
		sched = "CRON_TZ=" + tz + " " + sched
	}
	if _, err := schedule.Parse(sched, "UTC"); err != nil {
		return l.Text, fmt.Sprintf("cronlock cannot read the schedule %q: %v%s", sched, err, leftAlone)
	}
	shell, _ := l.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	var b strings.Builder
	b.WriteString(l.Prefix)
	b.WriteString(o.Cronlock)
	b.WriteString(" run --key ")
	user := l.User
	if !o.System {
		user = o.User
	}
	b.WriteString(Key(user, l))
	b.WriteString(" --schedule ")
	b.WriteString(quote(sched))
	if o.Local {
		b.WriteString(" --backend local")
	}
	b.WriteString(" -- ")
	b.WriteString(quote(shell))
	b.WriteString(" -c ")
	// The command goes in as cron read it, \% and all: cron turns \% into % in the
	// wrapped line too (it knows no shell quotes), so the inner shell gets what the
	// original line's shell got.
	b.WriteString(quote(l.Command))
	// Debian's cron refuses a command field over MaxCommand bytes and then ignores
	// the whole file: the other jobs in it would stop running too. In a system file the
	// field starts after the one blank that ends the user name; further blanks count.
	n := b.Len() - len(l.Prefix)
	if o.System {
		n += len(l.Prefix) - len(strings.TrimRight(l.Prefix, " \t")) - 1
	}
	if n > MaxCommand {
		return l.Text, fmt.Sprintf("wrapped, the command would be %d bytes and Debian's cron takes at most %d (\"command too long\"), then ignores the whole file, every job in it%s", n, MaxCommand, leftAlone)
	}
	return b.String(), ""
}

// refused says in words why cron refuses line l and with it the whole file, or "". Only
// Debian's cron is modelled (o.CronTZ false); a more specific word of leaveAlone (six
// fields, @HOURLY) is kept when it has one.
func refused(l *Line, o Options) string {
	if o.CronTZ {
		return ""
	}
	r := DebianRefusal(l, o.System, o.UserExists)
	if r == "" {
		return ""
	}
	if l.Kind == Job {
		if why := strings.TrimSuffix(leaveAlone(l), leftAlone); strings.HasSuffix(why, refusesFile) {
			return why
		} else if why != "" && !strings.HasPrefix(why, "run-parts") {
			if word, _, ok := strings.Cut(strings.TrimPrefix(r, `"`), `"`); ok {
				r = `"` + word + `"`
			}
			return why + " (" + r + "): " + refusesFile
		}
	}
	return r + ": " + refusesFile
}

// leftAlone ends each note of a line wrap did not change; lint leaves it out.
const leftAlone = "; left as it is"

// leaveAlone says why a job line must not be wrapped, or "".
func leaveAlone(l *Line) string {
	if strings.ContainsAny(l.Text, "\r\x00") {
		return "holds a carriage return or NUL byte" + leftAlone
	}
	if _, pct := CronCommand(l.Command); pct {
		return "unescaped % (cron turns it into a newline and feeds the rest to the job's stdin): write \\% for a literal %" + leftAlone
	}
	if hasWord(l.Command, "run-parts") {
		return "run-parts line left as it is: its scripts are this machine's own"
	}
	if why := fieldTrouble(l); why != "" {
		return why + leftAlone
	}
	if why := descriptorCase(l.Schedule); why != "" {
		return why + ": " + refusesFile + leftAlone
	}
	if cmd, _ := CronCommand(l.Command); background(cmd) != "" {
		return backgroundNote(background(cmd)) + leftAlone
	}
	return ""
}

// descriptorCase says what is wrong with a descriptor written in another case than
// cron's (@HOURLY, @Daily, @REBOOT), or "". Debian's cron and cronie compare descriptors
// with strcmp: such a line is "bad time specifier" to them, and the crontab that holds it
// is refused whole, so none of its jobs runs; cronlock must not read it as cron does not.
func descriptorCase(sched string) string {
	lower := strings.ToLower(sched)
	if sched == lower || !strings.HasPrefix(sched, "@") {
		return ""
	}
	switch lower {
	case "@reboot", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		return fmt.Sprintf("\"bad time specifier\": cron reads %s only in lower case, write %s", sched, lower)
	}
	return ""
}

// fieldTrouble says what looks wrong with the fields of a job line: a sixth schedule
// field (seconds), a user field in a user crontab, or a missing one in a system file.
func fieldTrouble(l *Line) string {
	first, _ := nextWord(l.Command)
	if l.Schedule[0] != '@' && looksLikeField(first) && !l.systemUser() {
		return fmt.Sprintf("6 schedule fields (%s %s): cron takes 5 and no seconds, so %q would run as the command", l.Schedule, first, first)
	}
	if l.User != "" {
		if looksLikeField(l.User) {
			return fmt.Sprintf("6 schedule fields (%s %s) in a system crontab: cron reads %q as the user", l.Schedule, l.User, l.User)
		}
		if !validUser(l.User) {
			return fmt.Sprintf("the user field %q is not a user name: a system crontab needs one between the schedule and the command", l.User)
		}
		return ""
	}
	if first == "root" {
		return `"root" after the schedule: user crontabs have no user field, so cron would run a command named root`
	}
	return ""
}

// systemUser reports whether l came from a system file (its user field is set).
func (l *Line) systemUser() bool { return l.User != "" }

// looksLikeField reports whether w reads as a schedule field (digits, *, ranges, steps).
func looksLikeField(w string) bool {
	if w == "" {
		return false
	}
	digit := false
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case '0' <= c && c <= '9':
			digit = true
		case c == '*':
			digit = true
		case c == ',', c == '-', c == '/':
		default:
			return false
		}
	}
	return digit
}

// validUser reports whether u can be a user name (POSIX portable names, and the $ of
// machine accounts).
func validUser(u string) bool {
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '.', c == '-' && i > 0, c == '$' && i == len(u)-1 && i > 0:
		default:
			return false
		}
	}
	return u != ""
}

// hasWord reports whether the command has w as a word, or as the last element of a
// path word (/bin/run-parts).
func hasWord(cmd, w string) bool {
	for _, f := range words(cmd) {
		if f == w || strings.HasSuffix(f, "/"+w) {
			return true
		}
	}
	return false
}

// words splits a command at blanks and shell operators, for guessing, not parsing.
func words(cmd string) []string {
	return strings.FieldsFunc(cmd, func(r rune) bool {
		return strings.ContainsRune(" \t;&|(){}<>`", r)
	})
}

// quote writes s as one POSIX shell word: bare when no shell treats any of its bytes
// specially, else in single quotes, inside which nothing expands; a ' inside is closed,
// escaped and reopened. Unlike tty.Command it never uses $'...' (dash has none): a tab
// stays a tab inside the quotes, which every shell keeps as it is.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@+:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hashSkip are env names left out of the key: where cron mails the output says nothing
// about what the job does, and hosts often differ in it.
var hashSkip = map[string]bool{"MAILTO": true, "MAILFROM": true}

// Key is the lock key of a job line run by user (a system file's user field, or the
// owner of a user crontab): a slug of its command that people can read, then 8 hex
// digits of the SHA-256 of user, the env lines in force (but MAILTO and MAILFROM) and
// the command with blank runs made one space. The same line under the same env gets the
// same key on every host; another user, env or command gets another.
func Key(user string, l *Line) string {
	h := sha256.New()
	h.Write([]byte(user))
	h.Write([]byte{0})
	for _, e := range l.Env {
		name, _, _ := strings.Cut(e, "=")
		if hashSkip[name] {
			continue
		}
		h.Write([]byte(e))
		h.Write([]byte{'\n'})
	}
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(strings.Fields(l.Command), " ")))
	return slug(l.Command) + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// slugSkip are words that say little about what a job is.
var slugSkip = map[string]bool{
	"test": true, "[": true, "]": true, "[[": true, "]]": true, "command": true, "cd": true,
	"if": true, "then": true, "else": true, "fi": true, "do": true, "done": true,
	"for": true, "while": true, "exec": true, "nice": true, "ionice": true, "env": true,
	"sudo": true, "sh": true, "bash": true, "true": true, "false": true, "null": true,
	"dev": true, "run": true, "systemd": true, "system": true, "usr": true, "bin": true,
	"sbin": true, "local": true, "lib": true,
}

// slug makes a readable part of a key from a command: up to three of its words that
// are neither options nor assignments nor shell plumbing, last path elements only,
// lowercase letters, digits, . _ and -; "job" when none is left.
func slug(cmd string) string {
	var parts []string
	seen := map[string]bool{}
	for _, w := range words(cmd) {
		if strings.HasPrefix(w, "-") || strings.Contains(w, "=") || strings.HasPrefix(w, "$") {
			continue
		}
		w = path.Base(strings.TrimRight(w, "/"))
		var b strings.Builder
		for _, r := range strings.ToLower(w) {
			if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_' || (r == '.' || r == '-') && b.Len() > 0 {
				b.WriteRune(r)
			}
		}
		s := strings.Trim(b.String(), "._-")
		if s == "" || slugSkip[s] || seen[s] || strings.Trim(s, "0123456789") == "" {
			continue
		}
		seen[s] = true
		parts = append(parts, s)
		if len(parts) == 3 {
			break
		}
	}
	out := strings.Join(parts, "-")
	if len(out) > 40 {
		out = strings.TrimRight(out[:40], "-._")
	}
	if out == "" {
		return "job"
	}
	return out
}
