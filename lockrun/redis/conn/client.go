package redis

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// newRedisClient builds the go-redis client of target t: one server, the master that
// t's Sentinels name, or a Cluster. Every connection, to a data node or a Sentinel, goes
// through cronlock's own dialer d with the lock-safe settings of lockOptions.
func newRedisClient(t redisTarget, o Options, d *redisDialer) (redisClient, error) {
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
		node := *opt
		node.Dialer = nodeDial(opt.Dialer, o.Timeout)
		return &clusterClient{node: &node, ClusterClient: redis.NewClusterClient(&redis.ClusterOptions{
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
			// asked again at its new node), always within the caller's deadline; when
			// they run out while a slot is half-way, eval asks again (rediserror.go).
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
				c.AddHook(slotsShare{nodes: len(t.addrs), timeout: o.ReadTimeout})
				return c
			},
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

// clusterClient is the client of a redis-cluster:// target.
type clusterClient struct {
	*redis.ClusterClient
	node *redis.Options // of a client to one node (an ASK target: redisreplicas.go)
}

// scanner is a server that SCAN walks.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// scanNodes are the servers whose keys together are the whole keyspace: every master of
// a Cluster (SCAN walks one node only), else the one server.
func (l *Locker) scanNodes(ctx context.Context) ([]scanner, error) {
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
