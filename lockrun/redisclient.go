package lockrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// newRedisClient builds the go-redis client of target t: one server, the master that
// t's Sentinels name, or a Cluster. Every connection, to a data node or a Sentinel, goes
// through cronlock's own dialer d with the lock-safe settings of lockOptions.
func newRedisClient(t redisTarget, o RedisOptions, d *redisDialer) (redisClient, error) {
	opt := lockOptions(t, o.Timeout, d)
	switch t.scheme {
	case schemeSentinel:
		r := newSentinelResolver(t, o)
		d.resolve = r.masterAddr
		// The pool dials "the master"; the dialer asks the Sentinels which server that is
		// at every attempt, so a dial that started before a failover reaches the new master.
		opt.Addr = t.master
		return &sentinelClient{Client: redis.NewClient(opt), r: r}, nil
	case schemeCluster:
		return &clusterClient{ClusterClient: redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 t.addrs,
			Username:              opt.Username,
			Password:              opt.Password,
			Dialer:                nodeDial(opt.Dialer, o.Timeout),
			Protocol:              opt.Protocol,
			DisableIdentity:       opt.DisableIdentity,
			DialTimeout:           opt.DialTimeout,
			ReadTimeout:           opt.ReadTimeout,
			WriteTimeout:          opt.WriteTimeout,
			PoolTimeout:           opt.PoolTimeout,
			ContextTimeoutEnabled: true,
			// MOVED and ASK are followed by go-redis (a slot that moves mid-operation is
			// asked again at its new node), always within the caller's deadline.
			MaxRedirects: 8,
			// Routing policies fetch the whole COMMAND table first (about 8 ms of a short
			// run here) under a 5s deadline of go-redis's own, past the operation's; every
			// command cronlock sends has a key (EVAL) or is sent to chosen nodes.
			DisableRoutingPolicies: true,
			MaxRetries:             -1,
			MinRetryBackoff:        -1,
			MaxRetryBackoff:        -1,
			DialerRetries:          opt.DialerRetries,
			DialerRetryTimeout:     opt.DialerRetryTimeout,
			PoolSize:               opt.PoolSize,
			MaxIdleConns:           opt.MaxIdleConns,
			MaxActiveConns:         opt.MaxActiveConns,
			PipelinePoolSize:       opt.PipelinePoolSize,
			ConnMaxIdleTime:        opt.ConnMaxIdleTime,

			MaintNotificationsConfig: opt.MaintNotificationsConfig,
		})}, nil
	}
	return redis.NewClient(opt), nil
}

