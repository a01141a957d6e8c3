package crontab

import (
	"fmt"
	"strings"
	"time"

	"cronlock/schedule"
)

// A Finding is one pitfall lint found on a line.
type Finding struct {
	Line int
	Msg  string
}

// shellWords are builtins and keywords a command may start with: no PATH lookup.
var shellWords = map[string]bool{
	"cd": true, "test": true, "[": true, "[[": true, "command": true, "exec": true,
	"true": true, "false": true, "echo": true, "printf": true, "export": true, "set": true,
	"unset": true, "read": true, "eval": true, "if": true, "for": true, "while": true,
	"until": true, "case": true, "{": true, "(": true, "!": true, ":": true, ".": true,
	"umask": true, "ulimit": true, "trap": true, "wait": true, "exit": true, "time": true,
}

// Lint returns the pitfalls of a crontab: each line Debian's cron refuses, for which it
// ignores the whole file (o.CronTZ false: the daemon is Debian's), what wrap would change
// or had to leave alone (unescaped %, a sixth field, a schedule cronlock cannot read,
// background work, a wrapped command too long), relative commands with no PATH= line in
// force (inside wrapped lines too), wrapped lines whose --schedule is not the line's
// schedule or that leave work in the background, CRON_TZ= lines a daemon that ignores
// them would not honour, env lines cron cuts, and a MAILTO cron will not mail. run-parts
// lines are not findings: wrap leaves them on purpose.
func Lint(lines []Line, o Options) []Finding {
	lines = ownWrapped(lines, o)
	var fs []Finding
	add := func(l *Line, format string, args ...any) {
		fs = append(fs, Finding{l.Num, fmt.Sprintf(format, args...)})
	}
	for i := range lines {
		l := &lines[i]
		if r := refused(l, o); r != "" {
			add(l, "%s", r)
			continue
		}
		switch l.Kind {
		case Invalid:
			add(l, "cron cannot read this line: it is neither a comment, NAME=value nor a schedule with a command")
			continue
		case Env:
			if l.Name == "CRON_TZ" && !o.CronTZ {
				add(l, "CRON_TZ= is ignored by Debian's cron: the jobs below fire in the daemon's zone (/etc/localtime); cronie honours it")
			}
			if why := envCut(l); why != "" && !o.CronTZ {
				add(l, "%s", why)
			}
			if (l.Name == "MAILTO" || l.Name == "MAILFROM") && !safeMail(l.Value) {
				add(l, "%s=%s: cron sends no mail to an address with other bytes than letters, digits and @!:%%-.,_+=/ (not first), such as a blank after a comma; newer Debian's crontab(1) refuses it", l.Name, l.Value)
			}
			continue
		case Job:
			text, why := wrapLine(l, o)
			switch {
			case why != "" && !strings.HasPrefix(why, "run-parts"):
				// The line is not what it seems: a guess at its command would mislead.
				add(l, "%s", strings.TrimSuffix(why, leftAlone))
				continue
			case why == "" && text != l.Text:
				add(l, "not under cronlock: `cronlock crontab wrap` would put it in front")
			}
		case Wrapped, Reboot:
			if why := descriptorCase(l.Schedule); why != "" {
				add(l, "%s: %s", why, refusesFile)
			}
			if inner, ok := innerCommand(l); ok && l.Kind == Wrapped && background(inner) != "" {
				add(l, "%s: put the line back as it was, unwrapped", backgroundNote(background(inner)))
			}
			if _, pct := CronCommand(l.Command); pct {
				add(l, "unescaped %% (cron turns it into a newline and feeds the rest to the job's stdin): write \\%% for a literal %%")
			}
		default:
			continue
		}
		if w := relativeCommand(l); w != "" && (o.InCronPath == nil || !o.InCronPath(w)) {
			add(l, "relative command %q and no PATH= line above it: cron runs jobs with PATH=/usr/bin:/bin; write its absolute path or add a PATH= line", w)
		}
		if l.Kind == Wrapped {
			if msg := scheduleMismatch(l, o); msg != "" {
				add(l, "%s", msg)
			}
		}
	}
	return fs
}

