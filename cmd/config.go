package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// DefaultConfigFile is where a whole machine's settings live. CRONLOCK_CONFIG names
// another file (tests, or a machine that keeps configuration elsewhere).
const DefaultConfigFile = "/etc/cronlock/cronlock.conf"

// settings are NAME=value pairs from the config file, then the environment: later wins.
type settings struct {
	vals   map[string]string
	source map[string]string // where each value came from, for messages
}

// configNames are the settings the config file and the environment may carry.
var configNames = []string{
	"CRONLOCK_TTL", "CRONLOCK_BACKEND", "CRONLOCK_REDIS_URL", "CRONLOCK_REDIS_PASSWORD_FILE",
	"CRONLOCK_REDIS_TIMEOUT", "CRONLOCK_PREFIX", "CRONLOCK_HISTORY", "CRONLOCK_NODE",
	"CRONLOCK_LOCK_DIR", "CRONLOCK_METRICS_DIR", "CRONLOCK_LOG_FORMAT",
	"CRONLOCK_HISTORY_RETENTION", "CRONLOCK_ALLOW_EVICTION",
}

// loadSettings reads the config file (missing is fine) and overlays the environment.
func loadSettings() (*settings, error) {
	s := &settings{vals: map[string]string{}, source: map[string]string{}}
	path := os.Getenv("CRONLOCK_CONFIG")
	if path == "" {
		path = DefaultConfigFile
	}
	if err := s.readFile(path); err != nil {
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

func (s *settings) readFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
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
		if !ok || !known[name] {
			return fmt.Errorf("config file %s line %d: want NAME=value with NAME one of %s", path, n, strings.Join(configNames, ", "))
		}
		s.vals[name] = unquote(strings.TrimSpace(val))
		s.source[name] = fmt.Sprintf("%s line %d", path, n)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	return nil
}

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
			return fmt.Errorf("invalid value %q in %s: %v", v, s.source[name], err)
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
	return n
}