// lockOptions are the lock-safe go-redis settings of every connection, to whichever
// server or node it goes.
func lockOptions(t redisTarget, to time.Duration, d *redisDialer) *redis.Options {
	return &redis.Options{
		Network: t.network,
		Addr:    t.addr,
		// The dialer does TLS itself and rides out a restart (redisdial.go); it sends AUTH
		// and SELECT in one round trip and spares go-redis's HELLO (redishandshake.go), so
		// go-redis gets no credentials and database 0. On a Cluster every node's
		// connection has it (database 0 there); a Sentinel's own connections do not.
		Dialer: newHandshake(t, to).wrap(d.dial),

		// RESP2 and no CLIENT SETINFO: fewer handshake round trips for a short-lived process.
		Protocol:        2,
		DisableIdentity: true,

		// Every time-out explicit (the defaults are 5s each), and the caller's context
		// deadline cuts a socket read short, so a renewal never outlives its lease. The
		// dial is bounded by the caller's context instead of DialTimeout (redisdial.go).
		DialTimeout:           dialUnbounded,
		ReadTimeout:           to,
		WriteTimeout:          to,
		PoolTimeout:           to,
		ContextTimeoutEnabled: true,

		// No hidden retries: the locker retries itself, within its own deadline, and only
		// operations that are safe to repeat (all of its scripts are idempotent).
		// The dialer retries dials itself, so the pool makes one attempt.
		MaxRetries:         -1,
		MinRetryBackoff:    -1,
		MaxRetryBackoff:    -1,
		DialerRetries:      1,
		DialerRetryTimeout: 10 * time.Millisecond,

		// Small, but not 1: PoolSize is also how many failed dials open go-redis's dial
		// circuit breaker, which the dialer keeps below it (redisdial.go).
		PoolSize:         4,
		MinIdleConns:     0,
		MaxIdleConns:     4,
		MaxActiveConns:   8,
		PipelinePoolSize: -1, // pipelines (List) share the main pool
		ConnMaxIdleTime:  time.Minute,
		ConnMaxLifetime:  0,

		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// sentinelClient is the client of a redis-sentinel:// target: a plain client whose
// dialer finds the master through the Sentinels.
type sentinelClient struct {
	*redis.Client
	r *sentinelResolver
}

func (c *sentinelClient) Close() error {
	c.r.close()
	return c.Client.Close()
}

// clusterClient is the client of a redis-cluster:// target.
type clusterClient struct{ *redis.ClusterClient }

// sentinelResolver asks a target's Sentinels where its master is. go-redis's
// FailoverClient is not used: it fixes the master's address once per dial (cronlock's
// dialer retries a dial until its deadline, so a dial begun before a failover would keep
// knocking at the dead master), and its first dial asks every Sentinel at once and
// subscribes to their events, a connection and round trips a short run does not need.
// Here each dial attempt asks one Sentinel, starting with the last that answered.
type sentinelResolver struct {
	master    string
	sentinels []*redis.SentinelClient
	addrs     []string

	mu    sync.Mutex
	first int // the Sentinel that answered last
}

func newSentinelResolver(t redisTarget, o RedisOptions) *sentinelResolver {
	r := &sentinelResolver{master: t.master, addrs: t.addrs}
	for _, a := range t.addrs {
		r.sentinels = append(r.sentinels, redis.NewSentinelClient(&redis.Options{
			Addr: a,
			// One try per Sentinel: the next one is asked at once, and the data dialer's
			// own retries ask them all again. The handshake is the data connections'
			// (redishandshake.go): go-redis's HELLO answered without a round trip, and
			// AUTH, when the Sentinels have a password, in one.
			Dialer: handshake{password: o.SentinelPassword, timeout: o.Timeout}.wrap(
				func(ctx context.Context, network, addr string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				}),
			Protocol:              2,
			DisableIdentity:       true,
			DialTimeout:           o.Timeout,
			ReadTimeout:           o.Timeout,
			WriteTimeout:          o.Timeout,
			PoolTimeout:           o.Timeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
			DialerRetryTimeout:    10 * time.Millisecond,
			PoolSize:              2,
			MaxIdleConns:          1,
			ConnMaxIdleTime:       time.Minute,

			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		}))
	}
	return r
}

// NoMasterError says that no Sentinel knows a master by the URL's name.
type NoMasterError struct {
	Master    string
	Sentinels []string
}

func (e *NoMasterError) Error() string {
	return fmt.Sprintf("no Sentinel of %v monitors a master named %q; check the name after the hosts in --redis / CRONLOCK_REDIS_URL (SENTINEL MASTERS lists them)", e.Sentinels, e.Master)
}

// masterAddr returns host:port of the master, as the first Sentinel that answers says.
// Each Sentinel gets an equal share of ctx's time, so one that hangs does not hide the
// others. Errors wrap the network errors met, so that the dialer can tell a Sentinel
// that is down (retried) from one that refuses (returned).
func (r *sentinelResolver) masterAddr(ctx context.Context) (string, error) {
	r.mu.Lock()
	first := r.first
	r.mu.Unlock()
	var errs []error
	unknown := 0
	share := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		share = max(time.Until(dl)/time.Duration(len(r.sentinels)), 50*time.Millisecond)
	}
	for i := range r.sentinels {
		j := (first + i) % len(r.sentinels)
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if share > 0 {
			sctx, cancel = context.WithTimeout(ctx, share)
		}
		v, err := r.sentinels[j].GetMasterAddrByName(sctx, r.master).Result()
		cancel()
		if err == nil && len(v) == 2 {
			r.mu.Lock()
			r.first = j
			r.mu.Unlock()
			return net.JoinHostPort(v[0], v[1]), nil
		}
		if errors.Is(err, redis.Nil) {
			unknown++
			continue
		}
		if err == nil {
			err = fmt.Errorf("unexpected reply %v", v)
		}
		if isAuthError(err.Error()) {
			return "", &sentinelAuthError{addr: r.addrs[j], err: err}
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", r.addrs[j], err))
		if ctx.Err() != nil {
			break
		}
	}
	if unknown > 0 && len(errs) == 0 {
		return "", &NoMasterError{Master: r.master, Sentinels: r.addrs}
	}
	return "", joinedError(errs)
}

// joinedError is the errors of several Sentinels on one line (errors.Join puts newlines
// between them, and every cronlock message is one line); errors.Is and As see them all.
type joinedError []error

func (e joinedError) Error() string {
	var b strings.Builder
	for i, err := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e joinedError) Unwrap() []error { return e }

// sentinelAuthError is a Sentinel that refused cronlock's credentials: the Sentinels'
// password is a setting of its own.
type sentinelAuthError struct {
	addr string
	err  error
}

func (e *sentinelAuthError) Error() string {
	return fmt.Sprintf("the Sentinel %s refused: %v; put the Sentinels' password (requirepass in sentinel.conf) in the file named by CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE", e.addr, e.err)
}

func (e *sentinelAuthError) Unwrap() error { return e.err }

func (r *sentinelResolver) close() {
	for _, s := range r.sentinels {
		s.Close()
	}
}

// scanner is a server that SCAN walks.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// scanNodes are the servers whose keys together are the whole keyspace: every master of
// a Cluster (SCAN walks one node only), else the one server.
func (l *RedisLocker) scanNodes(ctx context.Context) ([]scanner, error) {
	cc, ok := l.c.(*clusterClient)
	if !ok {
		return []scanner{l.c}, nil
	}
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var mu sync.Mutex
	var nodes []scanner
	err := cc.ForEachMaster(octx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, c)
		mu.Unlock()
		return nil
	})
	return nodes, err
}