// relativeCommand returns the first word of l's command when the shell looks it up in
// PATH and no PATH= line is in force; else "". Only the first command of the line is
// looked at.
func relativeCommand(l *Line) string {
	if _, ok := l.Getenv("PATH"); ok {
		return ""
	}
	cmd, _ := CronCommand(l.Command)
	w := firstRelative(cmd)
	if w == "" && l.Kind == Wrapped {
		// cronlock runs the line's command with cron's PATH too: look inside
		// `SHELL -c 'LINE'` (or at what follows --).
		if inner, ok := innerCommand(l); ok {
			w = firstRelative(inner)
		}
	}
	return w
}

// firstRelative returns the first command word of a shell command line when the shell
// looks it up in PATH, else "".
func firstRelative(cmd string) string {
	for _, w := range strings.Fields(cmd) {
		if i := strings.IndexByte(w, '='); i > 0 && !strings.ContainsAny(w[:i], "/'\"$") {
			continue // an assignment before the command
		}
		if strings.Contains(w, "/") || shellWords[w] || strings.ContainsAny(w[:1], "$'\"`(") {
			return ""
		}
		return w
	}
	return ""
}

// scheduleMismatch compares the --schedule of a wrapped line with its crontab schedule,
// each in the zone it is read in: the line's where cron fires it (a CRON_TZ= line the
// daemon honours, else the daemon's /etc/localtime), the --schedule's where cronlock run
// reads it (a CRON_TZ= prefix, else --tz, else CRONLOCK_TZ from a line of the crontab or
// from the settings, else /etc/localtime). A mismatch names both zones and where each
// came from: two schedules that read alike and differ only by zone are the case a bare
// "is not the line's schedule" leaves a person staring at.
func scheduleMismatch(l *Line, o Options) string {
	got, gotZone, gotFrom, have := runSchedule(l, o)
	if !have {
		return ""
	}
	want, daemonZone, wantFrom := cronSchedule(l, o)
	ws, werr := schedule.Parse(want, daemonZone)
	gs, gerr := schedule.Parse(got, gotZone)
	if werr != nil || gerr != nil {
		if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(want), " ") {
			return fmt.Sprintf("--schedule %q is not the line's schedule %q", got, want)
		}
		return ""
	}
	sameExpr, sameTZ := ws.String() == gs.String(), sameZone(ws.Location(), gs.Location())
	switch {
	case sameExpr && sameTZ:
		return ""
	case sameTZ:
		return fmt.Sprintf("--schedule %q is not the line's schedule %q: cronlock would count ticks cron never fires", got, want)
	case sameExpr:
		return fmt.Sprintf("--schedule %q is read in %s (%s) but cron fires the line in %s (%s): cronlock would count ticks cron never fires, give both the same zone",
			got, gs.Zone(), gotFrom, ws.Zone(), wantFrom)
	}
	return fmt.Sprintf("--schedule %q in %s (%s) is not the line's schedule %q in %s (%s): cronlock would count ticks cron never fires",
		got, gs.Zone(), gotFrom, want, ws.Zone(), wantFrom)
}

