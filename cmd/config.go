package cmd

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	conf "cronlock/settings"
	"cronlock/tty"
)

// DefaultConfigFile is where a whole machine's settings live. CRONLOCK_CONFIG names
// another file (tests, or a machine that keeps configuration elsewhere).
const DefaultConfigFile = conf.DefaultFile

// settings are NAME=value pairs from the config file, then the environment: later wins.
type settings struct {
	vals   map[string]string
	source map[string]string // where each value came from, for messages
	loaded *conf.Settings
}

// twins maps the flags of the settings read in group to their names.
func twins(group string) map[string]string { return conf.Twins(group) }

// loadSettings reads the config file and overlays the environment (package settings),
// refusing an unreadable file and an unknown CRONLOCK_ variable.
func loadSettings() (*settings, error) {
	l, err := conf.Load(os.Environ())
	if err != nil {
		return nil, err
	}
	return wrapSettings(l), nil
}

// wrapSettings gives cmd's view of l: values and their origins in words.
func wrapSettings(l *conf.Settings) *settings {
	s := &settings{vals: l.Values, source: map[string]string{}, loaded: l}
	for name := range l.Values {
		s.source[name] = l.Where(name)
	}
	return s
}

// origin names where the value of flag (whose setting is name) came from, for messages:
// the flag, the environment variable, or the setting and the config file's line (where).
func (s *settings) origin(flags *pflag.FlagSet, flag, name string) (what, where string) {
	if flags.Changed(flag) {
		return "--" + flag, ""
	}
	src := s.source[name]
	if src == "" || strings.HasPrefix(src, "environment") {
		return name, ""
	}
	return name, " in " + src
}

// checkAbsPath refuses a relative path for flag: cron starts jobs in the user's home
// folder, a shell wherever it is, and two runs that resolve one relative lock folder or
// history differently would both run, or split the record. example shows a good value.
func (s *settings) checkAbsPath(flags *pflag.FlagSet, flag, name, value, example string) error {
	if value == "" || filepath.IsAbs(value) {
		return nil
	}
	what, where := s.origin(flags, flag, name)
	return fmt.Errorf("%s %q%s is not an absolute path: cron starts jobs in another folder than your shell, so runs would not agree on it; give the full path, e.g. %s", what, tty.Escape(value), where, example)
}

// isOff reports whether a --history value turns recording off: off in any case.
func isOff(path string) bool { return strings.EqualFold(path, "off") }

// apply sets every flag the user did not give from its setting, so that flags win over
// the environment, which wins over the file. A bad value names where it came from.
// Flags are set in name order, so that of two bad values the same one is always reported
// (and --log-format, early in that order, shapes the report).
func (s *settings) apply(flags *pflag.FlagSet, twins map[string]string) error {
	for _, flag := range slices.Sorted(maps.Keys(twins)) {
		name := twins[flag]
		f := flags.Lookup(flag)
		v, ok := s.vals[name]
		if f == nil || f.Changed || !ok {
			continue
		}
		if err := f.Value.Set(v); err != nil {
			return fmt.Errorf("invalid value %q in %s: %v", v, s.source[name], plainNumberError(err))
		}
	}
	return nil
}

// thisNode is this machine's name as `cronlock run` records it: CRONLOCK_NODE, else the
// hostname. The history commands need it to find this machine's dead runs.
func (s *settings) thisNode() string {
	if n := s.vals["CRONLOCK_NODE"]; n != "" {
		return n
	}
	n, _ := os.Hostname()
	if n == "" {
		n = "localhost" // as run names itself then
	}
	return n
}

// numberSyntax is how strconv reports a number it cannot read, which pflag's integer flags
// pass on as it is.
var numberSyntax = regexp.MustCompile(`strconv\.Parse(?:Int|Uint|Float): parsing ("(?:[^"\\]|\\.)*"): (invalid syntax|value out of range)`)

// plainNumberError says a bad number in words a user reads ("abc" is not a whole number)
// instead of strconv's.
func plainNumberError(err error) error {
	msg := err.Error()
	out := numberSyntax.ReplaceAllStringFunc(msg, func(m string) string {
		sub := numberSyntax.FindStringSubmatch(m)
		if sub[2] == "value out of range" {
			return sub[1] + " is out of range"
		}
		return sub[1] + " is not a whole number"
	})
	if out == msg {
		return err
	}
	return errors.New(out)
}
