package tty

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Command shows argv as one line for people: safe to print on a terminal, and, pasted
// into a shell, a command line that runs exactly the argv that ran. It is how every
// command is shown (history, history show, cronlock's messages); --json keeps the argv
// array instead.
//
// A word made only of characters no shell treats specially is shown as it is
// (/opt/jobs/billing.sh, --since=2d, +%F). Any other printable text is put in POSIX
// single quotes, inside which nothing expands ($HOME, `x`, \, " and ! stay as they are);
// a single quote inside is closed, escaped and reopened, and the empty word is a pair of
// quotes:
//
//	sh -c 'echo "$HOME"'
//	echo 'it'\''s' ''
//
// Non-printing characters (control bytes such as ESC, newline and tab, DEL, C1 controls,
// other non-printing runes such as U+202E) and bytes that are not UTF-8 never reach the
// output raw: a terminal would act on them, and a newline would break a table row. They
// are written byte by byte in $'...' quotes: \n, \t, \r, else \xHH (ESC is $'\x1b').
// POSIX sh before POSIX.1-2024 has no way to write such a byte inside one line, so only
// such words need a shell that knows $'...' (bash, zsh, ksh, mksh, busybox sh, FreeBSD sh;
// not dash): a word shown without $' means the same in every POSIX shell. Bytes are
// written, not \u escapes, so that the word is exact whatever the shell's locale.
//
// Command quotes the first word also where it is a shell keyword (if, time, !) or could be
// read as an assignment (A=1 cmd) or a job (%1): pasted bare, each would run something
// else. Aliases, functions and builtins of the reader's shell are not guarded against.
func Command(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeWord(&b, a, i == 0)
	}
	return b.String()
}

// keywords are the words a shell reads specially in a command's place (POSIX reserved
// words, and bash's and zsh's own): as the first word they are quoted.
var keywords = map[string]bool{
	"!": true, "{": true, "}": true, "case": true, "do": true, "done": true, "elif": true,
	"else": true, "esac": true, "fi": true, "for": true, "if": true, "in": true, "then": true,
	"until": true, "while": true, "[[": true, "]]": true, "function": true, "select": true,
	"time": true, "coproc": true, "repeat": true, "foreach": true, "end": true, "nocorrect": true,
	"noglob": true,
}

func writeWord(b *strings.Builder, s string, first bool) {
	if s == "" {
		b.WriteString("''")
		return
	}
	if !hasNonPrinting(s) {
		if isBare(s, first) {
			b.WriteString(s)
		} else {
			writeSingleQuoted(b, s)
		}
		return
	}
	// A word with non-printing characters: its printable runs single-quoted (even plain
	// ones: 'a'$'\n''b' reads more plainly than a$'\n'b), the rest in $'...'.
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if !printing(r, size) {
				break
			}
			n += size
		}
		if n > 0 {
			writeSingleQuoted(b, s[:n])
			s = s[n:]
			continue
		}
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if printing(r, size) {
				break
			}
			n += size
		}
		writeDollarQuoted(b, s[:n])
		s = s[n:]
	}
}

// printing reports whether the rune r, size bytes long, may be printed as it is: what
// Escape leaves alone.
func printing(r rune, size int) bool {
	if r == utf8.RuneError && size <= 1 {
		return false
	}
	return r == ' ' || unicode.IsPrint(r)
}

func hasNonPrinting(s string) bool {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if !printing(r, size) {
			return true
		}
		s = s[size:]
	}
	return false
}

// isBare reports whether s (printable, not empty) means itself to every shell unquoted.
// Non-ASCII letters and symbols are plain text to a shell; every ASCII character that is
// not a letter or digit is special somewhere (globs, expansions, zsh's ^ and =word) except
// these. = may not start a word (zsh's =cmd), and the first word may hold neither =
// (an assignment) nor % (bash's %1 resumes job 1); keywords are quoted in first place.
func isBare(s string, first bool) bool {
	if first && keywords[s] {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf,
			'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("_-./,:@+", c) >= 0:
		case c == '=' && i > 0 && !first, c == '%' && !first:
		default:
			return false
		}
	}
	return true
}

// writeSingleQuoted writes s in single quotes, a single quote inside as \' between two
// quoted parts: it's → 'it'\”s'.
func writeSingleQuoted(b *strings.Builder, s string) {
	for i, part := range strings.Split(s, "'") {
		if i > 0 {
			b.WriteString(`\'`)
		}
		if part != "" {
			b.WriteByte('\'')
			b.WriteString(part)
			b.WriteByte('\'')
		}
	}
}

// writeDollarQuoted writes s, which has no printing character, in $'...', byte by byte.
func writeDollarQuoted(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	b.WriteByte('\'')
}
