// Package etcd is cronlock's lock backend for a fleet that runs etcd v3: a key attached
// to a lease that its holder keeps alive, the key's create revision as the fencing token,
// and the tick and the fleet's record in keys beside it, written in the same
// transactions as the lock.
//
// The package needs no build tag: a program links the etcd client only if it imports
// this package, which cronlock's cmd does only in builds with the etcd tag (the client
// adds to every start of the program; BENCHMARKS.md). It is given its settings as
// Options and reads none itself; its errors name the flag or setting a user would
// change, since they reach the user as they are. It knows nothing of child processes or
// the local history.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/metadata"

	"cronlock/lockrun"
)

// etcd layout of one lock KEY, the same names as on Redis (the braces cannot occur in a
// key, so every name splits back into KEY and kind unambiguously):
//
//	<prefix>{KEY}:lock        the holder's JSON (see etcdHolder), attached to a lease of
//	                          --ttl; present while the lock is held. Its create revision
//	                          is the fencing token.
//	<prefix>{KEY}:tick        the last schedule tick claimed (lockrun.TickValue JSON)
//	<prefix>{KEY}:runs/<RUN>  the fleet's record: one key per run, RUN its UUIDv7 run id,
//	                          so that key order is start order; trimmed to the newest
//	                          FleetKeep entries (see etcdfleet.go)
//
// etcd has no server clock a client can read: times in the record are the hosts' own,
// and a --max-skew check cannot be made.

// Options configures New.
type Options struct {
	// Endpoints are http(s)://host:port URLs of the cluster's members.
	Endpoints []string
	// User and Password authenticate (etcd's user auth); empty User = none.
	User, Password string
	// CAFile verifies the servers' certificates (https); empty = the system's roots.
	// CertFile and KeyFile are a client certificate, for clusters that ask for one.
	CAFile, CertFile, KeyFile string
	// Timeout bounds one etcd operation; DefaultTimeout when 0.
	Timeout time.Duration
	// Prefix is the key namespace; DefaultPrefix when empty.
	Prefix string
	// FleetKeep is how many entries the fleet's record keeps per key; 0 = DefaultFleetKeep.
	FleetKeep int
	// PrevTick reads a key's schedule for the fleet's readers: the latest tick of expr in
	// zone tz at or before a time, nil when expr cannot be read. With it, Fleet marks a
	// roll-out's runs of one command between two ticks, one without --schedule, as
	// duplicates (as the Redis backend does).
	PrevTick func(expr, tz string) func(time.Time) time.Time
}

// Locker is the etcd backend: a key attached to a lease that its holder keeps alive,
// created only if absent, whose create revision is the fencing token. It is safe for
// concurrent use. It does not use etcd's concurrency.Mutex: that one queues waiters as
// keys of their own and stores no holder, where cronlock needs one key per lock that
// says who holds it.
type Locker struct {
	o       Options
	cfg     clientv3.Config
	hosts   string
	timeout time.Duration
	prefix  string

	mu     sync.Mutex
	c      *clientv3.Client
	closed bool
	// token is the auth token of User, sent with each request by cronlock itself (see
	// authed); empty until the first request logs in, and again once etcd forgot it.
	token string

	conn connErrors

	// now is the clock of Lease.Sent; nil means Boottime.
	now func() time.Duration
	// poll overrides the waiters' polling period (default min(1s, ttl/3)); tests raise it
	// to prove that a release wakes a waiter through the watch alone.
	poll time.Duration
}

var (
	_ lockrun.Locker     = (*Locker)(nil)
	_ lockrun.FleetStore = (*Locker)(nil)
)

