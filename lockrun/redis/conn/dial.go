package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Why cronlock dials Redis itself (found in go-redis v9.23, internal/pool/pool.go):
//
//   - dialConn counts every failed dial in dialErrorsNum, and a later successful dial does
//     not reset it. Once it reaches PoolSize, every dial fails at once with lastDialError,
//     the cached error, until tryDial (a background probe started at that moment, which
//     sleeps one second after each failure) gets through. A renewal sent into a 0.2 s
//     restart made four failed dials (eval's three tries and the keeper's retry), the probe
//     met the server still down, and the lease ran out while it slept: the job was killed
//     although its lock had survived in the AOF.
//   - A pool dial runs in a goroutine of its own (queuedNewConn) whose context is not the
//     caller's: only DialTimeout bounds it, per attempt (DialerRetries attempts).
//
// So the pool never sees a failure that a restart heals: redisDialer retries those itself
// (refused, reset, a missing unix socket, time-outs), every few milliseconds, until it
// connects, its context ends, or the locker is closed; DialTimeout is set far beyond any
// operation (dialUnbounded) so that the pool does not end it. The caller is still bounded
// by its own context (ContextTimeoutEnabled): it stops waiting when its operation's time is
// up, and a connection made later is left in the pool for the next call. A server that
// comes back is reached within dialBackoffMax, and no cached error is ever served.
// A failure that a retry cannot heal (a certificate, an unknown host) is returned at once.
// The only failures the pool still counts are dials cut short by their caller's context,
// which happens on the pub/sub connection alone (go-redis dials it in the caller's
// goroutine): at most two per --wait, below PoolSize.

const (
	dialBackoffMin = 5 * time.Millisecond
	dialBackoffMax = 50 * time.Millisecond
	// dialUnbounded is go-redis's DialTimeout: effectively none (see above).
	dialUnbounded = 24 * time.Hour
)

// redisDialer opens connections to one Redis server for go-redis's pool.
type redisDialer struct {
	attempt time.Duration // bound of one connect (and TLS handshake): the operation time-out
	tls     *tls.Config   // nil for redis:// and unix://

	closeOnce sync.Once
	closed    chan struct{}
	// failing holds the last dial error while the server cannot be reached; nil after a
	// dial succeeds.
	failing atomic.Pointer[error]
	// resolve, when set, names the server at each attempt instead of the pool's address
	// (a Sentinel's master, which a failover changes).
	resolve func(ctx context.Context) (string, error)

	// conns are the open connections to the servers resolve named (sentinel.go).
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	wrote map[string]uint64 // writes per server, for renewVote
}

func newRedisDialer(attempt time.Duration, cfg *tls.Config) *redisDialer {
	return &redisDialer{attempt: attempt, tls: cfg, closed: make(chan struct{})}
}

// dial connects to addr, retrying failures a restarting server heals until ctx ends or
// the dialer is closed; it then returns the last error.
func (d *redisDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	backoff := dialBackoffMin
	for {
		actx, cancel := context.WithTimeout(ctx, d.attempt)
		c, err := d.dialOnce(actx, network, addr)
		cancel()
		if err == nil {
			d.failing.Store(nil)
			return c, nil
		}
		d.failing.Store(&err)
		if !healableDialError(err) {
			return nil, err
		}
		// Jitter: a fleet that lost Redis together does not knock in lockstep.
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-d.closed:
			t.Stop()
			return nil, err
		case <-t.C:
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

func (d *redisDialer) dialOnce(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.resolve != nil {
		a, err := d.resolve(ctx)
		if err != nil {
			return nil, err
		}
		addr = a
	}
	nd := &net.Dialer{}
	if d.tls == nil {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil || d.resolve == nil {
			return c, err
		}
		return d.track(c, addr), nil
	}
	td := &tls.Dialer{NetDialer: nd, Config: d.tls}
	return td.DialContext(ctx, network, addr)
}

// lastError is the error of the last dial when the server could not be reached since;
// nil when the last dial succeeded (or none was made).
func (d *redisDialer) lastError() error {
	if p := d.failing.Load(); p != nil {
		return *p
	}
	return nil
}

// close ends every dial still retrying.
func (d *redisDialer) close() { d.closeOnce.Do(func() { close(d.closed) }) }

// healableDialError reports a dial failure that a server coming back ends: nothing
// listens yet, the connection was cut, or no answer came in time.
func healableDialError(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.ENOENT, syscall.EAGAIN, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EPIPE,
		io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
