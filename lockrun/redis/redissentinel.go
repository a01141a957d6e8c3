package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

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
	first int       // the Sentinel that answered last
	at    time.Time // when it answered
}

func newSentinelResolver(t redisTarget, o Options) *sentinelResolver {
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
		// A tenth is kept back: the dial has the operation's time-out, begun a moment after
		// the operation, so Sentinels that all hang would fail it just after the operation
		// gave up. The operation would then not know that nothing was sent (it let go of a
		// lock it might have taken, one more time-out) nor why (a bare deadline).
		left := time.Until(dl)
		share = max((left-left/10)/time.Duration(len(r.sentinels)), 50*time.Millisecond)
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
			r.first, r.at = j, time.Now()
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

// answered is when a Sentinel last named the master; zero before.
func (r *sentinelResolver) answered() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

func (r *sentinelResolver) close() {
	for _, s := range r.sentinels {
		s.Close()
	}
}

// Following a graceful failover (SENTINEL FAILOVER). The Sentinels promote a replica and
// point the clients at it, but the old master keeps running as a writable master with
// no replica until they reconfigure it, about ten seconds later here (Redis 7.0). A
// renewal sent on a connection made before the failover renewed the lock there, where
// nobody else looks, while the promoted master let it expire: another host took it and
// ran the job beside the holder, which saw every renewal confirmed. So before each
// renewal, each release of a renewed lease and each new attempt of a waiter (the
// operations that can reuse a connection made earlier), the Sentinels are asked again,
// and connections to any other server are closed: go-redis finds them dead and dials
// again, through the Sentinels. A release asks too when the Sentinels last answered more
// than releaseFresh ago, so that a job that ended before its first renewal, across a
// failover, frees the lock where the fleet looks and writes its record there: a short
// run's release asks nothing (its dial has just asked).

// releaseFresh is how old the Sentinels' last answer may be for a release to trust it.
const releaseFresh = time.Second

// followMaster closes the connections to servers other than the master the Sentinels
// name now. It asks only when some connection is open (a new one asks when it is made)
// and the last answer is older than fresh, within half an operation time-out; when no
// Sentinel answers, the connections stay as they are, and the operation goes to the
// master they reach.
func (l *Locker) followMaster(ctx context.Context, fresh time.Duration) {
	sc, ok := l.c.(*sentinelClient)
	if !ok || l.dialer == nil || !l.dialer.connected() || time.Since(sc.r.answered()) < fresh {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, l.timeout/2)
	defer cancel()
	addr, err := sc.r.masterAddr(qctx)
	if err != nil {
		return
	}
	l.dialer.retire(addr)
}

// trackedConn is a connection to a server the Sentinels named: the dialer keeps it in
// its set until it is closed, so that it can be closed when they name another.
type trackedConn struct {
	net.Conn
	addr string
	d    *redisDialer
}

func (c *trackedConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c)
	c.d.mu.Unlock()
	return c.Conn.Close()
}

// SyscallConn is the socket's: go-redis's pool checks an idle connection through it, and
// so finds a retired one closed before using it.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// track records c, a connection to addr.
func (d *redisDialer) track(c net.Conn, addr string) net.Conn {
	t := &trackedConn{Conn: c, addr: addr, d: d}
	d.mu.Lock()
	if d.conns == nil {
		d.conns = map[*trackedConn]struct{}{}
	}
	d.conns[t] = struct{}{}
	d.mu.Unlock()
	return t
}

// connected reports an open connection to a server the Sentinels named.
func (d *redisDialer) connected() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns) > 0
}

// retire closes every connection to a server other than addr.
func (d *redisDialer) retire(addr string) {
	d.mu.Lock()
	var stale []*trackedConn
	for c := range d.conns {
		if c.addr != addr {
			stale = append(stale, c)
			delete(d.conns, c)
		}
	}
	d.mu.Unlock()
	for _, c := range stale {
		c.Conn.Close()
	}
}