// New checks o and prepares a client; it does not connect (the first call does).
// Its errors never contain the password.
func New(o Options) (*Locker, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoint given: set --etcd or CRONLOCK_ETCD_ENDPOINTS to http(s)://host:port[,…]")
	}
	if err := lockrun.ServerDefaults(&o.Timeout, &o.Prefix); err != nil {
		return nil, err
	}
	if o.User == "" && o.Password != "" {
		return nil, errors.New("an etcd password file was given without a user: set --etcd-user or CRONLOCK_ETCD_USER")
	}
	if o.User != "" && o.Password == "" {
		return nil, fmt.Errorf("the etcd user %q has no password: put it in a file named by CRONLOCK_ETCD_PASSWORD_FILE", o.User)
	}
	var hosts []string
	secure := false
	for i, e := range o.Endpoints {
		u, err := url.Parse(e)
		if strings.Contains(e, "@") {
			// Never echoed: what is before the @ may be a password.
			return nil, fmt.Errorf("etcd endpoint %d holds an @: a user and password do not go in the URL; set --etcd-user / CRONLOCK_ETCD_USER and put the password in CRONLOCK_ETCD_PASSWORD_FILE", i+1)
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("etcd endpoint %q: give http://host:port or https://host:port (--etcd / CRONLOCK_ETCD_ENDPOINTS, comma-separated)", e)
		}
		secure = secure || u.Scheme == "https"
		hosts = append(hosts, u.Host)
	}
	cfg := clientv3.Config{
		Endpoints: o.Endpoints,
		// Bounds the dial and the authentication New makes; every call also has its own
		// deadline (the operation time-out).
		DialTimeout:          o.Timeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: o.Timeout,
		AutoSyncInterval:     0, // a short-lived process: no member list refresh in the background
		// No Username/Password: the client would attach its token to its own Authenticate
		// calls too, and once etcd has forgotten that token (a restart; --auth-token-ttl,
		// 300s, without a request) etcd 3.4 refuses them, which the client answers by
		// logging in again, with the same token, until the deadline: every later renewal
		// failed and a healthy lock was given up. cronlock logs in itself (authed).
		// The client logs to stderr by default (cron would mail it); errors reach the
		// caller instead.
		Logger:          zap.NewNop(),
		MaxUnaryRetries: 2,
		// gRPC's own reconnect back-off starts at 1s and grows to 2 minutes: after an etcd
		// restart it could keep a holder from renewing until its lease is gone. Short and
		// capped at one operation time-out instead.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: min(o.Timeout, time.Second)},
			MinConnectTimeout: o.Timeout,
		})},
	}
	if secure || o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" {
		tc, err := etcdTLS(o)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	l := &Locker{o: o, hosts: strings.Join(hosts, ","), timeout: o.Timeout, prefix: o.Prefix}
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(l.conn.unary), grpc.WithChainStreamInterceptor(l.conn.stream))
	l.cfg = cfg
	return l, nil
}

// etcdTLS builds the client's TLS settings from the CA and client certificate files.
func etcdTLS(o Options) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		b, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the etcd CA file (CRONLOCK_ETCD_CA_FILE): %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("the etcd CA file %s holds no PEM certificate (CRONLOCK_ETCD_CA_FILE)", o.CAFile)
		}
		tc.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("a client certificate needs both CRONLOCK_ETCD_CERT_FILE and CRONLOCK_ETCD_KEY_FILE")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load the etcd client certificate (CRONLOCK_ETCD_CERT_FILE, CRONLOCK_ETCD_KEY_FILE): %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// client connects on first use, and again after a failed connection (a waiter outlives an
// etcd restart). It does not log in: call does, on the first request.
func (l *Locker) client() (*clientv3.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("lockrun: etcd locker closed")
	}
	if l.c == nil {
		c, err := clientv3.New(l.cfg)
		if err != nil {
			return nil, l.userError("connect", err)
		}
		l.c = c
	}
	return l.c, nil
}

// Describe names the backend without secrets: "etcd 127.0.0.1:2379".
func (l *Locker) Describe() string { return "etcd " + l.hosts }

// Name names the issuer of this backend's fencing tokens: create revisions.
func (l *Locker) Name() string { return "etcd" }

// Prefix is the key namespace: with the endpoints, it names where the key lives, for the
// stamps of keys a host has claimed (its data-loss check).
func (l *Locker) Prefix() string { return l.prefix }

// FreedBy says that the lock's lease ends by itself.
func (l *Locker) FreedBy(ttl time.Duration) string {
	return fmt.Sprintf(" (its etcd lease ends by itself within --ttl %v)", ttl)
}

