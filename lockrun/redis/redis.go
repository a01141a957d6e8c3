// Package redis is cronlock's lock backend for a fleet on Redis: plain, TLS, a unix
// socket, Sentinel or Cluster. A lock is a key with a lease that its holder renews and a
// fencing token that keeps rising across restarts; the schedule's tick is claimed and the
// fleet's record written in the same Lua scripts (lua/*.lua) as the lock, one round trip
// each. --min-replicas waits for replicas to confirm every write. Reaching the server
// (the URL, dials, the handshake, Sentinel and Cluster topology) is package conn's.
//
// It answers the lockrun interfaces (Locker, Lease, FleetStore, Expiring) and nothing
// else. It is given its settings as Options and reads none itself; its errors name the
// flag or setting a user would change, since they reach the user as they are. It knows
// nothing of child processes or the local history.
package redis

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
	"cronlock/runstatus"
)

// Redis layout of one lock KEY (the hash tag puts all of them in one Cluster slot):
//
//	<prefix>{KEY}:lock      string, PX = the lease: a JSON object with the token and the
//	                        holder (see HolderValue); present while the lock is held
//	<prefix>{KEY}:fence     string, no TTL: the last fencing token handed out
//	<prefix>{KEY}:released  pub/sub channel: "released" is published when the lock is freed
//	<prefix>{KEY}:tick      string, 400-day TTL: a JSON object, the last schedule tick
//	                        claimed (--schedule) and by whom (see acquire.lua)
//	<prefix>{KEY}:ledger    hash, 400-day TTL: the fleet's ledger, run id -> JSON entry
//	                        (lockrun.FleetEntry), written at the claim and completed by
//	                        the release; plus the ids of the last success and failure
//	<prefix>{KEY}:order     sorted set, 400-day TTL: the ledger's run ids by claim time
//	<prefix>{KEY}:days      hash, 400-day TTL: per-day counters of the ledger's runs
//	                        (lua/ledger.lua); the three expire 400 days after the last claim
//	<prefix>{KEY}:standby   sorted set: the standbys waiting for the tick (run --standby),
//	                        run id by when its slot expires (TIME ms)
//	<prefix>keys            sorted set, 400-day TTL: the index of known keys by their last
//	                        claim (TIME s), written by acquire.lua, read by `cronlock jobs`;
//	                        on a Cluster one per slot, <prefix>{#…}:keys (redisjobs.go)
//	<prefix>{KEY}:runs      list: the record of cronlock before the ledger, read only
//	<prefix>{KEY}:ckpt      hash, 400-day TTL: the newest checkpoint (lua/checkpoint.lua)
//	<prefix>{KEY}:ckpt:ok   hash, 400-day TTL: the newest checkpoint of a succeeded run
//	<prefix>{KEY}:suspend   string, expires at its --until: the key's suspension
//	                        (cronlock suspend; redissuspend.go), read by acquire.lua
//
// Holder metadata lives in the lock's own value, not in a sibling key, so that it expires
// with the lock in the same instant and Inspect reads both in one GET.

//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts are sent by their SHA1, the body only when Redis lacks them (redisscript.go).
// Each is prepared on first use: a run on the local backend never needs them.
var (
	acquireScript = sync.OnceValue(func() string { return loadScript("ledger.lua") + "\n" + loadScript("acquire.lua") })
	renewScript   = sync.OnceValue(func() string { return loadScript("renew.lua") })
	releaseScript = sync.OnceValue(func() string { return loadScript("ledger.lua") + "\n" + loadScript("release.lua") })
	unlockScript  = sync.OnceValue(func() string { return loadScript("unlock.lua") })
	fleetScript   = sync.OnceValue(func() string { return loadScript("ledger.lua") + "\n" + loadScript("fleet.lua") })
	ckptScript    = sync.OnceValue(func() string { return loadScript("checkpoint.lua") })
	suspendScript = sync.OnceValue(func() string { return loadScript("suspend.lua") })
)

