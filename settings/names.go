package settings

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// kvzNames are the settings of kvz/cronlock, a bash tool of the same name, with what to
// write instead. Its users bring them along on crontab lines and in config files.
var kvzNames = map[string]string{
	"CRONLOCK_HOST":              "CRONLOCK_REDIS_URL=redis://HOST:PORT/0",
	"CRONLOCK_PORT":              "CRONLOCK_REDIS_URL=redis://HOST:PORT/0",
	"CRONLOCK_GRACE":             "--min-hold 40s on the crontab line (this cronlock's --grace is the time between SIGTERM and SIGKILL), or better --schedule with the line's schedule",
	"CRONLOCK_RELEASE":           "CRONLOCK_TTL=60s (the lease is renewed while the job runs, and a crashed host frees the lock within it)",
	"CRONLOCK_TIMEOUT":           "--timeout 1h on the crontab line",
	"CRONLOCK_VERBOSE":           "--verbose on the crontab line",
	"CRONLOCK_RESET":             "cronlock unlock --key KEY",
	"CRONLOCK_NTPDATE":           "nothing: keep the clocks in sync with NTP (chrony, systemd-timesyncd); --schedule runs refuse a clock further than CRONLOCK_MAX_SKEW from Redis's",
	"CRONLOCK_RECONNECT_BACKOFF": "CRONLOCK_REDIS_TIMEOUT=2s (each Redis operation is retried within it)",
	"CRONLOCK_USE_SENTINEL":      "CRONLOCK_REDIS_URL=redis-sentinel://HOST:26379/MASTER",
	"CRONLOCK_SENTINEL_HOST":     "CRONLOCK_REDIS_URL=redis-sentinel://HOST:26379/MASTER",
	"CRONLOCK_SENTINEL_PORT":     "CRONLOCK_REDIS_URL=redis-sentinel://HOST:26379/MASTER",
	"CRONLOCK_SENTINEL_MASTER":   "CRONLOCK_REDIS_URL=redis-sentinel://HOST:26379/MASTER",
}

// CheckEnv returns one error for each CRONLOCK_ variable of environ that is neither a
// setting, nor CRONLOCK_CONFIG, nor a name cronlock gives its jobs (JobNames), nor a
// test hook's (TestPrefix), sorted by name. Each names the variable, never its value
// (it may hold a password), with the setting it probably meant.
func CheckEnv(environ []string) []error {
	var bad []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CRONLOCK_") || name == ConfigVar || Known(name) ||
			slices.Contains(JobNames, name) || strings.HasPrefix(name, TestPrefix) {
			continue
		}
		bad = append(bad, name)
	}
	sort.Strings(bad)
	errs := make([]error, 0, len(bad))
	for _, name := range bad {
		errs = append(errs, fmt.Errorf("%s; unset it or fix its name (a misspelled setting would be ignored, and a run could lock only this machine); cronlock config lists the settings",
			unknownName(name, "unknown environment variable "+name)))
	}
	return errs
}

// unknownName is what, the text that calls name unknown, followed by what was probably
// meant: kvz/cronlock's word for the same thing, or the nearest setting.
func unknownName(name, what string) string {
	if instead, ok := kvzNames[strings.ToUpper(name)]; ok {
		return fmt.Sprintf("%s (a setting of kvz/cronlock, another tool; write %s instead)", what, instead)
	}
	if near := Nearest(name); near != "" {
		return fmt.Sprintf("%s (did you mean %s?)", what, near)
	}
	return what
}

// Nearest is the setting a misspelled name most likely meant: the nearest one within an
// edit per three letters of what follows CRONLOCK_ (case aside), or "" when none is that
// close (CRONLOCK_REDIS is not a typo of CRONLOCK_PREFIX).
func Nearest(name string) string {
	name = strings.ToUpper(name)
	best, bestD := "", max(1, len(strings.TrimPrefix(name, "CRONLOCK_"))/3)+1
	for _, n := range Names {
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
