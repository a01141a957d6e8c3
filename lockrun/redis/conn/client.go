// Package conn reaches the Redis server that a --redis URL names, for the lock backend
// (package redis): it parses the URL (redis://, rediss://, unix://, redis-sentinel://,
// redis-cluster://), dials with lock-safe settings (its own dial retries, and the AUTH and
// SELECT handshake in one round trip), asks the Sentinels where the master is and whether
// a renewal went to it, and routes to the Cluster node of a key's slot, following
// failovers and slot moves. It hands the locker a go-redis client and tells it where its
// commands went; it sends no lock command and knows no key layout or Lua script.
package conn

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Options configures New.
type Options struct {
	// Timeout is the deadline of one operation (dial, read, write); it must be positive.
	Timeout time.Duration
	// SentinelPassword authenticates to the Sentinels of a redis-sentinel:// target; ""
	// = none.
	SentinelPassword string
}

// Commands is the part of go-redis the locker uses.
type Commands interface {
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	Close() error
}

// Client is a client of one target: its Commands go to the one server, to the master
// the Sentinels name at each dial, or to the Cluster node that serves each key's slot.
// It is safe for concurrent use.
type Client struct {
	Commands
	target  Target
	timeout time.Duration
	dialer  *redisDialer
}

// quietRedisLog silences go-redis's own logging, which writes to stderr (and so to cron
// mail) on every failed dial; every failure reaches the caller as an error instead.
var quietRedisLog sync.Once

type nopLogger struct{}

func (nopLogger) Printf(context.Context, string, ...any) {}

// New prepares a client of t; it does not connect (the first command does). It silences
// go-redis's process-wide logger.
func New(t Target, o Options) *Client {
	quietRedisLog.Do(func() { redis.SetLogger(nopLogger{}) })
	d := newRedisDialer(o.Timeout, t.TLSConfig())
	return &Client{Commands: newRedisClient(t, o, d), target: t, timeout: o.Timeout, dialer: d}
}

// Close closes the client's connections and ends dials still retrying.
func (c *Client) Close() error {
	c.dialer.close()
	return c.Commands.Close()
}

// Unreachable is the last dial error while the server cannot be reached, else nil.
func (c *Client) Unreachable() error { return c.dialer.lastError() }

// newRedisClient builds the go-redis client of target t: one server, the master that
// t's Sentinels name, or a Cluster. Every connection, to a data node or a Sentinel, goes
// through cronlock's own dialer d with the lock-safe settings of lockOptions.
func newRedisClient(t Target, o Options, d *redisDialer) Commands {
	opt := lockOptions(t, o.Timeout, d)
	switch t.Scheme {
	case SchemeSentinel:
		r := newSentinelResolver(t, o)
		d.resolve = r.masterAddr
		// The pool dials "the master"; the dialer asks the Sentinels which server that is
		// at every attempt, so a dial that started before a failover reaches the new master.
		opt.Addr = t.Master
		return &sentinelClient{Client: redis.NewClient(opt), r: r}
	case SchemeCluster:
		node := *opt
		node.Dialer = nodeDial(opt.Dialer, o.Timeout)
		return &clusterClient{node: &node, ClusterClient: redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 t.Addrs,
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
			// asked again at its new node), always within the caller's deadline; when
			// they run out while a slot is half-way, the locker asks again (package redis).
			MaxRedirects: 8,
			// Routing policies fetch the whole COMMAND table first (a round trip and a
			// large reply: BENCHMARKS.md) under a 5s deadline of go-redis's own, past the
			// operation's; every command cronlock sends has a key (EVAL) or is sent to
			// chosen nodes.
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

			NewClient: func(o *redis.Options) *redis.Client {
				c := redis.NewClient(o)
				c.AddHook(slotsShare{nodes: len(t.Addrs), timeout: o.ReadTimeout})
				return c
			},
		})}
	}
	return redis.NewClient(opt)
}

// lockOptions are the lock-safe go-redis settings of every connection, to whichever
// server or node it goes.
func lockOptions(t Target, to time.Duration, d *redisDialer) *redis.Options {
	return &redis.Options{
		Network: t.Network,
		Addr:    t.Addr,
		// The dialer does TLS itself and rides out a restart (dial.go); it sends AUTH
		// and SELECT in one round trip and spares go-redis's HELLO (handshake.go), so
		// go-redis gets no credentials and database 0. On a Cluster every node's
		// connection has it (database 0 there); a Sentinel's own connections do not.
		Dialer: newHandshake(t, to).wrap(d.dial),

		// RESP2 and no CLIENT SETINFO: fewer handshake round trips for a short-lived process.
		Protocol:        2,
		DisableIdentity: true,

		// Every time-out explicit (the defaults are 5s each), and the caller's context
		// deadline cuts a socket read short, so a renewal never outlives its lease. The
		// dial is bounded by the caller's context instead of DialTimeout (dial.go).
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
		// circuit breaker, which the dialer keeps below it (dial.go).
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

// clusterClient is the client of a redis-cluster:// target.
type clusterClient struct {
	*redis.ClusterClient
	node *redis.Options // of a client to one node (an ASK target: NodeClient)
}

// Scanner is a server that SCAN walks.
type Scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// ScanNodes are the servers whose keys together are the whole keyspace: every master of
// a Cluster (SCAN walks one node only; each is a *redis.Client), else the one server.
func (c *Client) ScanNodes(ctx context.Context) ([]Scanner, error) {
	cc, ok := c.Commands.(*clusterClient)
	if !ok {
		return []Scanner{c.Commands}, nil
	}
	octx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var mu sync.Mutex
	var nodes []Scanner
	err := cc.ForEachMaster(octx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, c)
		mu.Unlock()
		return nil
	})
	return nodes, err
}