// Close closes the client's connections.
func (l *Locker) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.c != nil {
		return l.c.Close()
	}
	return nil
}

func (l *Locker) lockKey(key string) string { return l.prefix + "{" + key + "}:lock" }
func (l *Locker) tickKey(key string) string { return l.prefix + "{" + key + "}:tick" }
func (l *Locker) runsDir(key string) string { return l.prefix + "{" + key + "}:runs/" }

// etcdHolder is the JSON value of a lock key.
type etcdHolder struct {
	Node       string `json:"node"`
	PID        int    `json:"pid"`
	RunID      string `json:"run_id"`
	SinceMS    int64  `json:"since_ms"`              // the holder's wall clock at acquisition
	AcquiredUS int64  `json:"acquired_us"`           // the same, in µs: the run's start in the record
	TTLMS      int64  `json:"ttl_ms"`                // --ttl
	ReleasedUS int64  `json:"released_us,omitempty"` // set when a release kept it for --min-hold
}

// holderOf reads a lock key's value; a value cronlock did not write still names a holder.
func holderOf(value []byte, createRev int64) *lockrun.Holder {
	h := &lockrun.Holder{FencingToken: uint64(max(createRev, 0))}
	var v etcdHolder
	if json.Unmarshal(value, &v) != nil {
		h.Node = "(unknown: the lock key does not hold cronlock data)"
		return h
	}
	h.Node, h.PID, h.RunID = v.Node, v.PID, v.RunID
	if t := time.UnixMilli(v.SinceMS); v.SinceMS > 0 && lockrun.PlausibleTime(t) {
		h.Since = t
	}
	return h
}

// leaseSeconds is d as etcd's whole-second lease TTL, rounded up: the server must never
// let a lease go before the holder's own count says it may.
func leaseSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// op runs f with one operation time-out, as the user.
func (l *Locker) op(ctx context.Context, what string, f func(ctx context.Context, c *clientv3.Client) error) error {
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.call(octx, f); err != nil {
		return l.userError(what, err)
	}
	return nil
}

// call runs f as the user, within ctx. A token etcd no longer knows is replaced by a new
// login and f run once more: the lease and the key outlive the token.
func (l *Locker) call(ctx context.Context, f func(ctx context.Context, c *clientv3.Client) error) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		actx, token, err := l.authed(ctx, c)
		if err != nil {
			return err
		}
		err = f(actx, c)
		if try > 0 || token == "" || !(staleToken(err) || token == authOff && errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty)) {
			return err
		}
		l.forgetToken(token)
	}
}

// authOff stands for the token when the cluster has authentication off: requests go
// without one, as the etcd client sends them, until etcd asks for a user.
const authOff = "\x00off"

// authed is ctx carrying the user's token, logging in first when there is none yet; token
// is "" without a user.
func (l *Locker) authed(ctx context.Context, c *clientv3.Client) (_ context.Context, token string, err error) {
	if l.o.User == "" {
		return ctx, "", nil
	}
	l.mu.Lock()
	token = l.token
	l.mu.Unlock()
	if token == "" {
		// Sent without a token (the client holds none): etcd 3.4 refuses a login that
		// carries a token it has forgotten.
		resp, err := c.Authenticate(ctx, l.o.User, l.o.Password)
		switch {
		case errors.Is(rpctypes.Error(err), rpctypes.ErrAuthNotEnabled):
			token = authOff
		case err != nil:
			return nil, "", err
		default:
			token = resp.Token
		}
		l.mu.Lock()
		l.token = token
		l.mu.Unlock()
	}
	if token == authOff {
		return ctx, token, nil
	}
	return metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, token), token, nil
}

// forgetToken drops token, unless another call has replaced it already.
func (l *Locker) forgetToken(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.token == token {
		l.token = ""
	}
}

// staleToken reports etcd refusing a token it no longer accepts: forgotten, lapsed, or
// issued before a change of users or roles.
func staleToken(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrInvalidAuthToken) || errors.Is(rpctypes.Error(err), rpctypes.ErrAuthOldRevision) ||
		errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrAuthOldRevision)
}
