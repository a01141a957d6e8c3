package crontab

import (
	"fmt"
	"strings"
)

// This file reads a crontab line as Debian's cron (3.0pl1 with Debian's patches, as in
// Debian 12) reads it, only to say whether the daemon accepts it: load_env's state
// machine for NAME=value lines, load_entry for job lines, and the limits both put on a
// line. Debian's daemon ignores a whole crontab when one line of it is refused, so the
// other jobs of that file stop too, silently but for a syslog line; crontab(1) refuses
// to install such a file. The values read here are not used for anything else: Parse
// keeps its own reading for keys, which must not change.

// MaxCommand is the longest command field Debian's cron takes, in bytes: entry.c reads
// the command into a buffer of 1000 (MAX_COMMAND) and refuses one that fills it ("command
// too long"). The field runs from the first non-blank byte after the schedule (in a
// system file: from the byte after the one blank that ends the user name) to the newline,
// not counted; trailing blanks count.
const MaxCommand = 998

// maxEnvLine is the longest env line, from its first non-blank byte, that Debian's cron
// reads whole: it keeps that much, and a longer line loses its end before it is parsed
// (a quoted value then has no closing quote and the line is refused).
const maxEnvLine = 998

// maxLines is the most lines crontab(1) and Debian's daemon take in one crontab
// (CVE-2019-9705): beyond it the whole file is refused.
const maxLines = 10000

// refusesFile ends each finding about a line cron refuses.
const refusesFile = "cron refuses it and then ignores the whole file, every job in it"

// debianEnv runs Debian's load_env state machine on s, a line from its first non-blank
// byte. ok says cron takes it as NAME=value; when not, tried says the line looked like
// one (a quote opened, or an = was reached), and why says what went wrong in words.
func debianEnv(s string) (ok, tried bool, why string) {
	if len(s) > maxEnvLine {
		s = s[:maxEnvLine]
	}
	const (
		nameI = iota
		name
		eq1
		eq2
		valueI
		value
		fini
		bad
	)
	state, quote := nameI, byte(0)
	nameQuoted := false
	for i := 0; state != bad && i < len(s); {
		c := s[i]
		switch state {
		case nameI, valueI:
			if c == '\'' || c == '"' {
				quote = c
				nameQuoted = nameQuoted || state == nameI
				i++
			}
			state++
			continue
		case name, value:
			if quote != 0 {
				if c == quote {
					state++
					i++
					continue
				}
				if state == name && c == '=' {
					state = bad
					continue
				}
			} else if state == name {
				if isSpace(c) {
					i++
					state++
					continue
				}
				if c == '=' {
					state++
					continue
				}
			}
			i++
		case eq1:
			if c == '=' {
				state++
				quote = 0
				tried = true
			} else if !isSpace(c) {
				state = bad
			}
			i++
		case eq2, fini:
			if isSpace(c) {
				i++
			} else {
				if state == fini {
					why = fmt.Sprintf("text after the closing %c of the value (%q)", quote, strings.TrimSpace(s[i:]))
					if c == '#' {
						why += ": a # after the value starts no comment"
					}
				}
				state++
			}
		}
	}
	switch {
	case state == fini || state == value && quote == 0:
		return true, true, ""
	case state == eq2:
		return false, true, "nothing after the =: Debian 12's cron reads no empty value without quotes; write " + strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "=")) + `=""`
	case state == value || state == name && quote != 0:
		return false, true, fmt.Sprintf("the %c that opens the %s is never closed", quote, map[bool]string{true: "value", false: "name"}[state == value])
	case state == bad && nameQuoted && quote != 0 && !tried:
		return false, true, "a quoted name holds an ="
	case why != "":
		return false, true, why
	}
	return false, tried || nameQuoted, "neither NAME=value nor a schedule with a command"
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// Month and day names as entry.c matches them (strcasecmp); Sunday is 0 and 7.
var (
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dowNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"}
)

// fieldReader walks a line as entry.c's get_char does; eof stands for C's EOF.
type fieldReader struct {
	s string
	i int
}

const eof = -1

func (r *fieldReader) next() int {
	if r.i >= len(r.s) {
		r.i++
		return eof
	}
	c := r.s[r.i]
	r.i++
	return int(c)
}

func isAlnum(c int) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// number is get_number: a run of letters and digits, a name of names (offset by low)
// or all digits (read as glibc's atoi reads them: strtol, saturated, then cut to an int).
func (r *fieldReader) number(low int, names []string, c int) (int, int) {
	var b strings.Builder
	digits := true
	for isAlnum(c) {
		if b.Len()+1 >= 1000 {
			return 0, eof
		}
		b.WriteByte(byte(c))
		digits = digits && '0' <= c && c <= '9'
		c = r.next()
	}
	w := b.String()
	if w == "" {
		return 0, eof
	}
	for i, n := range names {
		if strings.EqualFold(n, w) {
			return i + low, c
		}
	}
	if !digits {
		return 0, eof
	}
	var v uint64
	for i := 0; i < len(w); i++ {
		if v > (1<<63-1-9)/10 {
			v = 1<<63 - 1
			break
		}
		v = v*10 + uint64(w[i]-'0')
	}
	return int(int32(int64(v))), c
}

