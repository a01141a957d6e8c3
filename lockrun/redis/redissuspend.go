package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
)

// The key's suspension (cronlock suspend): <prefix>{KEY}:suspend, in the lock's slot, so
// that acquire.lua reads it in the same call that claims the tick and the lock.

var (
	_ lockrun.Suspender        = (*Locker)(nil)
	_ lockrun.BatchSuspender   = (*Locker)(nil)
	_ lockrun.SuspensionLister = (*Locker)(nil)
)

func (l *Locker) suspendKey(key string) string { return l.prefix + "{" + key + "}:suspend" }

// Suspend pauses key on every host until s.Until (zero: until Resume). The value expires
// at s.Until on the server's clock, so --for and --until lift it by themselves.
func (l *Locker) Suspend(ctx context.Context, key string, s *lockrun.Suspension) error {
	if err := lockrun.ValidKey(key); err != nil {
		return err
	}
	until := ""
	if !s.Until.IsZero() {
		until = strconv.FormatInt(s.Until.UnixMicro(), 10)
	}
	res, _, err := l.eval(ctx, suspendScript(), []string{l.suspendKey(key)}, "set", string(lockrun.EncodeSuspension(s)), until)
	if err != nil {
		return l.userError("suspend "+key, err)
	}
	if r, _ := res.([]any); len(r) > 1 {
		if code, _ := r[0].(int64); code < 0 {
			return fmt.Errorf("suspend %s: --until %s has already passed on %s's clock", key, s.Until.UTC().Format("2006-01-02T15:04:05Z"), l.Describe())
		}
	}
	return nil
}

// Resume lifts key's suspension and returns it, or *lockrun.NotSuspendedError.
func (l *Locker) Resume(ctx context.Context, key string) (*lockrun.Suspension, error) {
	return l.suspension(ctx, key, "del")
}

// ReadSuspension returns key's suspension in force, nil when there is none.
func (l *Locker) ReadSuspension(ctx context.Context, key string) (*lockrun.Suspension, error) {
	s, err := l.suspension(ctx, key, "get")
	if _, ok := err.(*lockrun.NotSuspendedError); ok {
		return nil, nil
	}
	return s, err
}

func (l *Locker) suspension(ctx context.Context, key, mode string) (*lockrun.Suspension, error) {
	if err := lockrun.ValidKey(key); err != nil {
		return nil, err
	}
	keys := []string{l.suspendKey(key)}
	if mode == "del" {
		keys = append(keys, l.tickKey(key))
	}
	res, _, err := l.eval(ctx, suspendScript(), keys, mode)
	if err != nil {
		return nil, l.userError("read the suspension of "+key, err)
	}
	r, _ := res.([]any)
	if len(r) < 2 {
		return nil, fmt.Errorf("read the suspension of %s: unexpected reply %v from %s", key, res, l.Describe())
	}
	if code, _ := r[0].(int64); code != 1 {
		return nil, &lockrun.NotSuspendedError{Key: key, Backend: l.Describe()}
	}
	v, _ := r[1].(string)
	return lockrun.DecodeSuspension([]byte(v)), nil
}

// Suspensions reads the suspensions of keys in one pipeline (split by slot on a Cluster),
// within one operation time-out. An expired suspension is gone from the server; one whose
// until has passed on this host's clock but not yet there is left out too.
func (l *Locker) Suspensions(ctx context.Context, keys []string) (map[string]*lockrun.Suspension, error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	gets := make([]*redis.StringCmd, len(keys))
	l.c.Pipelined(octx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i] = p.Get(octx, l.suspendKey(k))
		}
		return nil
	})
	out := map[string]*lockrun.Suspension{}
	now := time.Now()
	for i, k := range keys {
		v, err := gets[i].Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, l.userError("read the suspensions", err)
		}
		if s := lockrun.DecodeSuspension([]byte(v)); !s.Lifted(now) {
			out[k] = s
		}
	}
	return out, nil
}

// AllSuspensions finds every suspension under the prefix with SCAN (never KEYS) and
// reads each page of them in one pipeline.
func (l *Locker) AllSuspensions(ctx context.Context) (map[string]*lockrun.Suspension, error) {
	out := map[string]*lockrun.Suspension{}
	err := l.scanNames(ctx, []string{"suspend"}, "list the suspensions", func(names []string) error {
		got, err := l.Suspensions(ctx, names)
		maps.Copy(out, got)
		return err
	})
	return out, err
}
