package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cronlock/lockrun"
)

// EvictionError is returned by Acquire when the Redis server can evict keys (a maxmemory
// with a policy other than noeviction) and the user did not allow it: an evicted lock is a
// lost lock, and another host would run the job beside its holder without either knowing.
type EvictionError struct {
	Server    string // "redis 127.0.0.1:6379"
	Policy    string // maxmemory-policy, e.g. volatile-lru
	MaxMemory uint64 // bytes
}

// Refusal marks the server's refusal (lockrun.IsRefusal).
func (e *EvictionError) Refusal() {}

func (e *EvictionError) Error() string {
	return fmt.Sprintf("%s can evict keys (maxmemory-policy %s, maxmemory %s): an evicted lock lets two hosts run the job at once; set maxmemory-policy noeviction on the server, or CRONLOCK_ALLOW_EVICTION=yes (--allow-eviction) to run anyway",
		e.Server, e.Policy, humanBytes(e.MaxMemory))
}

// FenceError is returned by Acquire when the key's fencing counter cannot give a token
// larger than every one before it: it holds something that is not a decimal integer, or
// it is at 2^64−1, the largest token CRONLOCK_FENCING_TOKEN carries. No lock is taken.
type FenceError struct {
	Server  string
	Counter string // the counter's Redis key
	Value   string // what it holds (its first 64 bytes)
	Max     bool   // the counter is at or past 2^64−1
}

// Refusal marks the server's refusal (lockrun.IsRefusal).
func (e *FenceError) Refusal() {}

func (e *FenceError) Error() string {
	if e.Max {
		return fmt.Sprintf("the fencing counter %s on %s is at %s, and no larger token fits in CRONLOCK_FENCING_TOKEN (at most 2^64-1); have the jobs that compare tokens forget their stored token, then delete the counter (DEL %s)",
			e.Counter, e.Server, e.Value, e.Counter)
	}
	return fmt.Sprintf("the fencing counter %s on %s holds %q, not a decimal integer, so no token can be proven larger than the last; set it to the last token handed out (SET %s TOKEN), or delete it if no token ever exceeded the Redis clock in microseconds",
		e.Counter, e.Server, e.Value, e.Counter)
}

// EvictionCheckError is passed to Request.Warn when the acquire could not read the
// server's eviction policy (an ACL without +info): the lock was taken unchecked.
type EvictionCheckError struct {
	Server string
	Reply  string // the error INFO gave inside the acquire script
}

func (e *EvictionCheckError) Error() string {
	return fmt.Sprintf("%s did not let cronlock read INFO memory (%s), so it cannot tell whether the server evicts locks; add +info to the ACL user (see docs/backends-redis.md), or set CRONLOCK_ALLOW_EVICTION=yes to skip the check",
		e.Server, strings.TrimSpace(e.Reply))
}

// humanBytes is n in the unit Redis's own maxmemory_human uses.
func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dgb", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dmb", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dkb", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// allowArg is acquire.lua's ARGV[7].
func (l *Locker) allowArg() string {
	if l.allowEviction {
		return "1"
	}
	return "0"
}

// acquireReply decodes acquire.lua's reply (see its header). A lease whose token cannot be
// read is released at once: a lock nobody can use must not block the fleet for a TTL.
func (l *Locker) acquireReply(ctx context.Context, req lockrun.Request, token string, sent time.Duration, res any) (*redisLease, *lockrun.Holder, error) {
	server := l.target.Server()
	r, ok := res.([]any)
	if !ok || len(r) < 2 {
		return nil, nil, fmt.Errorf("take lock %s: unexpected reply %v from %s", req.Key, res, server)
	}
	code, _ := r[0].(int64)
	switch code {
	case 1:
		s, _ := r[1].(string)
		fence, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
			l.releaseEval(rctx, req.Key, token, releaseArgs{runID: req.RunID, giveBack: !req.Tick.IsZero()}) // best effort
			cancel()
			return nil, nil, fmt.Errorf("take lock %s: %s sent the fencing token %q, not a number below 2^64; the lock was let go", req.Key, server, s)
		}
		if len(r) > 2 {
			if w, _ := r[2].(string); w != "" && req.Warn != nil {
				req.Warn(&EvictionCheckError{Server: server, Reply: w})
			}
		}
		var acquired string
		if len(r) > 3 {
			acquired, _ = r[3].(string)
		}
		lease := &redisLease{l: l, key: req.Key, token: token, ttl: req.TTL, minHold: req.MinHold, fence: fence, sent: sent,
			replied: lockrun.ClockOr(l.now)(), runID: req.RunID, ticked: !req.Tick.IsZero(), acquiredUS: acquired}
		if len(r) > 4 {
			if e, _ := r[4].(string); e != "" {
				lease.claimErr = &recordRefusedError{key: req.Key, server: server, reply: e}
			}
		}
		if len(r) > 5 {
			lease.marks = l.claimMarks(req, r[5])
			lease.attempt, lease.takeoverOf = lease.marks.Attempt, lease.marks.TakeoverOf
		}
		return lease, nil, nil
	case 7: // a standby's slot: the tick's run may still be running
		return nil, nil, standbyWait(req, r)
	case 8:
		e := &lockrun.StandbyEndError{Key: req.Key}
		if len(r) >= 6 {
			e.Why, _ = r[1].(string)
			e.Status, _ = r[2].(string)
			e.Node, _ = r[3].(string)
			e.RunID, _ = r[4].(string)
			at, _ := r[5].(string)
			e.Attempt, _ = strconv.Atoi(at)
		}
		return nil, nil, e
	case 2:
		raw, _ := r[1].(string)
		return nil, nil, lockrun.TickErrorOf(req, raw)
	case 3: // ClaimMissed: the tick is this run's
		if len(r) > 2 {
			if e, _ := r[2].(string); e != "" {
				l.missedErr.Store(&recordRefusedError{key: req.Key, server: server, reply: e})
			}
		}
		return nil, nil, nil
	case 9:
		v, _ := r[1].(string)
		e := &lockrun.SuspendedError{Key: req.Key, Suspension: lockrun.DecodeSuspension([]byte(v))}
		if len(r) > 2 {
			e.RecordErr, _ = r[2].(string)
		}
		return nil, nil, e
	case 4:
		s, _ := r[1].(string)
		ms, _ := strconv.ParseInt(s, 10, 64)
		return nil, nil, &lockrun.EarlyError{Key: req.Key, Early: time.Duration(ms) * time.Millisecond}
	case 5:
		s, _ := r[1].(string)
		ms, _ := strconv.ParseInt(s, 10, 64)
		if len(r) > 2 {
			l.claimMarks(req, r[2])
		}
		return nil, nil, &lockrun.MissedError{Key: req.Key, Late: time.Duration(ms) * time.Millisecond}
	case 0:
		value, _ := r[1].(string)
		var pttl int64
		if len(r) > 2 {
			pttl, _ = r[2].(int64)
		}
		return nil, parseHolder(value, pttl), nil
	case -1:
		if len(r) >= 4 {
			what, _ := r[1].(string)
			a, _ := r[2].(string)
			b, _ := r[3].(string)
			switch what {
			case "evict":
				maxmem, _ := strconv.ParseUint(b, 10, 64)
				return nil, nil, &EvictionError{Server: server, Policy: a, MaxMemory: maxmem}
			case "fence":
				return nil, nil, &FenceError{Server: server, Counter: l.fenceKey(req.Key), Value: b, Max: a == "max"}
			case "skew":
				skew, _ := strconv.ParseInt(a, 10, 64)
				maxMS, _ := strconv.ParseInt(b, 10, 64)
				return nil, nil, &lockrun.SkewError{Key: req.Key, Server: server, Skew: time.Duration(skew) * time.Millisecond, Max: time.Duration(maxMS) * time.Millisecond}
			}
		}
	}
	return nil, nil, fmt.Errorf("take lock %s: unexpected reply %v from %s", req.Key, res, server)
}

