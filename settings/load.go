package settings

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"cronlock/userdb"
)

// Kind says where a value came from.
type Kind string

// The kinds of origin, as `cronlock config` names them.
const (
	Default Kind = "default"
	File    Kind = "file"
	Env     Kind = "env"
	Flag    Kind = "flag"
)

// Origin is where one value came from: a line of a file, the environment, a flag, or
// nothing (the default).
type Origin struct {
	Kind Kind
	Path string // File: the config file
	Line int    // File: its line, from 1
	Flag string // Flag: its name without dashes
}

// String is the origin as `cronlock config` shows it, in git config --show-origin's
// manner: "default", "file:/etc/cronlock/cronlock.conf:3", "env", "flag:--redis".
func (o Origin) String() string {
	switch o.Kind {
	case File:
		return fmt.Sprintf("file:%s:%d", o.Path, o.Line)
	case Flag:
		return "flag:--" + o.Flag
	case Env:
		return "env"
	}
	return "default"
}

// Settings are the values of the config file overlaid with the environment.
type Settings struct {
	// Values maps each set NAME to its value; an empty variable counts as unset.
	Values map[string]string
	// Origins maps each NAME of Values to where it came from.
	Origins map[string]Origin
	// File is the config file that applies, read or absent (only the default may be).
	File string
}

// Where names the origin of name's value for messages: "environment variable NAME" or
// "/etc/cronlock/cronlock.conf line 3"; "" when it is not set.
func (s *Settings) Where(name string) string {
	o, ok := s.Origins[name]
	switch {
	case !ok:
		return ""
	case o.Kind == File:
		return fmt.Sprintf("%s line %d", o.Path, o.Line)
	}
	return "environment variable " + name
}

// Load reads the config file and overlays environ (os.Environ's form). Only the default
// file may be missing: a CRONLOCK_CONFIG that names no file is a typo, and going on
// without it would drop the fleet's Redis URL and lock only this machine. It returns the
// first problem LoadAll finds.
func Load(environ []string) (*Settings, error) {
	s, errs := LoadAll(environ)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return s, nil
}

// LoadAll is Load that goes on past the problems it can go on past, for a check that
// reports them all: every unknown CRONLOCK_ variable is one error; a config file that
// cannot be read ends the reading (s is then nil).
func LoadAll(environ []string) (s *Settings, errs []error) {
	s = &Settings{Values: map[string]string{}, Origins: map[string]Origin{}}
	env := map[string]string{}
	for _, kv := range environ {
		if name, v, ok := strings.Cut(kv, "="); ok {
			env[name] = v
		}
	}
	path := env[ConfigVar]
	named := path != ""
	if !named {
		path = DefaultFile
	} else if !filepath.IsAbs(path) {
		return nil, []error{fmt.Errorf("%s %q is not an absolute path: cron starts jobs in another folder than your shell; give the full path, e.g. %s", ConfigVar, path, DefaultFile)}
	}
	s.File = path
	if err := s.readFile(path, named); err != nil {
		return nil, []error{err}
	}
	errs = CheckEnv(environ)
	// An empty variable counts as unset, as crontab lines like CRONLOCK_TTL= intend.
	for _, name := range Names {
		if v := env[name]; v != "" {
			s.Values[name] = v
			s.Origins[name] = Origin{Kind: Env}
		}
	}
	return s, errs
}

// ReadFile reads the config file at path into s; named says CRONLOCK_CONFIG chose it,
// and then it must exist. For tests of the file's grammar.
func (s *Settings) ReadFile(path string, named bool) error { return s.readFile(path, named) }

