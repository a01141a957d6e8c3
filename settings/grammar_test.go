package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigGrammar: what the config file accepts (and the value each line gives), and
// what it refuses with one line naming the file and line. cronlock.conf(5) documents
// the same cases.
func TestConfigGrammar(t *testing.T) {
	for _, c := range []struct {
		text string
		name string // the setting line 2 sets; "" = none
		val  string
		err  string // "" = accepted; else a part of the error, which names file and line 2
	}{
		{"CRONLOCK_TTL=90s", "CRONLOCK_TTL", "90s", ""},
		{"  CRONLOCK_TTL = 90s  ", "CRONLOCK_TTL", "90s", ""},
		{"CRONLOCK_TTL=90s\r", "CRONLOCK_TTL", "90s", ""},
		{"CRONLOCK_NODE=\"web 1\"", "CRONLOCK_NODE", "web 1", ""},
		{"CRONLOCK_NODE='web 1'  ", "CRONLOCK_NODE", "web 1", ""},
		{"CRONLOCK_NODE=\" padded \"", "CRONLOCK_NODE", " padded ", ""},
		{"CRONLOCK_PREFIX='it\"s:'", "CRONLOCK_PREFIX", "it\"s:", ""},
		{"CRONLOCK_NODE=\"$HOST\"", "CRONLOCK_NODE", "$HOST", ""}, // no expansion
		{"CRONLOCK_NODE='a\\b'", "CRONLOCK_NODE", "a\\b", ""},     // no escapes
		{"CRONLOCK_NODE=''", "CRONLOCK_NODE", "", ""},
		{"CRONLOCK_NODE=", "CRONLOCK_NODE", "", ""},
		{"CRONLOCK_NODE=a=b", "CRONLOCK_NODE", "a=b", ""},
		{"CRONLOCK_NODE=it's", "CRONLOCK_NODE", "it's", ""}, // a quote inside an unquoted value
		{"CRONLOCK_PING_URL=https://h/p#frag", "CRONLOCK_PING_URL", "https://h/p#frag", ""},
		{"CRONLOCK_NODE='a # b'", "CRONLOCK_NODE", "a # b", ""},
		{"# a comment", "", "", ""},
		{"   # an indented comment", "", "", ""},
		{"", "", "", ""},
		{" \t ", "", "", ""},

		{"export CRONLOCK_TTL=90s", "", "", "drop the word export"},
		{"export\tCRONLOCK_TTL=90s", "", "", "drop the word export"},
		{"CRONLOCK_NODE=\"web 1\" junk", "", "", "goes on after its closing quote"},
		{"CRONLOCK_NODE='a'b'", "", "", "goes on after its closing quote"},
		{"CRONLOCK_NODE=\"a\\\"b\"", "", "", "goes on after its closing quote"},
		{"CRONLOCK_NODE=\"web 1\" # main", "", "", "a comment must have a line of its own"},
		{"CRONLOCK_NODE=\"web 1", "", "", "opens a quote"},
		{"CRONLOCK_NODE='", "", "", "opens a quote"},
		{"CRONLOCK_TTL=90s # ninety seconds", "", "", "a # after a blank starts no comment"},
		{"CRONLOCK_TTL=90s\t#x", "", "", "a # after a blank starts no comment"},
		{"CRONLOCK_TTL", "", "", "want NAME=value"},
		{"=90s", "", "", "want NAME=value"},
		{"CRONLOCK TTL=90s", "", "", "want NAME=value"},
		{"redis://:s3cret@h:6379/0", "", "", "want NAME=value"},
		{"CRONLOCK_TTLL=90s", "", "", "unknown setting CRONLOCK_TTLL (did you mean CRONLOCK_TTL?)"},
		{"crontab_ttl=90s", "", "", "unknown setting crontab_ttl"},
		{"CRONLOCK_TTL=30s", "", "", "CRONLOCK_TTL is set again (first on line 1)"},
	} {
		path := filepath.Join(t.TempDir(), "cronlock.conf")
		// Line 1 sets another name (or the same, to be set again), line 2 is the one tested.
		first := "CRONLOCK_BACKEND=local\n"
		if strings.Contains(c.err, "set again") {
			first = "CRONLOCK_TTL=60s\n"
		}
		if err := os.WriteFile(path, []byte(first+c.text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Settings{Values: map[string]string{}, Origins: map[string]Origin{}}
		err := s.ReadFile(path, true)
		if c.err != "" {
			want := "config file " + path + " line 2: "
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), want) ||
				strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q: error %v; want one line starting %q and holding %q", c.text, err, want, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: refused: %v", c.text, err)
			continue
		}
		if c.name == "" {
			if len(s.Values) != 1 {
				t.Errorf("%q: set %q; want nothing but line 1's", c.text, s.Values)
			}
			continue
		}
		if v, ok := s.Values[c.name]; !ok || v != c.val || s.Origins[c.name].Line != 2 {
			t.Errorf("%q: %s=%q (set %v, from %v); want %q from line 2", c.text, c.name, v, ok, s.Origins[c.name], c.val)
		}
	}
}
