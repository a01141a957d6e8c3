package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
)

var probeScript = sync.OnceValue(func() string { return loadScript("probe.lua") })

var _ lockrun.Diagnoser = (*Locker)(nil)

// Diagnose tries the server in one script that writes nothing (probe.lua): it answers,
// its clock is within o.MaxSkew of this host's, it cannot evict keys (unless
// AllowEviction), and the ACL user may run every command cronlock sends on the prefix's
// keys and channels (Redis 7 and later can tell; before, that is said as a fact).
func (l *Locker) Diagnose(ctx context.Context, o lockrun.DiagnoseOptions) lockrun.Diagnosis {
	var d lockrun.Diagnosis
	now := o.Now
	if now == nil {
		now = time.Now
	}
	server := l.Describe()
	key := l.lockKey("cronlock-config-check")
	sent := now()
	res, _, err := l.eval(ctx, probeScript(), []string{key}, l.channel("cronlock-config-check"), l.target.DB,
		boolArg(l.minReplicas > 0), boolArg(l.target.Scheme == conn.SchemeCluster), scriptSHA(acquireScript()))
	got := now()
	if err != nil {
		d.Problems = append(d.Problems, l.userError("try the server", err).Error())
		return d
	}
	r, ok := res.([]any)
	if !ok || len(r) != 3 {
		d.Problems = append(d.Problems, fmt.Sprintf("%s answered the probe with %v, not what a Redis server answers", server, res))
		return d
	}
	d.Facts = append(d.Facts, fmt.Sprintf("%s answers (in %s)", server, got.Sub(sent).Round(time.Microsecond)))
	if t, ok := r[0].([]any); ok && len(t) == 2 {
		sec, _ := toInt(t[0])
		usec, _ := toInt(t[1])
		mid := sent.Add(got.Sub(sent) / 2)
		skew := mid.Sub(time.Unix(sec, usec*1000))
		abs := max(skew, -skew)
		switch {
		case o.MaxSkew > 0 && abs > o.MaxSkew:
			d.Problems = append(d.Problems, fmt.Sprintf("this host's clock is %s %s %s's, more than --max-skew / CRONLOCK_MAX_SKEW %s: --schedule runs will be refused; sync the clock with NTP (timedatectl timesync-status, chronyc tracking)",
				roundSkew(abs), aheadBehind(skew), server, o.MaxSkew))
		default:
			d.Facts = append(d.Facts, fmt.Sprintf("this host's clock is %s %s the server's (±%s)", roundSkew(abs), aheadBehind(skew), (got.Sub(sent)/2).Round(time.Microsecond)))
		}
	}
	denied, _ := r[1].([]any)
	switch {
	case len(denied) == 1 && denied[0] == "?":
		d.Facts = append(d.Facts, "ACL not checked: the server is older than Redis 7 (no redis.acl_check_cmd)")
	case len(denied) > 0:
		names := make([]string, len(denied))
		for i, c := range denied {
			names[i], _ = c.(string)
		}
		d.Problems = append(d.Problems, fmt.Sprintf("%s: the ACL user may not run %s on the keys and channels %s*, which cronlock sends; give it the rules of the ACL line in docs/backends-redis.md (ACL SETUSER …)", server, strings.Join(names, ", "), l.prefix))
	default:
		d.Facts = append(d.Facts, "the ACL user may run every command cronlock sends on "+l.prefix+"*")
	}
	info, _ := r[2].(string)
	switch pol, maxmem := memoryPolicy(info); {
	case maxmem == "":
		d.Problems = append(d.Problems, fmt.Sprintf("%s did not let cronlock read INFO memory (%s), so runs cannot tell whether it evicts locks; add +info to the ACL user", server, strings.TrimSpace(info)))
	case maxmem != "0" && pol != "noeviction" && l.allowEviction:
		d.Facts = append(d.Facts, fmt.Sprintf("the server can evict keys (maxmemory-policy %s), allowed by CRONLOCK_ALLOW_EVICTION", pol))
	case maxmem != "0" && pol != "noeviction":
		d.Problems = append(d.Problems, fmt.Sprintf("%s can evict keys (maxmemory-policy %s, maxmemory %s): an evicted lock lets two hosts run the job at once, so runs refuse it; set maxmemory-policy noeviction on the server (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
			server, pol, humanMaxMemory(maxmem)))
	default:
		d.Facts = append(d.Facts, "the server never evicts keys (maxmemory-policy "+pol+", maxmemory "+maxmem+")")
	}
	return d
}

// memoryPolicy reads maxmemory_policy and maxmemory from INFO memory's text; maxmem is
// "" when the text is not INFO's (an error).
func memoryPolicy(info string) (policy, maxmem string) {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "maxmemory:"); ok {
			maxmem = v
		} else if v, ok := strings.CutPrefix(line, "maxmemory_policy:"); ok {
			policy = v
		}
	}
	return policy, maxmem
}

// humanMaxMemory is INFO's maxmemory in Redis's own units.
func humanMaxMemory(v string) string {
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return humanBytes(n)
	}
	return v
}

// roundSkew is a skew as precise as it can be measured: milliseconds, or seconds
// beyond ten of them.
func roundSkew(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func aheadBehind(skew time.Duration) string {
	if skew < 0 {
		return "behind"
	}
	return "ahead of"
}

// toInt reads an integer reply element: TIME's are strings, Lua numbers int64.
func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// RedactURL returns raw with any password hidden, as every message shows a Redis URL.
func RedactURL(raw string) string { return conn.RedactURL(raw) }

// URLHasPassword reports whether raw carries a password in its user info: one that
// RedactURL would hide.
func URLHasPassword(raw string) bool { return conn.URLHasPassword(raw) }
