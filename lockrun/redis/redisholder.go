package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
)

// parseHolder reads the holder from a lock value. A value cronlock did not write still
// counts as a holder (the key is taken), with what can be said about it.
func parseHolder(value string, pttl int64) *lockrun.Holder {
	h := &lockrun.Holder{NoExpiry: pttl == -1}
	if pttl > 0 {
		// A PTTL past 292 years (PEXPIRE by hand) would overflow a Duration into the past.
		h.TTLLeft = time.Duration(min(pttl, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
	}
	var v lockrun.HolderValue
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		h.Node = "(unknown: the lock key does not hold cronlock data)"
		return h
	}
	h.Node, h.PID, h.RunID, h.Revoked = v.Node, v.PID, v.RunID, v.RevokedUS != ""
	// A time outside 1970–9999 is not one cronlock wrote, and would make status --json
	// fail (encoding/json refuses years past 9999): leave it unknown (zero).
	if ms, err := strconv.ParseInt(v.SinceMS, 10, 64); err == nil && lockrun.PlausibleTime(time.UnixMilli(ms)) {
		h.Since = time.UnixMilli(ms)
	}
	if us, err := strconv.ParseInt(v.RenewedUS, 10, 64); err == nil && lockrun.PlausibleTime(time.UnixMicro(us)) {
		h.Renewed = time.UnixMicro(us)
	}
	h.FencingToken, _ = strconv.ParseUint(v.Fence, 10, 64)
	return h
}

// Inspect returns the holder of key, or nil when it is free.
func (l *Locker) Inspect(ctx context.Context, key string) (*lockrun.Holder, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	hs, err := l.readHolders(ctx, []string{l.lockKey(key)})
	if err != nil {
		return nil, l.userError("read lock "+key, err)
	}
	return hs[0], nil
}

// readHolders reads the holders of lock keys in one round trip; nil for a free key.
func (l *Locker) readHolders(ctx context.Context, lockKeys []string) ([]*lockrun.Holder, error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	gets := make([]*redis.StringCmd, len(lockKeys))
	pttls := make([]*redis.DurationCmd, len(lockKeys))
	_, err := l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range lockKeys {
			gets[i] = p.Get(octx, k)
			pttls[i] = p.PTTL(octx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]*lockrun.Holder, len(lockKeys))
	for i := range lockKeys {
		v, err := gets[i].Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// go-redis hands PTTL's -1 (no TTL) and -2 (gone since the GET) back as -1ns and
		// -2ns, not milliseconds.
		ms := pttls[i].Val().Milliseconds()
		if d := pttls[i].Val(); d < 0 {
			ms = int64(d)
		}
		out[i] = parseHolder(v, ms)
	}
	return out, nil
}

// List returns every lock held right now under the prefix, by key. It walks the keyspace
// with SCAN (never KEYS, which would block the server).
func (l *Locker) List(ctx context.Context) (map[string]lockrun.Holder, error) {
	out := map[string]lockrun.Holder{}
	err := l.scanNames(ctx, []string{"lock"}, "list locks", func(names []string) error {
		lockKeys := make([]string, len(names))
		for i, n := range names {
			lockKeys[i] = l.lockKey(n)
		}
		hs, err := l.readHolders(ctx, lockKeys)
		if err != nil {
			return l.userError("list locks", err)
		}
		for i, h := range hs {
			if h != nil {
				out[names[i]] = *h
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanNames walks the keyspace for the keys <prefix>{KEY}:kind with SCAN MATCH, and hands
// each page's KEYs to page, none twice (SCAN may return a key again) and none that is not
// a valid key. Each SCAN call has its own operation time-out: a walk over millions of
// unrelated keys takes as long as it takes, while a stuck server is still noticed.
func (l *Locker) scanNames(ctx context.Context, kinds []string, what string, page func(names []string) error) error {
	seen := map[string]bool{}
	match := l.prefix + "{*}:*"
	if len(kinds) == 1 {
		match = l.prefix + "{*}:" + kinds[0]
	}
	nodes, err := l.srv.ScanNodes(ctx)
	if err != nil {
		return l.userError(what, err)
	}
	for _, node := range nodes {
		if err := l.scanNode(ctx, node, match, kinds, what, seen, page); err != nil {
			return err
		}
	}
	return nil
}

// scanNode is scanNames on one server.
func (l *Locker) scanNode(ctx context.Context, node conn.Scanner, match string, kinds []string, what string, seen map[string]bool, page func(names []string) error) error {
	var cursor uint64
	for {
		octx, cancel := context.WithTimeout(ctx, l.timeout)
		keys, next, err := node.Scan(octx, cursor, match, 1000).Result()
		cancel()
		if err != nil {
			if c, ok := node.(*redis.Client); ok && l.target.Scheme == conn.SchemeCluster {
				// Which of the cluster's masters failed: the URL names others.
				err = fmt.Errorf("the master %s: %w", c.Options().Addr, err)
			}
			return l.userError(what, err)
		}
		var names []string
		for _, k := range keys {
			for _, kind := range kinds {
				if name, ok := l.keyName(k, kind); ok && !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
		if len(names) > 0 {
			if err := page(names); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// keyName returns KEY from "<prefix>{KEY}:kind".
func (l *Locker) keyName(redisKey, kind string) (string, bool) {
	s, ok := strings.CutPrefix(redisKey, l.prefix+"{")
	if !ok {
		return "", false
	}
	s, ok = strings.CutSuffix(s, "}:"+kind)
	if !ok || lockrun.ValidKey(s) != nil {
		return "", false
	}
	return s, true
}

// Unlock removes key whatever its token, reading the holder and deleting the lock in one
// script, and returns the holder it removed (nil, nil when the key is free). Without force
// it refuses a lock whose holder confirmed it (acquired or renewed) within its TTL, with an
// error that names the holder and says to use --force. With force, a live holder's lock
// is revoked rather than deleted (the holder's Revoked is set): it is kept until its lease
// ends, so that no other run starts while the holder's job runs on to its next renewal.
func (l *Locker) Unlock(ctx context.Context, key string, force bool) (*lockrun.Holder, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	f := "0"
	if force {
		f = "1"
	}
	res, unknown, err := l.eval(ctx, unlockScript(), []string{l.lockKey(key)}, f, l.channel(key))
	if err != nil {
		return nil, l.userError("unlock "+key, err)
	}
	r, ok := res.([]any)
	if !ok || len(r) == 0 {
		return nil, fmt.Errorf("unlock %s: unexpected reply %v from %s", key, res, l.target.Server())
	}
	code, _ := r[0].(int64)
	if code == 0 && unknown {
		return nil, fmt.Errorf("%s is not held on %s now: %w", key, l.Describe(), lockrun.ErrUnlockReplyLost)
	}
	if code == 0 {
		return nil, nil
	}
	// Anything but these is not unlock.lua speaking (a proxy or a server that is not
	// Redis): never report a removal that did not happen.
	if code < -1 || code > 2 || len(r) < 3 {
		return nil, fmt.Errorf("unlock %s: unexpected reply %v from %s; is it a Redis server?", key, res, l.target.Server())
	}
	v, _ := r[1].(string)
	pttl, _ := r[2].(int64)
	h := parseHolder(v, pttl)
	if code == 2 {
		h.Revoked = true
	}
	if code < 0 && json.Unmarshal([]byte(v), new(lockrun.HolderValue)) != nil {
		if len(v) > 60 {
			v = v[:60] + "..."
		}
		return nil, fmt.Errorf("%s holds a value cronlock did not write (%q), so no cronlock run holds it: check what wrote it, then use --force to remove it", key, v)
	}
	if code < 0 {
		ago := "recently"
		if !h.Renewed.IsZero() {
			ago = fmt.Sprintf("%s ago", time.Since(h.Renewed).Round(time.Second))
		}
		return nil, fmt.Errorf("%s is held by %s, renewed %s: it looks alive; stop that run, or use --force to remove the lock anyway", key, h, ago)
	}
	return h, nil
}
