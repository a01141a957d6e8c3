package settings

// Fuzz target for the config file's grammar. Without -fuzz it runs its seeds as an
// ordinary, fast test.
//
//	go test -run '^$' -fuzz '^FuzzConfigFile$' -fuzztime 60s ./settings/

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// printable reports whether s is valid UTF-8 made only of printable runes and spaces.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// fixedConfigText is the text of readFile's messages, whatever the file says.
const fixedConfigText = "config file line : want NAME=value with NAME one of read config file bufio.Scanner: token too long unknown setting (did you mean ?); the settings are " +
	"CRONLOCK_TTL, CRONLOCK_BACKEND, CRONLOCK_REDIS_URL, CRONLOCK_REDIS_PASSWORD_FILE, CRONLOCK_REDIS_TIMEOUT, " +
	"CRONLOCK_PREFIX, CRONLOCK_HISTORY, CRONLOCK_NODE, CRONLOCK_LOCK_DIR " +
	"drop the word export: this file is read by cronlock, not by a shell, and is not a script (write NAME=value) " +
	"the value of opens a quote (\"') that the line does not close; close it, or drop it " +
	"goes on after its closing quote; quote the whole value (quotes are not escaped or nested) " +
	"a comment must have a line of its own; move it above " +
	"a # after a blank starts no comment here (it would be part of the value); move the comment to a line of its own, or quote the value " +
	"is set again (first on line ); keep one of the two lines"

// FuzzConfigFile: any file either loads, with only known names and one-line values that
// write back (quoted) to the same settings, or is refused with a message that quotes no
// value (a Redis URL may hold a password) and holds no control byte.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"CRONLOCK_REDIS_URL=redis://127.0.0.1:6379/0\n",
		"# fleet settings\n\nexport CRONLOCK_TTL=90s\nCRONLOCK_NODE = \"web 1\" \n",
		"CRONLOCK_PREFIX='job:'\r\nCRONLOCK_BACKEND=redis\r\n",
		"CRONLOCK_TTL=\"\n", "CRONLOCK_TTL='\"\n", "CRONLOCK_TTL=''\n", "CRONLOCK_TTL==1\n",
		"CRONLOCK_REDIS_URL=redis://:s3cret@h\nBOGUS=redis://:s3cret@h\n", "CRONLOCK_TTL\n", "=1\n",
		"export  CRONLOCK_TTL=1\n", "exportCRONLOCK_TTL=1\n", " # indented comment\n", "\xff\xfe=1\n",
		"CRONLOCK_NODE=\x1b[2J\n", "CRONLOCK_NODE=\"a\" b\n", "CRONLOCK_TTL=1 # c\n", "CRONLOCK_NODE=it's \"x\"\n", "CRONLOCK_NODE=a\x00b", "CRONLOCK_TTL=1\nCRONLOCK_TTL=2",
		"\n\n\n", "",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "cronlock.conf")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := &Settings{Values: map[string]string{}, Origins: map[string]Origin{}}
		if err := s.ReadFile(path, true); err != nil {
			msg := err.Error()
			if msg == "" || !printable(msg) {
				t.Fatalf("readFile(%q): error %q", data, msg)
			}
			for _, line := range strings.Split(string(data), "\n") {
				_, v, _ := strings.Cut(line, "=")
				v = strings.TrimSpace(v)
				if len(v) >= 4 && strings.Contains(msg, v) && !strings.Contains(fixedConfigText+path, v) {
					t.Fatalf("readFile(%q): the error quotes the value %q: %s", data, v, msg)
				}
			}
			return
		}
		var out bytes.Buffer
		for name, v := range s.Values {
			if !known(name) || strings.Contains(v, "\n") || s.Origins[name].Path != path {
				t.Fatalf("readFile(%q): %s=%q from %q", data, name, v, s.Origins[name])
			}
			out.WriteString("# written back\n\n  " + name + " = " + quoted(v) + "\n")
		}
		if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		back := &Settings{Values: map[string]string{}, Origins: map[string]Origin{}}
		if err := back.ReadFile(path, true); err != nil {
			t.Fatalf("settings %q of %q written back as %q: %v", s.Values, data, out.Bytes(), err)
		}
		if len(back.Values) != len(s.Values) {
			t.Fatalf("settings %q of %q read back as %q", s.Values, data, back.Values)
		}
		for name, v := range s.Values {
			if back.Values[name] != v {
				t.Fatalf("settings %q of %q read back as %q", s.Values, data, back.Values)
			}
		}
	})
}

// TestConfigFileLongLine: a line longer than the scanner's 64 KiB is refused with a
// message that names the file and does not quote the line (a fuzz seed that size makes
// the fuzzer spend its time minimising it).
func TestConfigFileLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cronlock.conf")
	long := "redis://:s3cret@" + strings.Repeat("x", 70000)
	if err := os.WriteFile(path, []byte("CRONLOCK_REDIS_URL="+long+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Settings{Values: map[string]string{}, Origins: map[string]Origin{}}
	err := s.ReadFile(path, true)
	if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("readFile of a 70 KB line: %v", err)
	}
}

// quoted writes v back as the config file reads it: in quotes it does not hold, or bare
// when it holds both (then it starts with neither and holds no blank-then-#, or it
// would not have been read).
func quoted(v string) string {
	switch {
	case !strings.Contains(v, "'"):
		return "'" + v + "'"
	case !strings.Contains(v, `"`):
		return `"` + v + `"`
	}
	return v
}

func known(name string) bool {
	for _, n := range Names {
		if n == name {
			return true
		}
	}
	return false
}
