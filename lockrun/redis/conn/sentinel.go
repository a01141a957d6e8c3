package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
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

func newSentinelResolver(t Target, o Options) *sentinelResolver {
	r := &sentinelResolver{master: t.Master, addrs: t.Addrs}
	for _, a := range t.Addrs {
		r.sentinels = append(r.sentinels, redis.NewSentinelClient(&redis.Options{
			Addr: a,
			// One try per Sentinel: the next one is asked at once, and the data dialer's
			// own retries ask them all again. The handshake is the data connections'
			// (handshake.go): go-redis's HELLO answered without a round trip, and
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
		if IsAuthError(err.Error()) {
			return "", &SentinelAuthError{addr: r.addrs[j], err: err}
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

// SentinelAuthError is a Sentinel that refused cronlock's credentials: the Sentinels'
// password is a setting of its own.
type SentinelAuthError struct {
	addr string
	err  error
}

func (e *SentinelAuthError) Error() string {
	return fmt.Sprintf("the Sentinel %s refused: %v; put the Sentinels' password (requirepass in sentinel.conf) in the file named by CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE", e.addr, e.err)
}

func (e *SentinelAuthError) Unwrap() error { return e.err }

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

// Confirming a renewal with the Sentinels. A partition can cut a holder off
// together with the master it renews on, away from the Sentinels: they promote a
// replica on their side and hand the lock to another host there, while the old master,
// still writable, goes on accepting the holder's renewals. Measured: the two jobs ran
// side by side for the partition's whole length, and --min-replicas did not help when a
// replica was cut off with them. So a renewal through Sentinel counts as confirmed only
// when more than half of the URL's Sentinels name, while it is under way, the very server
// it was written to. The Sentinels are asked all at once, beside the renewal (not before
// it): a renewal costs the slower of the two round trips, and the answers are at least as
// recent as the write. A Sentinel on the holder's side of a partition may still name the
// old master, but it is one of a minority; with no majority reachable the renewal is
// unconfirmed and the keeper's fail-closed clock runs on. The promoted master can hand
// the lock on only after the Sentinels saw the old one down for down-after and it has
// expired there, so a cut-off job is stopped within a lease of the last confirmed renewal.

// MasterVoteError says that a renewal through Sentinel was not confirmed: fewer than a
// majority of the URL's Sentinels named the server it was written to.
type MasterVoteError struct {
	Key       string
	Wrote     []string       // the servers the renewal was written to ("" = none)
	Named     map[string]int // address → how many Sentinels named it
	Sentinels int            // how many the URL names
	Errs      []error        // the Sentinels that did not answer
}

func (e *MasterVoteError) Error() string {
	need := e.Sentinels/2 + 1
	var named []string
	for a, n := range e.Named {
		named = append(named, fmt.Sprintf("%d named %s", n, a))
	}
	sort.Strings(named)
	if len(e.Errs) > 0 {
		named = append(named, fmt.Sprintf("%d did not answer (%v)", len(e.Errs), joinedError(e.Errs)))
	}
	wrote := "a server"
	if len(e.Wrote) > 0 {
		wrote = strings.Join(e.Wrote, " and ")
	}
	return fmt.Sprintf("renew lock %s on %s: unconfirmed, as %d of the %d Sentinels must name the master it was renewed on and %s; a partition may have cut this host off from the Sentinels, which may promote another master: check the network between them",
		e.Key, wrote, need, e.Sentinels, strings.Join(named, ", "))
}

// vote is what the Sentinels said about the master during one renewal.
type vote struct {
	addr  string         // the address a majority named; "" when none
	named map[string]int // address → Sentinels that named it
	errs  []error
}

// masterVote asks every Sentinel at once which server is the master, and returns as soon
// as a majority of them name one address, or when none can any more. Each is given ctx's
// deadline (or one operation time-out) but not its cancellation, so that one still
// answering when the vote is decided is not cut off mid-reply (go-redis would close its
// connection). A majority's address is also the resolver's latest answer.
func (r *sentinelResolver) masterVote(ctx context.Context, timeout time.Duration) vote {
	n := len(r.sentinels)
	type answer struct {
		i    int
		addr string
		err  error
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(timeout)
	}
	ch := make(chan answer, n)
	for i, s := range r.sentinels {
		go func() {
			qctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl)
			defer cancel()
			v, err := s.GetMasterAddrByName(qctx, r.master).Result()
			a := answer{i: i, err: err}
			switch {
			case err == nil && len(v) == 2:
				a.addr = net.JoinHostPort(v[0], v[1])
			case errors.Is(err, redis.Nil):
				a.err = fmt.Errorf("it monitors no master named %q", r.master)
			case err == nil:
				a.err = fmt.Errorf("unexpected reply %v", v)
			}
			if a.err != nil {
				a.err = fmt.Errorf("sentinel %s: %w", r.addrs[i], a.err)
			}
			ch <- a
		}()
	}
	need := n/2 + 1
	v := vote{named: map[string]int{}}
	for got := 0; got < n; got++ {
		a := <-ch
		if a.err != nil {
			v.errs = append(v.errs, a.err)
		} else if v.named[a.addr]++; v.named[a.addr] >= need {
			r.mu.Lock()
			r.first, r.at = a.i, time.Now()
			r.mu.Unlock()
			v.addr = a.addr
			return v
		}
		best := 0
		for _, c := range v.named {
			best = max(best, c)
		}
		if best+n-got-1 < need {
			return v // no address can reach a majority any more
		}
	}
	return v
}

// RenewVote is the Sentinels' check of one renewal, begun beside it.
type RenewVote struct {
	d      *redisDialer
	before map[string]uint64 // writes per server before the renewal
	done   chan vote
	n      int // the URL's Sentinels
}

// StartVote asks the Sentinels about the master while a renewal is sent; nil unless the
// target is redis-sentinel://. Once a majority has named a master, the connections to
// other servers are closed, so that the next try dials the master they name.
func (c *Client) StartVote(ctx context.Context) *RenewVote {
	sc, ok := c.Commands.(*sentinelClient)
	if !ok {
		return nil
	}
	rv := &RenewVote{d: c.dialer, before: c.dialer.writes(), done: make(chan vote, 1), n: len(sc.r.sentinels)}
	go func() {
		v := sc.r.masterVote(ctx, c.timeout)
		if v.addr != "" {
			c.dialer.retire(v.addr)
		}
		rv.done <- v
	}()
	return rv
}

// Confirm waits for the vote and returns nil when a majority of the Sentinels named the
// one server the renewal of key was written to, else a *MasterVoteError.
func (rv *RenewVote) Confirm(key string) error {
	v := <-rv.done
	var wrote []string
	for a, n := range rv.d.writes() {
		if n != rv.before[a] {
			wrote = append(wrote, a)
		}
	}
	sort.Strings(wrote)
	if v.addr != "" && len(wrote) == 1 && wrote[0] == v.addr {
		return nil
	}
	return &MasterVoteError{Key: key, Wrote: wrote, Named: v.named, Sentinels: rv.n, Errs: v.errs}
}

// Following a graceful failover (SENTINEL FAILOVER). The Sentinels promote a replica and
// point the clients at it, but the old master keeps running as a writable master with
// no replica until they reconfigure it, about ten seconds later here (Redis 7.0). A
// renewal sent on a connection made before the failover renewed the lock there, where
// nobody else looks, while the promoted master let it expire: another host took it and
// ran the job beside the holder, which saw every renewal confirmed. So each renewal asks
// the Sentinels beside it (a renewal that went to another server than the one a majority
// names is unconfirmed, and retried soon: RenewVote above), and before each release of a
// renewed lease and each new attempt of a waiter (the other operations that can reuse a
// connection made earlier) one is asked again; connections to any other server are
// closed: go-redis finds them dead and dials again, through the Sentinels. A release asks
// too when the Sentinels last answered more than a second ago (package redis's
// releaseFresh), so that a job that ended before its first renewal, across a
// failover, frees the lock where the fleet looks and writes its record there: a short
// run's release asks nothing (its dial has just asked).

// FollowMaster closes the connections to servers other than the master the Sentinels
// name now. It asks only when some connection is open (a new one asks when it is made)
// and the last answer is older than fresh, within half an operation time-out; when no
// Sentinel answers, the connections stay as they are, and the operation goes to the
// master they reach.
func (c *Client) FollowMaster(ctx context.Context, fresh time.Duration) {
	sc, ok := c.Commands.(*sentinelClient)
	if !ok || !c.dialer.connected() || time.Since(sc.r.answered()) < fresh {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, c.timeout/2)
	defer cancel()
	addr, err := sc.r.masterAddr(qctx)
	if err != nil {
		return
	}
	c.dialer.retire(addr)
}

// ConfirmMaster is FollowMaster for a release that completes ledger entries: a majority
// of the URL's Sentinels must name the master, as for a renewal (RenewVote), and the
// connections to any other server are closed. It reports false when the Sentinels were
// asked and no majority named one: a host cut off from them with the old master (a
// partition) would otherwise complete its entries there, where the promoted master never
// sees them, and report them delivered. The caller then keeps them for a later run. With
// a fresh answer, no open connection, or another topology it asks nothing and reports
// true.
func (c *Client) ConfirmMaster(ctx context.Context, fresh time.Duration) bool {
	sc, ok := c.Commands.(*sentinelClient)
	if !ok || !c.dialer.connected() || time.Since(sc.r.answered()) < fresh {
		return true
	}
	qctx, cancel := context.WithTimeout(ctx, c.timeout/2)
	defer cancel()
	v := sc.r.masterVote(qctx, c.timeout/2)
	if v.addr == "" {
		return false
	}
	c.dialer.retire(v.addr)
	return true
}

// trackedConn is a connection to a server the Sentinels named: the dialer keeps it in
// its set until it is closed, so that it can be closed when they name another.
type trackedConn struct {
	net.Conn
	addr string
	d    *redisDialer
}

// Write counts the bytes' server, so that a renewal knows where it went (RenewVote).
func (c *trackedConn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	if c.d.wrote == nil {
		c.d.wrote = map[string]uint64{}
	}
	c.d.wrote[c.addr]++
	c.d.mu.Unlock()
	return c.Conn.Write(b)
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

// writes is how many writes went to each server the Sentinels named, so far.
func (d *redisDialer) writes() map[string]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]uint64, len(d.wrote))
	for a, n := range d.wrote {
		m[a] = n
	}
	return m
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