// loadScript reads an embedded script and drops its comment lines and indentation, which
// would otherwise travel to Redis with every call.
func loadScript(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// Options configures New.
type Options struct {
	URL      string        // redis://[user:pass@]host:port/db, rediss://… (TLS), unix:///path[?db=N], redis-sentinel://…, redis-cluster://… (conn.ParseURL)
	Password string        // from --redis-password-file; overrides the URL's password when non-empty
	Timeout  time.Duration // deadline of one Redis operation (dial, read, write, script); default 2s if 0
	Prefix   string        // key namespace, default "cronlock:"
	// AllowEviction lets Acquire take a lock on a server that can evict keys; by default
	// such a server is refused with *EvictionError.
	AllowEviction bool
	// FleetKeep is how many entries the fleet's record keeps per key
	// (CRONLOCK_FLEET_KEEP); 0 = DefaultFleetKeep.
	FleetKeep int
	// MinReplicas is how many replicas must acknowledge each acquire and renewal
	// (--min-replicas); 0 = none are waited for. See redisreplicas.go.
	MinReplicas int
	// SentinelPassword authenticates to the Sentinels of a redis-sentinel:// URL
	// (CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE); "" = none.
	SentinelPassword string
	// PrevTick reads a key's schedule for the fleet's readers: the latest tick of expr in
	// zone tz at or before a time, nil when expr cannot be read. With it, Fleet marks a
	// roll-out's duplicates (lockrun.MarkDuplicates); nil = none are marked. cmd gives it
	// the schedule package's (this package does not read schedules).
	PrevTick func(expr, tz string) func(time.Time) time.Time
}

// Locker is the Redis backend: a lease per lock, renewed by its holder, with a
// fencing token that keeps rising across Redis restarts. It is safe for concurrent use.
// It talks to one Redis server (or a Cluster through the hash-tagged keys' single slot);
// it does not implement Redlock across several independent servers.
type Locker struct {
	// c sends the commands: srv, or in tests a wrapper of it that injects faults.
	c conn.Commands
	// srv is the client of the URL's server, Sentinels or Cluster: where a command goes.
	srv     *conn.Client
	target  conn.Target
	timeout time.Duration
	prefix  string
	// allowEviction skips the eviction check of the acquire script.
	allowEviction bool
	keep          int                                             // entries of the fleet's record kept per key; 0 = DefaultFleetKeep
	minReplicas   int                                             // replicas that must acknowledge acquire and renewal (WAIT)
	prevTick      func(expr, tz string) func(time.Time) time.Time // Options.PrevTick

	// poll overrides the waiters' polling period (default min(1s, ttl/3)); tests raise it
	// to prove that a release wakes a waiter through pub/sub alone.
	poll time.Duration
	// now is the clock of Lease.Sent; nil means Boottime. Tests inject a fake one.
	now func() time.Duration
	// noIndex leaves the index of known keys out of the acquire script (redisjobs.go):
	// a benchmark measures what the index costs a claim.
	noIndex bool
	// missedErr is why the last ClaimMissed could not write its ledger entry.
	missedErr atomic.Pointer[recordRefusedError]
}

var (
	_ lockrun.FleetStore  = (*Locker)(nil)
	_ lockrun.Expiring    = (*Locker)(nil)
	_ lockrun.ServerClock = (*Locker)(nil)
)

// New parses o.URL and prepares a client; it does not connect (the first
// Acquire does, so a run costs no extra round trip). Its errors never contain the password.
// It silences go-redis's process-wide logger.
func New(o Options) (*Locker, error) {
	t, err := conn.ParseURL(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Password != "" {
		t.Password = o.Password
	}
	if err := lockrun.ServerDefaults(&o.Timeout, &o.Prefix); err != nil {
		return nil, err
	}
	c := conn.New(t, conn.Options{Timeout: o.Timeout, SentinelPassword: o.SentinelPassword})
	return &Locker{c: c, srv: c, target: t, timeout: o.Timeout, prefix: o.Prefix, allowEviction: o.AllowEviction, keep: o.FleetKeep, minReplicas: o.MinReplicas, prevTick: o.PrevTick}, nil
}

// Describe names the backend without secrets: "redis 127.0.0.1:6379/0".
// Name names the issuer of this backend's fencing tokens: microseconds of Redis TIME.
func (l *Locker) Name() string { return "redis" }

// HasServerClock: the acquire script judges the tick and --start-deadline on TIME.
func (l *Locker) HasServerClock() bool { return true }

// Prefix is the namespace of every key the locker writes (--prefix): with Describe, it
// names where a key's data lives.
func (l *Locker) Prefix() string { return l.prefix }

// FreedBy says that the lock's key expires by itself.
func (l *Locker) FreedBy(ttl time.Duration) string {
	return fmt.Sprintf(" (the Redis key expires by itself within --ttl %v)", ttl)
}

func (l *Locker) Describe() string { return l.target.Describe() }

// Close closes the client's connections and ends dials still retrying.
func (l *Locker) Close() error { return l.c.Close() }

func (l *Locker) lockKey(key string) string  { return l.prefix + "{" + key + "}:lock" }
func (l *Locker) fenceKey(key string) string { return l.prefix + "{" + key + "}:fence" }
func (l *Locker) channel(key string) string  { return l.prefix + "{" + key + "}:released" }
func (l *Locker) tickKey(key string) string  { return l.prefix + "{" + key + "}:tick" }

// standbyKey is the sorted set of a tick's standby slots: run id by slot expiry (ms).
func (l *Locker) standbyKey(key string) string { return l.prefix + "{" + key + "}:standby" }

// newToken returns 128 random bits from crypto/rand, in hex.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a lock token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// durMS is d in whole milliseconds, rounded up so that a lease is never shorter than asked.
func durMS(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Acquire takes req.Key. With req.Wait > 0 it waits for the holder to let go, woken by the
// release's PUBLISH and also polling every min(1s, ttl/3) (pub/sub loses messages, and an
// expiry publishes nothing). It returns *HeldError when the lock stays held, and an error
// that says what to check when Redis cannot be asked. When the outcome of the last attempt
// is unknown (no reply), it first tries to release the lock it may have taken.
func (l *Locker) Acquire(ctx context.Context, req lockrun.Request) (lockrun.Lease, error) {
	if err := lockrun.ValidKey(req.Key); err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("the lock TTL must be positive, not %s (--ttl)", req.TTL)
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	if req.Wait <= 0 {
		lease, held, err := l.acquireOnce(ctx, req, token, "")
		if err != nil {
			return nil, err
		}
		if held != nil {
			return nil, &lockrun.HeldError{Key: req.Key, Holder: held}
		}
		return lease, nil
	}
	return l.acquireWait(ctx, req, token)
}

// acquireOnce runs the acquire script for token, retrying network errors within one
// operation time-out. The same token makes the retry safe: the script reports success
// when the lock already holds it. It returns the lease, or the holder when the lock is held
// by another token. When no reply came and the retries ran out, it releases the lock in
// case the script did run, so the fleet is not blocked for a TTL.
func (l *Locker) acquireOnce(ctx context.Context, req lockrun.Request, token, mode string) (*redisLease, *lockrun.Holder, error) {
	keys := []string{l.lockKey(req.Key), l.fenceKey(req.Key), l.tickKey(req.Key), l.ledgerKey(req.Key), l.orderKey(req.Key), l.daysKey(req.Key), l.standbyKey(req.Key), l.suspendKey(req.Key)}
	// The index of known keys is always the last of KEYS, named by ARGV[27].
	indexed := ""
	if !l.noIndex {
		keys, indexed = append(keys, l.indexKey(req.Key)), req.Key
	}
	args := []any{token, durMS(req.TTL), req.Node, req.PID, req.RunID, req.WallNow().UnixMilli(), l.allowArg()}
	tick := ""
	if !req.Tick.IsZero() {
		tick = strconv.FormatInt(req.Tick.UnixMicro(), 10)
	}
	// With --min-replicas the tick's claim is pending until the replicas acknowledged it
	// (or it was given back): the WAIT takes up to one operation time-out, and the
	// give-back's release another.
	pendingMS := int64(0)
	if l.minReplicas > 0 && mode == "" && tick != "" {
		pendingMS = durMS(2 * l.timeout)
	}
	known, prev := "", ""
	if req.Known {
		known = "1"
	}
	if !req.PrevTick.IsZero() {
		prev = strconv.FormatInt(req.PrevTick.UnixMicro(), 10)
	}
	args = append(args, tick, durMS(req.MaxSkew), req.Schedule, req.Zone, mode, claimEntry(req, mode), l.fleetKeep(), pendingMS,
		durMS(req.StartDeadline), known, prev, req.Canonical, req.CmdHash)
	sb := req.Standby
	nt := ""
	if sb.NonTakeable {
		nt = "1"
	}
	args = append(args, sb.Mode, sb.MaxAttempts, sb.Slots, durMS(sb.SlotTTL), sb.LostRun, nt, indexed)
	if req.OnTry != nil {
		req.OnTry()
	}
	var (
		sent    time.Duration
		res     any
		acks    acked
		unknown bool
		err     error
	)
	// A pending claim of this tick by another run (reply 6) is waited for, within a bound
	// of this run's own: it is either confirmed (then this run skips) or given back (then
	// this run may claim the tick), never guessed.
	for waited := time.Duration(0); ; {
		// Read before the first send: when a retry inside eval finds the lock already
		// ours, its PX was set by the attempt sent here.
		sent = lockrun.ClockOr(l.now)()
		res, acks, unknown, err = l.evalAcked(ctx, mode == "", acquireScript(), keys, args...)
		left, raw, pending := pendingReply(res)
		if err != nil || !pending {
			break
		}
		if waited >= 4*l.timeout {
			return nil, nil, lockrun.TickErrorOf(req, raw) // still pending: the claimer's run goes on
		}
		d := min(left+10*time.Millisecond, 4*l.timeout-waited)
		select {
		case <-ctx.Done():
			return nil, nil, l.userError("take lock "+req.Key, ctx.Err())
		case <-time.After(d):
		}
		waited += d
	}
	if err != nil {
		// A release cannot reach a server that no dial reaches either. A refused WAIT
		// came after the script had taken the lock.
		if (unknown || scriptRan(err)) && l.unreachable() == nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
			uerr := l.userError("take lock "+req.Key, err)
			// The claim's entry, if the script ran, is completed as this run's error.
			var entry string
			if mode == "" {
				entry = lockrun.EncodeFleetEntry(&lockrun.RunRecord{RunID: req.RunID, Node: req.Node, Status: runstatus.Error,
					Exit: exitError, Tick: req.Tick, Tries: 1, Error: uerr.Error()}, 0)
			}
			l.releaseEval(rctx, req.Key, token, releaseArgs{runID: req.RunID, giveBack: !req.Tick.IsZero(), entry: entry}) // best effort, the tick too
			cancel()
			// Said after the release's try: what it learnt (a TLS port, say) names the cause.
			return nil, nil, l.userError("take lock "+req.Key, err)
		}
		return nil, nil, l.userError("take lock "+req.Key, err)
	}
	lease, held, err := l.acquireReply(ctx, req, token, sent, res)
	if lease != nil && mode == "" {
		if err := l.checkAcquireAcks(ctx, lease, acks, req.Node, req.Tick); err != nil {
			return nil, nil, err
		}
		l.checkMajority(req, acks)
	}
	return lease, held, err
}

// releaseArgs is what a release does besides letting the lock go.
type releaseArgs struct {
	minHold  time.Duration
	runID    string
	giveBack bool   // give back a tick claimed by runID (the job never started)
	entry    string // the fleet entry to write with the release ('' = none; see EncodeFleetEntry)
	startUS  string // the run's start for the entry: Redis TIME at acquire
	// sentUS is when the release was sent, on the Redis clock as measured from the
	// acquire (redisLease.sentUS; '' = unknown): a run whose lock is gone when the
	// release arrives ends there, not when a late release arrived.
	sentUS string
	// pending are earlier runs of this host whose completion never reached the server.
	pending []lockrun.PendingCompletion
	noAck   bool // send no WAIT after it, whatever --min-replicas says
}

// releaseEval runs release.lua for token.
func (l *Locker) releaseEval(ctx context.Context, key, token string, a releaseArgs) (any, error) {
	keys, args := l.releaseKeysArgs(key, token, a)
	res, _, err := l.eval(ctx, releaseScript(), keys, args...)
	return res, err
}

// releaseKeysArgs are release.lua's KEYS and ARGV (see its header).
func (l *Locker) releaseKeysArgs(key, token string, a releaseArgs) ([]string, []any) {
	keys := []string{l.lockKey(key)}
	args := []any{token, durMS(a.minHold), l.channel(key)}
	if a.giveBack || a.entry != "" || len(a.pending) > 0 {
		keys = append(keys, l.tickKey(key), l.ledgerKey(key), l.orderKey(key), l.daysKey(key))
		giveBack := ""
		if a.giveBack {
			giveBack = a.runID
		}
		args = append(args, giveBack, a.entry, l.fleetKeep(), a.startUS, a.runID, len(a.pending))
		for _, p := range a.pending {
			args = append(args, p.RunID, p.Entry, p.StartUS, p.EndUS)
		}
		args = append(args, a.sentUS)
	}
	return keys, args
}

// releaseAcked is releaseEval for a release that completes ledger entries: with
// --min-replicas, WAIT goes in the same round trip, so that a completion the replicas did
// not acknowledge (a failover may lose it) is known, and sent again.
func (l *Locker) releaseAcked(ctx context.Context, key, token string, a releaseArgs) (any, acked, error) {
	if l.minReplicas <= 0 || a.noAck || (a.entry == "" && len(a.pending) == 0) {
		res, err := l.releaseEval(ctx, key, token, a)
		return res, acked{n: -1}, err
	}
	keys, args := l.releaseKeysArgs(key, token, a)
	res, acks, _, err := l.evalAcked(ctx, false, releaseScript(), keys, args...)
	return res, acks, err
}

// ClaimMissed claims req.Tick as missed, in one acquire script that takes no lock: the
// skew is checked as for Acquire, and *TickError says the tick was already claimed.
func (l *Locker) ClaimMissed(ctx context.Context, req lockrun.Request) error {
	if req.Tick.IsZero() {
		return fmt.Errorf("claim a missed tick of %s: no tick given", req.Key)
	}
	_, _, err := l.acquireOnce(ctx, req, "", "missed")
	return err
}

// eval runs one script, retrying network errors and transient server states (LOADING,
// BUSY…) with a short back-off while the operation time-out (and ctx) allow; every script
// of this file is safe to repeat. A dial error is not retried here: the dialer already
// retried it for as long as a restart can heal it (package conn). unknown reports that a
// failed call, or an attempt before the one that succeeded, may have run anyway (it may
// have been sent, and no reply came).
func (l *Locker) eval(ctx context.Context, script string, keys []string, args ...any) (res any, unknown bool, err error) {
	return l.retry(ctx, func(octx context.Context) (any, error) {
		return evalScript(octx, l.c, script, keys, args...).Result()
	})
}

// retry runs one attempt of an idempotent operation as eval does, within one operation
// time-out; attempt gets the operation's context.
func (l *Locker) retry(ctx context.Context, attempt func(octx context.Context) (any, error)) (res any, unknown bool, err error) {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	backoff := 10 * time.Millisecond
	var moving error // the last reply that named a Cluster slot on its way (ASK, TRYAGAIN…)
	for {
		res, err = attempt(octx)
		if err == nil {
			// unknown stays true when an earlier attempt may have run: a reply then tells
			// what the repeat found, not what that attempt did.
			return res, unknown, nil
		}
		l.srv.FollowFailover(err)
		var rerr redis.Error
		if errors.As(err, &rerr) && slotMoving(rerr.Error()) {
			moving = err
		}
		switch {
		case errors.As(err, &rerr) && !transientRedisError(err):
			return nil, unknown, err // the server answered: nothing uncertain in this attempt
		case errors.As(err, &rerr):
			// A refusal that passes (LOADING, READONLY…): the script did not write.
		case isDialError(err):
			return nil, unknown, err
		case !(lockrun.IsTimeout(err) && l.unreachable() != nil):
			// Time ran out while no connection could be made: nothing was sent then.
			unknown = true
		}
		// A connection that died with the server (EOF, reset) or a server still loading
		// its data: try again while the operation has time.
		if octx.Err() != nil {
			if moving != nil && lockrun.IsTimeout(err) {
				// The time ran out during an attempt, but what kept the operation from
				// succeeding is the slot's move: say that.
				err = moving
			}
			return nil, unknown, err
		}
		if dl, ok := octx.Deadline(); ok && time.Until(dl) < backoff+5*time.Millisecond {
			return nil, unknown, err
		}
		select {
		case <-octx.Done():
			return nil, unknown, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// unreachable is the last dial error while the server cannot be reached, else nil.
func (l *Locker) unreachable() error {
	if l.srv == nil {
		return nil
	}
	return l.srv.Unreachable()
}

// pendingReply reads acquire.lua's reply {4, ms, record}: this tick's claim by another
// run is pending for ms more.
func pendingReply(res any) (left time.Duration, record string, ok bool) {
	r, _ := res.([]any)
	if len(r) < 3 {
		return 0, "", false
	}
	if code, _ := r[0].(int64); code != 6 {
		return 0, "", false
	}
	ms, _ := r[1].(string)
	n, _ := strconv.ParseInt(ms, 10, 64)
	record, _ = r[2].(string)
	return time.Duration(n) * time.Millisecond, record, true
}
