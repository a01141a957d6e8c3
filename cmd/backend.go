package cmd

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"cronlock/lockrun"
	"cronlock/lockrun/local"
	"cronlock/lockrun/redis"
	"cronlock/logline"
	"cronlock/schedule"
)

// backendOptions are the settings that choose and reach a lock backend; run, status and
// unlock share them.
type backendOptions struct {
	Backend      string // auto, redis, etcd, local
	RedisURL     string
	PasswordFile string
	RedisTimeout time.Duration
	Prefix       string
	LockDir      string
	// AllowEviction lets run take a lock on a Redis that can evict keys (run's
	// --allow-eviction / CRONLOCK_ALLOW_EVICTION); status and unlock never refuse one.
	AllowEviction bool
	// FleetKeep is CRONLOCK_FLEET_KEEP: entries of the fleet's record kept per key
	// (a setting only: it is the fleet's, not one run's); 0 = the default.
	FleetKeep int
	// MinReplicas is run's --min-replicas; SentinelPasswordFile is
	// CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE (backendha.go).
	MinReplicas          int
	SentinelPasswordFile string
	etcdOptions

	urlFromFlag bool // the URL came from --redis, where ps shows it
}

// backendTwins maps each backend flag to its environment/config name.
var backendTwins = twins("backend")

func (o *backendOptions) addFlags(fs *pflag.FlagSet) {
	o.RedisTimeout = lockrun.DefaultTimeout
	fs.StringVar(&o.Backend, "backend", "auto", "lock backend: redis, etcd, local, or auto (redis when a Redis URL is set, etcd when etcd endpoints are, else local) (env CRONLOCK_BACKEND)")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis URL: redis://[user:pass@]host:port/db, rediss://…, unix:///path, redis-sentinel://h1:26379,h2:26379/MASTER[/db], redis-cluster://h1:6379,h2:6379 (env CRONLOCK_REDIS_URL)")
	fs.StringVar(&o.PasswordFile, "redis-password-file", "", "read the Redis password from this file (env CRONLOCK_REDIS_PASSWORD_FILE)")
	fs.Var(durationValue{d: &o.RedisTimeout, positive: true}, "redis-timeout", "deadline of one Redis operation (env CRONLOCK_REDIS_TIMEOUT)")
	fs.StringVar(&o.Prefix, "prefix", lockrun.DefaultPrefix, "namespace of every Redis or etcd key cronlock writes (env CRONLOCK_PREFIX)")
	o.etcdOptions.addFlags(fs)
	fs.StringVar(&o.LockDir, "lock-dir", "", "folder of the local backend's lock files (env CRONLOCK_LOCK_DIR; default /run/cronlock for root, else /tmp/cronlock-UID)")
}

// maxFleetKeep bounds CRONLOCK_FLEET_KEEP: at 512 bytes an entry, 100000 entries are
// 50 MB per key, already more than a lock server should hold for one job.
const maxFleetKeep = 100000

// resolve fills unset flags from the settings and checks the combination.
func (o *backendOptions) resolve(fs *pflag.FlagSet, s *settings) error {
	o.urlFromFlag = fs.Changed("redis")
	if err := s.apply(fs, backendTwins); err != nil {
		return err
	}
	if v, ok := s.vals["CRONLOCK_FLEET_KEEP"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxFleetKeep {
			return fmt.Errorf("CRONLOCK_FLEET_KEEP=%q (from %s): give a whole number of entries from 1 to %d (default %d)", v, s.source["CRONLOCK_FLEET_KEEP"], maxFleetKeep, lockrun.DefaultFleetKeep)
		}
		o.FleetKeep = n
	}
	if err := s.checkAbsPath(fs, "lock-dir", "CRONLOCK_LOCK_DIR", o.LockDir, local.DefaultDir()); err != nil {
		return err
	}
	if done, err := o.resolveEtcd(); err != nil {
		return err
	} else if done {
		// etcd's choice is settled, but its flags still need the checks every backend
		// gets (a --min-replicas given for etcd must be refused, not ignored).
		return o.resolveHA(fs, s)
	}
	switch o.Backend {
	case "auto":
		if o.RedisURL != "" {
			o.Backend = "redis"
		} else {
			o.Backend = "local"
		}
	case "redis":
		if o.RedisURL == "" {
			what, where := s.origin(fs, "backend", "CRONLOCK_BACKEND")
			return fmt.Errorf("--redis or CRONLOCK_REDIS_URL is required with --backend redis (%s%s); without it this host would lock alone, so nothing runs", what, where)
		}
	case "local":
	default:
		return fmt.Errorf("--backend %q: use redis, etcd, local or auto", o.Backend)
	}
	return o.resolveHA(fs, s)
}