func (s *Settings) readFile(path string, named bool) error {
	// O_NONBLOCK: opening a named pipe would otherwise wait for a writer, and every
	// cron job of the machine would hang there; it changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if named {
			return fmt.Errorf("%s names %s, which does not exist; fix the name, or unset %s to read %s", ConfigVar, path, ConfigVar, DefaultFile)
		}
		return nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return unreadable(path)
	}
	if err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && (fi.IsDir() || fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0) {
		what := "a folder"
		if !fi.IsDir() {
			what = "a named pipe or socket"
		}
		return fmt.Errorf("config file %s is %s, not a file; make it a file of NAME=value lines (or name one in %s)", path, what, ConfigVar)
	}
	sc := bufio.NewScanner(f)
	first := map[string]int{} // the line that set each name
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			// A byte order mark, as some Windows editors save UTF-8: like a CR LF line
			// end, it is the editor's, not the writer's, and it means nothing here.
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		name, val, err := parseLine(text)
		if err != nil {
			return fmt.Errorf("config file %s line %d: %w", path, n, err)
		}
		if name == "" {
			continue
		}
		if !Known(name) {
			return fmt.Errorf("config file %s line %d: %s; the settings are %s", path, n, unknownName(name, "unknown setting "+name), strings.Join(Names, ", "))
		}
		// A shared file that sets a name twice (two Redis URLs after a merge) would
		// otherwise quietly use the second: say which lines, and let the admin choose.
		if at, ok := first[name]; ok {
			return fmt.Errorf("config file %s line %d: %s is set again (first on line %d); keep one of the two lines", path, n, name, at)
		}
		first[name] = n
		s.Values[name] = val
		s.Origins[name] = Origin{Kind: File, Path: path, Line: n}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	return nil
}

// unreadable is the refusal of a config file that exists (or may exist) but that this
// user may not read: it names the file, or the folder that cannot be searched, and the
// fix. Passwords belong in the password files, so the file itself can be world-readable.
func unreadable(path string) error {
	who := "uid " + strconv.Itoa(os.Geteuid())
	if u, err := userdb.LookupID(os.Geteuid()); err == nil && u.Username != "" {
		who = u.Username + " (" + who + ")"
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("config file %s: its folder %s cannot be searched by %s (permission denied); make it so, e.g. chmod 0755 %s", path, dir, who, dir)
	}
	return fmt.Errorf("config file %s cannot be read by %s (permission denied): every user that runs cronlock reads it; make it readable, e.g. chmod 0644 %s, and keep passwords out of it, in the files named by CRONLOCK_REDIS_PASSWORD_FILE or CRONLOCK_ETCD_PASSWORD_FILE (0600)", path, who, path)
}

// looksLikeName reports whether s could be a variable name (letters, digits, _).
func looksLikeName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// errNotNameValue is the refusal of a line that is not NAME=value. It quotes nothing of
// the line: what is on it may be a password (a URL pasted without its NAME=).
var errNotNameValue = fmt.Errorf("want NAME=value with NAME one of %s", strings.Join(Names, ", "))

// parseLine reads one line of the config file (cronlock.conf(5) documents the grammar):
// blank lines and lines whose first non-blank byte is # give name "". Otherwise the line
// is NAME=value: blanks around NAME, = and value are dropped; a value that starts with a
// quote (" or ') ends at the same quote, taken as it is (no escapes, no expansion), and
// nothing but blanks may follow it; an unquoted value is the rest of the line, and a #
// after a blank in it is refused (it would look like a comment and be part of the value).
// It refuses rather than guesses: the file is not a shell script, and what a shell would
// read differently must not silently mean something else here. Its errors quote no
// value.
func parseLine(text string) (name, val string, err error) {
	line := strings.TrimSpace(text)
	if line == "" || line[0] == '#' {
		return "", "", nil
	}
	name, val, ok := strings.Cut(line, "=")
	name = strings.TrimSpace(name)
	if ok && (strings.HasPrefix(name, "export ") || strings.HasPrefix(name, "export\t")) {
		return "", "", errors.New("drop the word export: this file is read by cronlock, not by a shell, and is not a script (write NAME=value)")
	}
	if !ok || !looksLikeName(name) {
		return "", "", errNotNameValue
	}
	val = strings.TrimSpace(val)
	if val == "" {
		return name, "", nil
	}
	if q := val[0]; q == '"' || q == '\'' {
		end := strings.IndexByte(val[1:], q)
		if end < 0 {
			return "", "", fmt.Errorf("the value of %s opens a quote (%c) that the line does not close; close it, or drop it", name, q)
		}
		if rest := strings.TrimSpace(val[2+end:]); rest != "" {
			if rest[0] == '#' {
				return "", "", fmt.Errorf("%s: a comment must have a line of its own; move it above", name)
			}
			return "", "", fmt.Errorf("the value of %s goes on after its closing quote (%c); quote the whole value (quotes are not escaped or nested)", name, q)
		}
		return name, val[1 : 1+end], nil
	}
	if i := strings.IndexByte(val, '#'); i > 0 && (val[i-1] == ' ' || val[i-1] == '\t') {
		return "", "", fmt.Errorf("%s: a # after a blank starts no comment here (it would be part of the value); move the comment to a line of its own, or quote the value", name)
	}
	return name, val, nil
}
