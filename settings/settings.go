// Package settings resolves cronlock's settings: the NAME=value lines of the config file,
// then the environment, each value with where it came from. It refuses what would
// silently change what a run does: an unknown name in the file, a CRONLOCK_ variable in
// the environment that is neither a setting nor a name cronlock gives its jobs (a typo on
// a crontab line would otherwise drop the fleet's Redis URL and lock only this machine),
// and a config file this user cannot read.
//
// It does not know flags' types or defaults, nor what a value means: cmd applies the
// values to its flags and checks them there. jobrun builds the job's environment from
// the names declared here, so the two lists cannot drift apart.
package settings

import "slices"

// DefaultFile is where a whole machine's settings live. ConfigVar names another file.
const DefaultFile = "/etc/cronlock/cronlock.conf"

// ConfigVar is the environment variable that names the config file.
const ConfigVar = "CRONLOCK_CONFIG"

// TestPrefix starts the variables of the test build's hooks, which are never settings.
const TestPrefix = "CRONLOCK_TEST_"

// A Setting is one NAME of the config file and the environment, with the flag it stands
// in for ("" = none: it is read by name where it is used) and the groups of commands
// that read it through that flag: "backend" (every command that opens a backend), "run",
// "check", "history", "log".
type Setting struct {
	Name, Flag string
	In         []string
}

// Table is every setting, in the order messages and `cronlock config` list them.
var Table = []Setting{
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
	{"CRONLOCK_HISTORY_RETENTION", "", nil},
	// Only run takes locks, so only run can be refused for a server that evicts them.
	{"CRONLOCK_ALLOW_EVICTION", "allow-eviction", []string{"run"}},
	{"CRONLOCK_TZ", "tz", []string{"run", "check"}},
	{"CRONLOCK_MAX_SKEW", "max-skew", []string{"run"}},
	{"CRONLOCK_FLEET_KEEP", "", nil},
	{"CRONLOCK_JITTER", "jitter", []string{"run"}},
	{"CRONLOCK_PING_URL", "ping", []string{"run"}},
	{"CRONLOCK_OUTPUT", "output", []string{"run"}},
	{"CRONLOCK_REDIS_MIN_REPLICAS", "min-replicas", []string{"run"}},
	{"CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE", "", nil},
	{"CRONLOCK_ETCD_ENDPOINTS", "etcd", []string{"backend"}},
	{"CRONLOCK_ETCD_CA_FILE", "etcd-ca-file", []string{"backend"}},
	{"CRONLOCK_ETCD_CERT_FILE", "etcd-cert-file", []string{"backend"}},
	{"CRONLOCK_ETCD_KEY_FILE", "etcd-key-file", []string{"backend"}},
	{"CRONLOCK_ETCD_PASSWORD_FILE", "etcd-password-file", []string{"backend"}},
	{"CRONLOCK_ETCD_USER", "etcd-user", []string{"backend"}},
	// No CRONLOCK_SCHEDULE: a schedule belongs to one crontab line, and one setting for
	// a whole machine would give every job the same ticks.
}

// Names are the settings' names, in Table's order.
var Names = func() []string {
	names := make([]string, len(Table))
	for i, s := range Table {
		names[i] = s.Name
	}
	return names
}()

// Twins maps the flags of the settings read in group to their names.
func Twins(group string) map[string]string {
	m := map[string]string{}
	for _, s := range Table {
		if slices.Contains(s.In, group) {
			m[s.Flag] = s.Name
		}
	}
	return m
}

// The names cronlock gives the job it runs. A job that itself calls `cronlock run` (a
// nested run) passes them on, so they are never refused as typos.
const (
	JobKey          = "CRONLOCK_KEY"
	JobRunID        = "CRONLOCK_RUN_ID"
	JobNode         = "CRONLOCK_NODE" // also a setting: the nested run is on the same machine
	JobTry          = "CRONLOCK_TRY"
	JobFencingToken = "CRONLOCK_FENCING_TOKEN"
	JobTokenBackend = "CRONLOCK_TOKEN_BACKEND" // tokens of two backends do not compare
	JobScheduledFor = "CRONLOCK_SCHEDULED_FOR" // only when the run has a tick
	JobTickAttempt  = "CRONLOCK_TICK_ATTEMPT"  // with a tick: 1, 2 for the first takeover…
	JobTakeoverOf   = "CRONLOCK_TAKEOVER_OF"   // the lost run a takeover took the tick from
	// JobCheckpointSocket names the run's private socket, through which the job's
	// `cronlock checkpoint` commands reach their parent run: a path, never a secret.
	JobCheckpointSocket = "CRONLOCK_CHECKPOINT_SOCKET"
)

// JobNames is every name cronlock gives its jobs; jobrun replaces an inherited one of
// these with this run's value, or drops it.
var JobNames = []string{JobKey, JobRunID, JobNode, JobTry, JobFencingToken, JobTokenBackend, JobScheduledFor, JobTickAttempt, JobTakeoverOf, JobCheckpointSocket}

// Known reports whether name is a setting.
func Known(name string) bool { return slices.Contains(Names, name) }