// runSchedule returns the --schedule of a wrapped line's `cronlock run` and the zone
// cronlock run reads it in, with where that zone came from (a CRON_TZ= prefix in got
// overrides it, as in schedule.Parse); have is false when the line has no --schedule.
func runSchedule(l *Line, o Options) (got, gotZone, gotFrom string, have bool) {
	cmd, _ := CronCommand(l.Command)
	args, err := shellWordsOf(cmd)
	if err != nil || len(args) < 2 || args[1] != "run" {
		return "", "", "", false
	}
	var tz string
	for i := 2; i < len(args) && args[i] != "--"; i++ {
		a := args[i]
		switch {
		case a == "--schedule" && i+1 < len(args):
			got, have = args[i+1], true
			i++
		case strings.HasPrefix(a, "--schedule="):
			got, have = a[len("--schedule="):], true
		case a == "--tz" && i+1 < len(args):
			tz = args[i+1]
			i++
		case strings.HasPrefix(a, "--tz="):
			tz = a[len("--tz="):]
		}
	}
	if !have {
		return "", "", "", false
	}
	gotZone, gotFrom = orUTC(o.DaemonZone), "cronlock's default, /etc/localtime"
	switch z, ok := l.Getenv("CRONLOCK_TZ"); {
	case tz != "":
		gotZone, gotFrom = tz, "its --tz"
	case ok && z != "":
		gotZone, gotFrom = z, "the crontab's CRONLOCK_TZ= line"
	case o.RunZone != "":
		gotZone, gotFrom = o.RunZone, o.RunZoneFrom
	}
	if hasCronTZPrefix(got) {
		gotFrom = "its CRON_TZ= prefix"
	}
	return got, gotZone, gotFrom, true
}

// cronSchedule returns a job line's schedule as the cron daemon reads it: its fields,
// with a CRON_TZ= prefix when a CRON_TZ= line the daemon honours is in force, the
// daemon's own zone, and where the zone came from.
func cronSchedule(l *Line, o Options) (want, daemonZone, wantFrom string) {
	daemonZone = orUTC(o.DaemonZone)
	want, wantFrom = l.Schedule, "the cron daemon's zone, /etc/localtime"
	if z, ok := l.Getenv("CRON_TZ"); ok && z != "" && o.CronTZ {
		want, wantFrom = "CRON_TZ="+z+" "+want, "its CRON_TZ= line"
	}
	return want, daemonZone, wantFrom
}

func orUTC(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// hasCronTZPrefix reports whether a --schedule starts with CRON_TZ= (in any case, as
// schedule.Parse reads it).
func hasCronTZPrefix(s string) bool {
	s = strings.TrimLeft(s, " \t")
	return len(s) >= 8 && strings.EqualFold(s[:8], "CRON_TZ=")
}

// sameZone reports whether two zones give every instant from 1970 to 2100 the same UTC
// offset, whatever their names (UTC and Etc/UTC, US/Eastern and America/New_York): only
// the offset decides when cron fires. It walks the zones' transitions, a few hundred
// steps. Past a zone file's last transition Go computes the rule a year at a time, and
// ZoneBounds can then answer an end that is not after the instant asked about (late
// December): the walk steps a day there, where no zone changes its offset.
func sameZone(a, b *time.Location) bool {
	if a.String() == b.String() {
		return true
	}
	t, end := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for t.Before(end) {
		ta, tb := t.In(a), t.In(b)
		_, oa := ta.Zone()
		_, ob := tb.Zone()
		if oa != ob {
			return false
		}
		_, ea := ta.ZoneBounds()
		_, eb := tb.ZoneBounds()
		next := ea
		if next.IsZero() || !eb.IsZero() && eb.Before(next) {
			next = eb
		}
		switch {
		case next.IsZero():
			return true // neither zone changes again
		case !next.After(t):
			next = t.Add(24 * time.Hour)
		}
		t = next
	}
	return true
}

// shellWordsOf splits a simple command line into words as a POSIX shell does for
// quotes and backslashes; expansions and operators are kept as text. It is enough to
// read back the arguments wrap writes, and ones people write by hand.
func shellWordsOf(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
			continue
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed '")
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unclosed \"")
			}
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
		in = true
	}
	if in {
		out = append(out, b.String())
	}
	return out, nil
}

// safeMail is Debian cron's safe_p: the MAILTO (and MAILFROM) it hands to sendmail
// holds only letters and digits, and after the first byte @!:%-.,_+=/ too; else it
// logs "UNSAFE MAIL" and mails nothing. An empty value asks for no mail.
func safeMail(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(isAlnum(int(c)) || i > 0 && strings.IndexByte("@!:%-.,_+=/", c) >= 0) {
			return false
		}
	}
	return true
}
