package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"cronlock/tty"
)

// DefaultConfigFile is where a whole machine's settings live. CRONLOCK_CONFIG names
// another file (tests, or a machine that keeps configuration elsewhere).
const DefaultConfigFile = "/etc/cronlock/cronlock.conf"

// settings are NAME=value pairs from the config file, then the environment: later wins.
type settings struct {
	vals   map[string]string
	source map[string]string // where each value came from, for messages
}

// A setting is one NAME of the config file and the environment, with the flag it stands
// in for and the commands that read it through that flag (twins). A setting without a
// flag is read by name where it is used.
type setting struct {
	name, flag string
	in         []string // "backend" (every command that opens a backend), "run", "check", "history", "log"
}

// settingsTable is every setting, in the order messages list them.
var settingsTable = []setting{
	{"CRONLOCK_TTL", "ttl", []string{"run"}},
	{"CRONLOCK_BACKEND", "backend", []string{"backend"}},
	{"CRONLOCK_REDIS_URL", "redis", []string{"backend"}},
	{"CRONLOCK_REDIS_PASSWORD_FILE", "redis-password-file", []string{"backend"}},
	{"CRONLOCK_REDIS_TIMEOUT", "redis-timeout", []string{"backend"}},
	{"CRONLOCK_PREFIX", "prefix", []string{"backend"}},
	// history's --node is a filter, not this machine's name: CRONLOCK_NODE is run's only.
	{"CRONLOCK_HISTORY", "history", []string{"run", "history"}},
	{"CRONLOCK_NODE", "node", []string{"run"}},
	{"CRONLOCK_LOCK_DIR", "lock-dir", []string{"backend"}},
	{"CRONLOCK_METRICS_DIR", "metrics-dir", []string{"run"}},
	// The root's flag: run resolves it with its other settings, other commands on their own.
	{"CRONLOCK_LOG_FORMAT", "log-format", []string{"run", "log"}},
	{retentionName, "", nil},
	// Only run takes locks, so only run can be refused for a server that evicts them.
	{"CRONLOCK_ALLOW_EVICTION", "allow-eviction", []string{"run"}},
	{"CRONLOCK_TZ", "tz", []string{"run", "check"}},
	{"CRONLOCK_MAX_SKEW", "max-skew", []string{"run"}},
	{"CRONLOCK_FLEET_KEEP", "", nil},
	{"CRONLOCK_JITTER", "jitter", []string{"run"}},
	{"CRONLOCK_PING_URL", "ping", []string{"run"}},
	{"CRONLOCK_OUTPUT", "output", []string{"run"}},
	{minReplicasName, "min-replicas", []string{"run"}},
	{sentinelPasswordName, "", nil},
	{"CRONLOCK_ETCD_ENDPOINTS", "etcd", []string{"backend"}},
	{"CRONLOCK_ETCD_CA_FILE", "etcd-ca-file", []string{"backend"}},
	{"CRONLOCK_ETCD_CERT_FILE", "etcd-cert-file", []string{"backend"}},
	{"CRONLOCK_ETCD_KEY_FILE", "etcd-key-file", []string{"backend"}},
	{"CRONLOCK_ETCD_PASSWORD_FILE", "etcd-password-file", []string{"backend"}},
	{"CRONLOCK_ETCD_USER", "etcd-user", []string{"backend"}},
	// No CRONLOCK_SCHEDULE: a schedule belongs to one crontab line, and one setting for
	// a whole machine would give every job the same ticks.
}

// configNames are the settings the config file and the environment may carry.
var configNames = func() []string {
	names := make([]string, len(settingsTable))
	for i, s := range settingsTable {
		names[i] = s.name
	}
	return names
}()

// twins maps the flags of the settings read in group to their names.
func twins(group string) map[string]string {
	m := map[string]string{}
	for _, s := range settingsTable {
		if slices.Contains(s.in, group) {
			m[s.flag] = s.name
		}
	}
	return m
}

// loadSettings reads the config file and overlays the environment. Only the default file
// may be missing: a CRONLOCK_CONFIG that names no file is a typo, and going on without it
// would drop the fleet's Redis URL and lock only this machine.
func loadSettings() (*settings, error) {
	s := &settings{vals: map[string]string{}, source: map[string]string{}}
	path := os.Getenv("CRONLOCK_CONFIG")
	named := path != ""
	if !named {
		path = DefaultConfigFile
	} else if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("CRONLOCK_CONFIG %q is not an absolute path: cron starts jobs in another folder than your shell; give the full path, e.g. %s", path, DefaultConfigFile)
	}
	if err := s.readFile(path, named); err != nil {
		return nil, err
	}
	// An empty variable counts as unset, as crontab lines like CRONLOCK_TTL= intend.
	for _, name := range configNames {
		if v := os.Getenv(name); v != "" {
			s.vals[name] = v
			s.source[name] = "environment variable " + name
		}
	}
	return s, nil
}

// readFile reads the config file at path; named says CRONLOCK_CONFIG chose it, and then
// it must exist.
func (s *settings) readFile(path string, named bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if named {
			return fmt.Errorf("CRONLOCK_CONFIG names %s, which does not exist; fix the name, or unset CRONLOCK_CONFIG to read %s", path, DefaultConfigFile)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	defer f.Close()
	known := map[string]bool{}
	for _, n := range configNames {
		known[n] = true
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(strings.TrimPrefix(name, "export "))
		// Only a name that looks like one is quoted: what else is on a line may be a
		// password (a URL pasted without its NAME=).
		if !ok || !looksLikeName(name) {
			return fmt.Errorf("config file %s line %d: want NAME=value with NAME one of %s", path, n, strings.Join(configNames, ", "))
		}
		if !known[name] {
			hint := ""
			if near := nearestName(name); near != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", near)
			}
			return fmt.Errorf("config file %s line %d: unknown setting %s%s; the settings are %s", path, n, name, hint, strings.Join(configNames, ", "))
		}
		s.vals[name] = unquote(strings.TrimSpace(val))
		s.source[name] = fmt.Sprintf("%s line %d", path, n)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	return nil
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

// nearestName is the setting a misspelled name most likely meant: the nearest one within
// an edit per three letters of what follows CRONLOCK_ (case aside), or "" when none is
// that close (CRONLOCK_REDIS is not a typo of CRONLOCK_PREFIX).
func nearestName(name string) string {
	name = strings.ToUpper(name)
	best, bestD := "", max(1, len(strings.TrimPrefix(name, "CRONLOCK_"))/3)+1
	for _, n := range configNames {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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

// unquote strips one pair of matching quotes, as a shell-minded admin may write them.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

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
