package crontab

import (
	"fmt"
	"path"
	"strings"
)

// A job that starts a service or leaves work running in the background cannot go under
// cronlock: when the line's shell exits, cronlock stops every process the job left
// behind (so that none outlives the lock), and the daemon it started dies with it while
// the run says succeeded. background finds such lines by their shape; it reads the shell
// text well enough for crontab lines (quotes, escapes, operators, redirections,
// comments), but not what a script the line calls does.

// shellToken is a word or an operator of a shell command line.
type shellToken struct {
	text string
	op   bool // ; & && | || ( ) newline, or a redirection (> >> 2>&1 &> <...)
}

// redirection reports whether an operator token is a redirection.
func (t shellToken) redirection() bool {
	return t.op && strings.ContainsAny(t.text, "<>")
}

// shellTokens splits a command line into words (quotes removed) and operators. A # at
// the start of a word begins a comment, which ends the line.
func shellTokens(s string) []shellToken {
	var out []shellToken
	var b strings.Builder
	in := false
	flush := func() {
		if in {
			out = append(out, shellToken{text: b.String()})
			b.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !in:
			return out
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			in = true
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				end = len(s) - i - 1
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			in = true
		case c == '<' || c == '>' || c == '&' && i+1 < len(s) && s[i+1] == '>':
			// A redirection: an all-digit word just before it is its file descriptor.
			if in && strings.Trim(b.String(), "0123456789") == "" {
				b.Reset()
				in = false
			}
			flush()
			j := i + 1
			if c == '&' {
				j++ // &>
			}
			if j < len(s) && strings.IndexByte("<>|", s[j]) >= 0 {
				j++ // >> << >| <>
			}
			if j < len(s) && s[j] == '&' {
				for j++; j < len(s) && strings.IndexByte("-0123456789", s[j]) >= 0; j++ {
				}
			}
			out = append(out, shellToken{text: s[i:j], op: true})
			i = j - 1
		case strings.IndexByte(";&|()\n", c) >= 0:
			flush()
			j := i + 1
			if j < len(s) && (s[j] == c && c != '(' && c != ')' || c == '|' && s[j] == '&') {
				j++
			}
			out = append(out, shellToken{text: s[i:j], op: true})
			i = j - 1
		default:
			b.WriteByte(c)
			in = true
		}
	}
	flush()
	return out
}

// skipWords lead a simple command without being its program: shell keywords and
// wrappers that run the rest of the line as the command.
var skipWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "do": true, "while": true, "until": true,
	"!": true, "{": true, "}": true, "time": true, "exec": true, "command": true, "nice": true,
	"ionice": true, "sudo": true, "env": true, "chronic": true,
}

// serviceActions start (or restart) a service.
var serviceActions = map[string]bool{
	"start": true, "restart": true, "reload": true, "force-reload": true, "try-restart": true,
	"reload-or-restart": true, "try-reload-or-restart": true, "condrestart": true,
}

// background returns what in a command starts a service or leaves a process running
// after the line's shell exits, as the user would recognise it, or "".
func background(cmd string) string {
	check := func(words []string) string {
		i := 0
		for i < len(words) && (skipWords[words[i]] || isAssignment(words[i]) || i > 0 && skipWords[words[i-1]] && strings.HasPrefix(words[i], "-")) {
			i++
		}
		if i >= len(words) {
			return ""
		}
		prog, args := path.Base(words[i]), words[i+1:]
		line := strings.Join(words[i:], " ")
		switch prog {
		case "nohup", "setsid", "daemon", "daemonize", "start-stop-daemon", "disown":
			return "`" + line + "`"
		case "screen":
			d, m := false, false
			for _, a := range args {
				if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
					d = d || strings.ContainsAny(a, "dD")
					m = m || strings.Contains(a, "m")
				}
			}
			if d && m {
				return "`" + line + "`"
			}
		case "tmux":
			n, d := false, false
			for _, a := range args {
				n = n || a == "new" || a == "new-session" || a == "new-window"
				d = d || a == "-d"
			}
			if n && d {
				return "`" + line + "`"
			}
		case "invoke-rc.d", "service":
			if len(args) >= 2 && serviceActions[args[1]] {
				return "`" + line + "`"
			}
		case "systemctl":
			for _, a := range args {
				if !strings.HasPrefix(a, "-") {
					if serviceActions[a] {
						return "`" + line + "`"
					}
					break
				}
			}
		}
		if dir := path.Dir(words[i]); (dir == "/etc/init.d" || dir == "/etc/rc.d/init.d") && len(args) >= 1 && serviceActions[args[0]] {
			return "`" + line + "`"
		}
		return ""
	}
	what := ""
	simpleCommands(cmd, func(words []string, op string) bool {
		if what = check(words); what == "" && op == "&" {
			what = "a command put in the background with &"
		}
		return what != ""
	})
	return what
}

// simpleCommands calls each with the words of every simple command of a shell command
// line (redirections and their files left out) and the operator that ends it ("" for
// the last), until each returns true; it reports whether one did.
func simpleCommands(cmd string, each func(words []string, op string) bool) bool {
	var words []string
	target := false // the next word is a redirection's file
	for _, t := range shellTokens(cmd) {
		switch {
		case t.redirection():
			target = true
		case t.op:
			if each(words, t.text) {
				return true
			}
			words = words[:0]
		case target:
			target = false
		default:
			words = append(words, t.text)
		}
	}
	return each(words, "")
}

// runsCronlock reports whether one of the simple commands of a shell command line runs
// `cronlock run`: as its program, or after words that lead a command without being its
// program (env, nice, exec, sudo, NAME=value… with their options and values: `nice -n
// 10`, `sudo -u app`), the words background skips.
func runsCronlock(cmd string) bool {
	return simpleCommands(cmd, func(words []string, _ string) bool {
		for i := 0; i+1 < len(words); i++ {
			if path.Base(words[i]) == "cronlock" && words[i+1] == "run" {
				return true
			}
			if i == 0 && !skipWords[words[0]] && !isAssignment(words[0]) {
				return false // a program of its own: cronlock is its argument
			}
		}
		return false
	})
}

// isAssignment reports whether a word is NAME=value before a command.
func isAssignment(w string) bool {
	i := strings.IndexByte(w, '=')
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := w[j]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || j > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// backgroundNote is wrap's and lint's word on a line that starts something that must
// outlive it.
func backgroundNote(what string) string {
	return fmt.Sprintf("starts a service or leaves work in the background (%s): under cronlock the leftover-process cleanup would stop it as soon as the line's shell exits", what)
}

// innerCommand returns the command a wrapped line runs: LINE of `cronlock run … --
// SHELL -c 'LINE'`, or what follows -- when it is no shell (`-- php x.php`), and
// whether it found one.
func innerCommand(l *Line) (string, bool) {
	cmd, _ := CronCommand(l.Command)
	args, err := shellWordsOf(cmd)
	if err != nil {
		return "", false
	}
	for i, a := range args {
		if a != "--" {
			continue
		}
		rest := args[i+1:]
		if len(rest) >= 3 && rest[1] == "-c" && (path.Base(rest[0]) == "sh" || strings.HasSuffix(path.Base(rest[0]), "sh")) {
			return rest[2], true
		}
		if len(rest) > 0 {
			return quoteAll(rest), true
		}
		return "", false
	}
	return "", false
}

// quoteAll joins words back into one command line.
func quoteAll(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = quote(w)
	}
	return strings.Join(q, " ")
}