// rangeOf is get_range: *, N or N-M, maybe /STEP, within low..high.
func (r *fieldReader) rangeOf(low, high int, names []string, c int) int {
	var n1, n2 int
	if c == '*' {
		n1, n2 = low, high
		if c = r.next(); c == eof {
			return eof
		}
	} else {
		if n1, c = r.number(low, names, c); c == eof {
			return eof
		}
		if c != '-' {
			if c == '/' || n1 < low || n1 > high {
				return eof
			}
			return c
		}
		if c = r.next(); c == eof {
			return eof
		}
		if n2, c = r.number(low, names, c); c == eof {
			return eof
		}
	}
	if c == '/' {
		if c = r.next(); c == eof {
			return eof
		}
		var step int
		if step, c = r.number(0, nil, c); c == eof || step <= 0 {
			return eof
		}
	}
	if n1 < low || n1 > high || n2 < low || n2 > high {
		return eof
	}
	return c
}

// list is get_list: ranges joined by commas, then whatever follows up to a blank
// (skipped unread, as cron skips it), then the blanks.
func (r *fieldReader) list(low, high int, names []string, c int) int {
	for {
		c = r.rangeOf(low, high, names, c)
		if c != ',' {
			break
		}
		c = r.next()
	}
	for c != '\t' && c != ' ' && c != '\n' && c != eof {
		c = r.next()
	}
	for c == '\t' || c == ' ' {
		c = r.next()
	}
	return c
}

// debianEntry runs Debian's load_entry on s, a job line from its first non-blank byte,
// and returns cron's own word for what it refuses ("bad minute") and a hint, or "".
// userExists, when not nil, checks a system file's user field as getpwnam does.
func debianEntry(s string, system bool, userExists func(string) bool) string {
	r := &fieldReader{s: s + "\n"}
	c := r.next()
	if c == '@' {
		w, _, _ := strings.Cut(strings.TrimPrefix(s, "@"), " ")
		w, _, _ = strings.Cut(w, "\t")
		switch w {
		case "reboot", "yearly", "annually", "monthly", "weekly", "daily", "midnight", "hourly":
		default:
			if why := descriptorCase("@" + w); why != "" {
				return why
			}
			return fmt.Sprintf(`"bad time specifier": @%s is none of @reboot @yearly @annually @monthly @weekly @daily @midnight @hourly`, w)
		}
		r.i = 1 + len(w)
		c = r.next()
		for c == '\t' || c == ' ' {
			c = r.next()
		}
	} else {
		for _, f := range []struct {
			low, high int
			names     []string
			what      string
		}{{0, 59, nil, "minute"}, {0, 23, nil, "hour"}, {1, 31, nil, "day-of-month"}, {1, 12, monthNames, "month"}, {0, 7, dowNames, "day-of-week"}} {
			start := r.i - 1
			if c = r.list(f.low, f.high, f.names, c); c == eof {
				field, _, _ := strings.Cut(strings.TrimLeft(r.s[min(start, len(r.s)):], " \t"), " ")
				field, _, _ = strings.Cut(strings.TrimSpace(field), "\t")
				if field == "" {
					return fmt.Sprintf("%q: the line ends before its %s field", "bad "+f.what, f.what)
				}
				return fmt.Sprintf("%q: cron cannot read %q as a %s", "bad "+f.what, field, f.what)
			}
		}
	}
	rest := r.s[r.i-1 : len(r.s)-1] // from the first byte after the schedule's blanks
	if system {
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			return `"bad username": no blank after the user field, so cron reads the next line into the user name`
		}
		if u := rest[:i]; userExists != nil && !userExists(u) {
			return fmt.Sprintf("%q: there is no user %q on this machine", "bad username", u)
		}
		rest = rest[i+1:]
	} else if strings.HasPrefix(rest, "*") {
		return `"bad command": the command starts with * (a sixth schedule field? cron takes 5 and no seconds)`
	}
	if len(rest) > MaxCommand {
		return fmt.Sprintf(`"command too long": the command is %d bytes, Debian's cron takes at most %d`, len(rest), MaxCommand)
	}
	return ""
}

// DebianRefusal says why Debian's cron refuses line l, or "": an env line its
// load_env does not take that is no job line either, a job line its load_entry
// refuses (bad fields or descriptor, a command over MaxCommand bytes, a system line
// without a user), a last line without a newline, a line past the 10000th. When the
// daemon refuses one line it ignores the whole file.
func DebianRefusal(l *Line, system bool, userExists func(string) bool) string {
	if l.Num == maxLines+1 {
		return fmt.Sprintf(`"crontab is too long": cron takes at most %d lines`, maxLines)
	}
	s := strings.TrimLeft(l.Text, " \t")
	if s == "" || s[0] == '#' {
		return ""
	}
	if l.NoEOL {
		return `"missing newline before EOF": the last line has no newline`
	}
	ok, tried, why := debianEnv(s)
	if ok {
		return ""
	}
	if c := s[0]; tried && !(c == '@' || c == '*' || '0' <= c && c <= '9') {
		return why
	}
	return debianEntry(s, system, userExists)
}

// envCut says what cron does to an env line it takes but cuts short, or "".
func envCut(l *Line) string {
	s := strings.TrimLeft(l.Text, " \t")
	if len(s) <= maxEnvLine {
		return ""
	}
	return fmt.Sprintf("the line is %d bytes from its first non-blank: Debian's cron keeps the first %d and drops the rest of the value", len(s), maxEnvLine)
}