// load reads the settings and resolves the backend flags of command c, for the commands
// that only need a backend (status, unlock), and says the warnings about them on c's
// stderr, as run does. Errors come as exit 125 with their message.
func (o *backendOptions) load(c *cobra.Command) error {
	s, err := loadSettings()
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	if err := o.resolve(c.Flags(), s); err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	for _, w := range o.warnings() {
		logline.Print(c.ErrOrStderr(), logFormatOf(c), logline.Warn, w)
	}
	return nil
}

// checkKey validates a --key value, as exit 125 with the reason.
func checkKey(key string) error {
	if err := lockrun.ValidKey(key); err != nil {
		return exitf(ExitFailed, "--key %q: %v", key, err)
	}
	return nil
}

// warnings returns the cautions a user should see about these settings.
func (o *backendOptions) warnings() []string {
	if o.Backend == "redis" && o.urlFromFlag && redis.URLHasPassword(o.RedisURL) {
		return []string{"warning: the Redis password in --redis is visible to every user in ps; put it in CRONLOCK_REDIS_PASSWORD_FILE or " + DefaultConfigFile}
	}
	return nil
}

// open connects the chosen backend. Errors are ready for the user: no password in them.
func (o *backendOptions) open() (lockrun.Locker, error) {
	if o.Backend == "local" {
		dir := o.LockDir
		if dir == "" {
			dir = local.DefaultDir()
		}
		return local.New(dir)
	}
	if o.Backend == "etcd" {
		return o.openEtcd()
	}
	ro := redis.Options{URL: o.RedisURL, Timeout: o.RedisTimeout, Prefix: o.Prefix, AllowEviction: o.AllowEviction, FleetKeep: o.FleetKeep,
		PrevTick: prevTickOf}
	if o.PasswordFile != "" {
		pw, err := readPasswordFile(o.PasswordFile, "Redis", "--redis-password-file / CRONLOCK_REDIS_PASSWORD_FILE")
		if err != nil {
			return nil, err
		}
		ro.Password = pw
	}
	if err := o.haOptions(&ro); err != nil {
		return nil, err
	}
	return redis.New(ro)
}

// readPasswordFile reads the password file of what ("Redis", "Sentinel", "etcd"), named
// by the settings names; only the first line counts, so a trailing newline written by
// an editor or `echo` is not part of the password.
func readPasswordFile(path, what, names string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the %s password file (%s): %v", what, names, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return "", fmt.Errorf("the %s password file %s is empty (%s)", what, path, names)
	}
	return line, nil
}

// yesNoValue is a boolean flag that also takes the yes and no a config file says.
type yesNoValue struct{ b *bool }

func (v yesNoValue) String() string {
	if v.b != nil && *v.b {
		return "yes"
	}
	return "no"
}
func (v yesNoValue) Type() string { return "yes|no" }
func (v yesNoValue) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true", "1", "on":
		*v.b = true
	case "no", "false", "0", "off":
		*v.b = false
	default:
		return errors.New("use yes or no")
	}
	return nil
}

// prevTickOf reads a schedule from a tick record for the fleet's readers (roll-out
// duplicates): nil when it cannot be read.
func prevTickOf(expr, tz string) func(time.Time) time.Time {
	s, err := schedule.Parse(expr, tz)
	if err != nil {
		return nil
	}
	return s.Prev
}
