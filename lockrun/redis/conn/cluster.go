package conn

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Following a Cluster failover. go-redis learns a new slot map on a MOVED reply, or
// once a minute (found in v9.23, osscluster.go); a master that was SIGKILLed sends no
// MOVED, so every renewal kept knocking at its address until the lease ran out, even
// after the cluster had promoted a replica that held the lock, and the release after
// the job failed too, leaving the lock to its TTL.

// FollowFailover asks for a new slot map, in the background, when an operation on a
// Cluster met no reply at all (a refused dial, a cut connection, a time-out): the next
// attempt, or the next renewal, then goes to whichever node serves the slot by then.
func (c *Client) FollowFailover(err error) {
	cc, ok := c.Commands.(*clusterClient)
	var rerr redis.Error
	if !ok || err == nil || errors.As(err, &rerr) {
		return
	}
	cc.ReloadState(context.Background())
}

// nodeDial bounds each dial to a Cluster node by the operation time-out. Elsewhere the
// dialer retries until its caller's context ends, as a restarting server is worth the
// wait; go-redis reloads the slot map with a context that never ends, so a dial to a
// dead master would hold that reload, which asks the nodes in a random order, forever.
func nodeDial(dial func(context.Context, string, string) (net.Conn, error), to time.Duration) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, to)
		defer cancel()
		return dial(ctx, network, addr)
	}
}

// Finding the slot map when one of the URL's nodes is down. go-redis asks the nodes in a
// random order, each with the whole of the operation's time (found in v9.23,
// osscluster.go loadState): a node that refuses is dialled again until the operation
// time-out ends (dial.go), and a frozen one (SIGSTOP, a hung host) accepts and never
// answers, so a third of the runs of a six-node URL with one such node failed, after the
// whole --redis-timeout, although five nodes could have answered.

// slotsShare gives each CLUSTER SLOTS its share of the time left: nine tenths of it
// split between the URL's nodes, or at least 200ms (all of it when less is left), so
// that the nodes asked after a silent one still have time.
type slotsShare struct {
	nodes   int
	timeout time.Duration // for a reload with no deadline of its own
}

func (h slotsShare) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slotsShare) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h slotsShare) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, ok := cmd.(*redis.ClusterSlotsCmd); !ok {
			return next(ctx, cmd)
		}
		left := h.timeout
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		share := max((left-left/10)/time.Duration(max(h.nodes, 1)), min(left, 200*time.Millisecond))
		sctx, cancel := context.WithTimeout(ctx, share)
		defer cancel()
		return next(sctx, cmd)
	}
}

// PipelinerFor is the client whose pipeline reaches the server that holds key.
func (c *Client) PipelinerFor(ctx context.Context, key string) (Pipeliner, error) {
	if cc, ok := c.Commands.(*clusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return c.Commands, nil
}

// AskTarget is the node named by an ASK reply: the key's slot is being migrated there,
// and the key has left the node that was asked.
func AskTarget(err error) (string, bool) {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return "", false
	}
	f := strings.Fields(rerr.Error())
	if len(f) != 3 || f[0] != "ASK" {
		return "", false
	}
	return f[2], true
}

// NodeClient is a client to the Cluster node at addr (an ASK target), with the settings
// of every node's; the caller closes it. An ASK target may be a master that serves no
// slot yet, which the slot map go-redis holds does not list. c must be a Cluster's.
func (c *Client) NodeClient(addr string) *redis.Client {
	o := *c.Commands.(*clusterClient).node
	o.Addr = addr
	return redis.NewClient(&o)
}

// Pipeliner is a client that sends pipelines to one server.
type Pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Redirected reloads the slot map after a MOVED or ASK reply met by a pipeline sent
// straight to one Cluster node, and returns err: the locker asks again (a slot on its
// way is transient), knowing that nothing ran, and then goes to the node that serves the
// slot by then.
func (c *Client) Redirected(ctx context.Context, err error) error {
	cc, ok := c.Commands.(*clusterClient)
	var rerr redis.Error
	if !ok || !errors.As(err, &rerr) {
		return err
	}
	if msg := rerr.Error(); strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") {
		cc.ReloadState(ctx)
	}
	return err
}
