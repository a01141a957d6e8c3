package tty

import (
	"os/exec"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// commandCases are argvs and how Command shows them.
var commandCases = []struct {
	argv []string
	want string
}{
	{nil, ""},
	{[]string{"/opt/jobs/billing.sh", "--all"}, "/opt/jobs/billing.sh --all"},
	{[]string{"date", "+%Y-%m-%d", "--since=2d", "a,b:c@d"}, "date +%Y-%m-%d --since=2d a,b:c@d"},
	{[]string{"café", "naïve"}, "café naïve"},
	{[]string{"echo", ""}, "echo ''"},
	{[]string{"echo", "a b"}, "echo 'a b'"},
	{[]string{"sh", "-c", `echo "$HOME"`}, `sh -c 'echo "$HOME"'`},
	{[]string{"echo", "`id`", `a\b`, "$(id)", "!!", "~", "*.log", "x;y", "a|b", "#c"},
		"echo '`id`' 'a\\b' '$(id)' '!!' '~' '*.log' 'x;y' 'a|b' '#c'"},
	{[]string{"echo", "it's"}, `echo 'it'\''s'`},
	{[]string{"echo", "'"}, `echo \'`},
	{[]string{"echo", "''x''"}, `echo \'\''x'\'\'`},
	{[]string{"echo", "=x", "^x", "{a,b}"}, "echo '=x' '^x' '{a,b}'"},
	// Control characters and bytes that are not UTF-8, in $'...'.
	{[]string{"printf", "a\nb"}, `printf 'a'$'\n''b'`},
	{[]string{"printf", "\t"}, `printf $'\t'`},
	{[]string{"printf", "\x1b]0;pwned\a"}, `printf $'\x1b'']0;pwned'$'\x07'`},
	{[]string{"x", "\r\x01\x7f"}, `x $'\r\x01\x7f'`}, // no argument holds a NUL
	{[]string{"x", "\xff\xfe ok"}, `x $'\xff\xfe'' ok'`},
	{[]string{"x", "\u009b2J", "\x9b2J"}, `x $'\xc2\x9b''2J' $'\x9b''2J'`},
	{[]string{"x", "rtl\u202eevil", "nb\u00a0sp"}, `x 'rtl'$'\xe2\x80\xae''evil' 'nb'$'\xc2\xa0''sp'`},
	{[]string{"x", "it's\n"}, `x 'it'\''s'$'\n'`},
	// The first word: keywords, assignments and job specs are quoted there only.
	{[]string{"time", "ls", "time"}, "'time' ls time"},
	{[]string{"!", "x"}, "'!' x"},
	{[]string{"A=1", "a=1"}, "'A=1' a=1"},
	{[]string{"%1", "%1"}, "'%1' %1"},
	{[]string{"a b", "c"}, "'a b' c"},
}

func TestCommand(t *testing.T) {
	for _, c := range commandCases {
		if got := Command(c.argv); got != c.want {
			t.Errorf("Command(%q) = %s, want %s", c.argv, got, c.want)
		}
	}
}

// TestCommandInShells pastes each shown command into real shells and checks that they
// see the argv that was shown: bash for all, dash (a plain POSIX sh without $'...') for
// those without $'.
func TestCommandInShells(t *testing.T) {
	var argvs [][]string
	for _, c := range commandCases {
		if len(c.argv) > 0 {
			argvs = append(argvs, c.argv)
		}
	}
	argvs = append(argvs, []string{"every byte", allBytes()})
	for _, shell := range []string{"bash", "dash"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("no %s: %v", shell, err)
			continue
		}
		for _, argv := range argvs {
			line := Command(argv)
			if shell == "dash" && strings.Contains(line, "$'") {
				continue
			}
			// printf in front: the shown words are then arguments, run by no one.
			out, err := exec.Command(path, "-c", `printf '%s\0' `+line).Output()
			if err != nil {
				t.Errorf("%s -c %q: %v", shell, line, err)
				continue
			}
			if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !equal(got, argv) {
				t.Errorf("%s read %s as %q, want %q", shell, line, got, argv)
			}
		}
	}
}

// allBytes is every byte but NUL (which no argument can hold).
func allBytes() string {
	var b []byte
	for c := 1; c < 256; c++ {
		b = append(b, byte(c))
	}
	return string(b)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzCommand: whatever the words, Command's line is printable UTF-8 on one line, and
// argvs of printable words show just as Escape leaves them when they need no quotes.
func FuzzCommand(f *testing.F) {
	for _, c := range commandCases {
		f.Add(strings.Join(c.argv, "\x00"))
	}
	f.Fuzz(func(t *testing.T, joined string) {
		argv := strings.Split(joined, "\x00")
		line := Command(argv)
		if !utf8.ValidString(line) {
			t.Fatalf("Command(%q) = %q: invalid UTF-8", argv, line)
		}
		for i, r := range line {
			if r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("Command(%q) = %q: %U at byte %d", argv, line, r, i)
			}
		}
		if Escape(line) != line {
			t.Fatalf("Command(%q) = %q, which Escape changes", argv, line)
		}
	})
}