// claimMarks reads the marks acquire.lua set on a claim, and says through req.Warn what
// the run must tell: a data loss, a schedule that flipped back.
func (l *Locker) claimMarks(req lockrun.Request, v any) lockrun.FleetEntry {
	// nf and nt are decimal strings in marks: cjson would write a µs number as 1.8e+15.
	var j struct {
		SC string `json:"sc"`
		FL bool   `json:"fl"`
		NF string `json:"nf"`
		NT string `json:"nt"`
		DL bool   `json:"dl"`
		CH string `json:"ch"`
		AT int    `json:"at"`
		TO string `json:"to"`
	}
	var m lockrun.FleetEntry
	s, _ := v.(string)
	if s == "" || json.Unmarshal([]byte(s), &j) != nil {
		return m
	}
	m.ScheduleWas, m.Flip, m.DataLoss, m.CmdHash = j.SC, j.FL, j.DL, j.CH
	m.Attempt, m.TakeoverOf = j.AT, j.TO
	m.NeverFiredFrom, _ = strconv.ParseInt(j.NF, 10, 64)
	m.NeverFiredTo, _ = strconv.ParseInt(j.NT, 10, 64)
	if req.Warn != nil {
		if m.DataLoss {
			req.Warn(&lockrun.DataLossError{Key: req.Key, Backend: l.Describe(), What: "its fencing counter " + l.fenceKey(req.Key),
				Cause: "a restart without persistence, FLUSHALL or an eviction", Marked: true})
		}
		if m.Flip {
			req.Warn(&lockrun.ScheduleFlipError{Key: req.Key, Was: m.ScheduleWas, Now: req.Canonical})
		}
	}
	return m
}

// Eviction reads the server's memory settings and returns its maxmemory-policy when it
// can evict keys (a maxmemory and a policy other than noeviction), "" when it cannot. It
// costs one round trip; Acquire makes the same check inside its script instead. It needs
// the INFO command (+info in an ACL).
func (l *Locker) Eviction(ctx context.Context) (policy string, err error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	info, err := l.c.Info(octx, "memory").Result()
	if err != nil {
		return "", l.userError("read INFO memory", err)
	}
	var maxmem, pol string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "maxmemory:"); ok {
			maxmem = v
		} else if v, ok := strings.CutPrefix(line, "maxmemory_policy:"); ok {
			pol = v
		}
	}
	if maxmem == "" || maxmem == "0" || pol == "" || pol == "noeviction" {
		return "", nil
	}
	return pol, nil
}

// standbyWait reads acquire.lua's {7, pttl, value, at, run_id, node}: the tick's run may still be
// running and this run holds a standby slot.
func standbyWait(req lockrun.Request, r []any) *lockrun.StandbyWaitError {
	e := &lockrun.StandbyWaitError{Key: req.Key, PTTL: -1}
	if len(r) < 4 {
		return e
	}
	pttl, _ := r[1].(int64)
	value, _ := r[2].(string)
	at, _ := r[3].(string)
	e.Attempt, _ = strconv.Atoi(at)
	if len(r) >= 6 {
		e.RunID, _ = r[4].(string)
		e.Node, _ = r[5].(string)
	}
	if value != "" {
		e.Holder = parseHolder(value, pttl)
		e.PTTL = time.Duration(pttl) * time.Millisecond // -1 ms: no expiry, no lease end to time
	}
	return e
}
