package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
	"cronlock/lockrun/redis/conn"
)

// redisPrefix returns a key namespace of its own for one test, so tests never see each
// other's keys (List included) on the shared server.
func redisPrefix(t *testing.T) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	return "cronlocktest-" + hex.EncodeToString(b[:]) + ":"
}

func redisDo(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r, err := redistest.Do(addr, args...)
	if err != nil {
		t.Fatalf("redis %v: %v", args, err)
	}
	return r
}

func TestRedisAcquireConflictReportsHolder(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()

	before := time.Now().Add(-time.Second)
	a := redisMustAcquire(t, l, redisTestReq("billing"))
	if a.FencingToken() == 0 || a.TTL() != 30*time.Second {
		t.Fatalf("lease: fence %d ttl %s", a.FencingToken(), a.TTL())
	}
	// The stored value carries the token, but it is never shown: the other run gets metadata.
	_, err := l.Acquire(ctx, lockrun.Request{Key: "billing", TTL: time.Minute, Node: "host-b", PID: 1, RunID: "run-b"})
	var held *lockrun.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire: got %v, want *HeldError", err)
	}
	h := held.Holder
	if held.Key != "billing" || h == nil {
		t.Fatalf("HeldError = %+v", held)
	}
	if h.Node != "host-a" || h.PID != 4242 || h.RunID != "run-a" || h.FencingToken != a.FencingToken() {
		t.Fatalf("holder = %+v, want host-a/4242/run-a fence %d", h, a.FencingToken())
	}
	if h.Since.Before(before) || h.Since.After(time.Now().Add(time.Second)) {
		t.Fatalf("holder since %s, want about now", h.Since)
	}
	if h.Renewed.IsZero() || h.TTLLeft <= 25*time.Second || h.TTLLeft > 30*time.Second {
		t.Fatalf("holder renewed %s ttl left %s", h.Renewed, h.TTLLeft)
	}
	if !strings.Contains(err.Error(), "host-a (pid 4242, run run-a)") {
		t.Fatalf("message %q does not name the holder", err)
	}

	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	b := redisMustAcquire(t, l, redisTestReq("billing"))
	if b.FencingToken() <= a.FencingToken() {
		t.Fatalf("fence after release %d, want > %d", b.FencingToken(), a.FencingToken())
	}
}

func TestRedisAcquireIsIdempotentForItsToken(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	ctx := context.Background()
	req := redisTestReq("idem")

	first, held, err := l.acquireOnce(ctx, req, "token-one", "")
	if err != nil || held != nil {
		t.Fatalf("first acquire: %v, held %v", err, held)
	}
	// The same token again, as a retry whose first reply was lost would send it.
	again, held, err := l.acquireOnce(ctx, req, "token-one", "")
	if err != nil || held != nil {
		t.Fatalf("repeated acquire with the same token: %v, held %+v", err, held)
	}
	if again.FencingToken() != first.FencingToken() {
		t.Fatalf("fence changed on a repeated acquire: %d then %d", first.FencingToken(), again.FencingToken())
	}
	// Another token is refused.
	_, held, err = l.acquireOnce(ctx, req, "token-two", "")
	if err != nil || held == nil || held.FencingToken != first.FencingToken() {
		t.Fatalf("other token: err %v, held %+v", err, held)
	}
}

// redisLossyClient runs every call, but loses the reply of the first `lose` calls of one script,
// as a connection reset after the request was sent would.
type redisLossyClient struct {
	conn.Commands
	script string
	lose   atomic.Int32
	calls  atomic.Int32
}

func (c *redisLossyClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.maybeLose(ctx, script == c.script, c.Commands.Eval(ctx, script, keys, args...))
}

func (c *redisLossyClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := c.Commands.EvalSha(ctx, sha, keys, args...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		return cmd // it did not run: the locker sends the body next
	}
	return c.maybeLose(ctx, sha == scriptSHA(c.script), cmd)
}

// maybeLose counts a call of the script and loses its reply while lose lasts.
func (c *redisLossyClient) maybeLose(ctx context.Context, ours bool, cmd *redis.Cmd) *redis.Cmd {
	if ours {
		c.calls.Add(1)
		if c.lose.Add(-1) >= 0 {
			cmd.Err() // it ran
			lost := redis.NewCmd(ctx)
			lost.SetErr(&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer (injected)")})
			return lost
		}
	}
	return cmd
}

func TestRedisAcquireSurvivesALostReply(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	lc := &redisLossyClient{Commands: l.c, script: acquireScript()}
	lc.lose.Store(1)
	l.c = lc

	lease := redisMustAcquire(t, l, redisTestReq("lost-reply"))
	if n := lc.calls.Load(); n != 2 {
		t.Fatalf("acquire script ran %d times, want 2 (one lost reply, one retry)", n)
	}
	stored := redisDo(t, addr, "GET", l.fenceKey("lost-reply"))
	if strconv.FormatUint(lease.FencingToken(), 10) != stored {
		t.Fatalf("lease fence %d, stored counter %s", lease.FencingToken(), stored)
	}
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatalf("Renew after a retried acquire: %v", err)
	}
}

func TestRedisAcquireWithUnknownOutcomeReleases(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	lc := &redisLossyClient{Commands: l.c, script: acquireScript()}
	lc.lose.Store(1000)
	l.c = lc

	_, err := l.Acquire(context.Background(), redisTestReq("unknown"))
	if err == nil {
		t.Fatal("Acquire succeeded although every reply was lost")
	}
	if lc.calls.Load() < 2 {
		t.Fatalf("acquire script ran %d times, want retries", lc.calls.Load())
	}
	if !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("error %q does not say Redis is unreachable", err)
	}
	// The script did run: the best-effort release must have freed the lock again.
	if got := redisDo(t, addr, "EXISTS", l.lockKey("unknown")); got != "0" {
		t.Fatalf("lock left behind after an acquire with unknown outcome (EXISTS = %s)", got)
	}
}

func TestRedisFencingTokensRise(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()
	var prev uint64
	for i := 0; i < 200; i++ {
		lease := redisMustAcquire(t, l, redisTestReq("fence"))
		if lease.FencingToken() <= prev {
			t.Fatalf("acquire %d: fence %d after %d", i, lease.FencingToken(), prev)
		}
		prev = lease.FencingToken()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A token is about the Redis clock in µs…
	now := uint64(time.Now().UnixMicro())
	if prev < now-uint64(time.Minute.Microseconds()) || prev > now+uint64(time.Minute.Microseconds()) {
		t.Fatalf("fence %d is not near the clock in µs (%d)", prev, now)
	}
	// …but a stored counter ahead of the clock still wins, +1 each time, printed in full
	// (not as 1.7e+15).
	ahead := now + 1_000_000_000_000
	redisDo(t, addr, "SET", l.fenceKey("fence"), strconv.FormatUint(ahead, 10))
	for i := uint64(1); i <= 3; i++ {
		lease := redisMustAcquire(t, l, redisTestReq("fence"))
		if lease.FencingToken() != ahead+i {
			t.Fatalf("fence %d, want %d", lease.FencingToken(), ahead+i)
		}
		lease.Release(ctx)
	}
}

func TestRedisFencingTokensRiseAcrossDataLoss(t *testing.T) {
	s := redistest.Start(t)
	l := newRedisTestLocker(t, s.Addr)
	ctx := context.Background()
	var prev uint64
	for i := 0; i < 20; i++ {
		lease := redisMustAcquire(t, l, redisTestReq("restart"))
		if lease.FencingToken() <= prev {
			t.Fatalf("acquire %d: fence %d after %d", i, lease.FencingToken(), prev)
		}
		prev = lease.FencingToken()
		lease.Release(ctx)
	}
	l.Close()

	s.Kill()
	s.Restart() // no persistence: the counter is gone
	if got := redisDo(t, s.Addr, "EXISTS", l.fenceKey("restart")); got != "0" {
		t.Fatalf("the fence counter survived the restart (EXISTS = %s); the test proves nothing", got)
	}
	l2 := newRedisTestLocker(t, s.Addr, func(o *Options) { o.Prefix = l.prefix })
	lease := redisMustAcquire(t, l2, redisTestReq("restart"))
	if lease.FencingToken() <= prev {
		t.Fatalf("fence after a restart that lost the data: %d, want > %d", lease.FencingToken(), prev)
	}
}

func TestRedisRenewOfDeletedLockIsLostAndDoesNotRecreate(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	lease := redisMustAcquire(t, l, redisTestReq("renew-gone"))
	ctx := context.Background()
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew of a held lock: %v", err)
	}
	redisDo(t, addr, "DEL", l.lockKey("renew-gone"))
	err := lease.Renew(ctx)
	if !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Renew of a deleted lock: %v, want ErrLockLost", err)
	}
	if got := redisDo(t, addr, "EXISTS", l.lockKey("renew-gone")); got != "0" {
		t.Fatalf("Renew re-created the lock (EXISTS = %s)", got)
	}
	if err := lease.Release(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Release of a deleted lock: %v, want ErrLockLost", err)
	}
}

func TestRedisRenewAndReleaseNeverTouchAnotherHolder(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()
	a := redisMustAcquire(t, l, redisTestReq("other"))
	redisDo(t, addr, "DEL", l.lockKey("other")) // a's lease "expired"
	breq := redisTestReq("other")
	breq.Node = "host-b"
	b := redisMustAcquire(t, l, breq)

	if err := a.Renew(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Renew of a lock now held by another token: %v, want ErrLockLost", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Release of a lock now held by another token: %v, want ErrLockLost", err)
	}
	h, err := l.Inspect(ctx, "other")
	if err != nil || h == nil || h.Node != "host-b" || h.FencingToken != b.FencingToken() {
		t.Fatalf("after the old holder's renew+release: holder %+v, %v; want host-b still", h, err)
	}
	if err := b.Renew(ctx); err != nil {
		t.Fatalf("the new holder's Renew: %v", err)
	}
}

func TestRedisReleaseHonoursMinHold(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()

	req := redisTestReq("minhold")
	req.MinHold = 3 * time.Second
	lease := redisMustAcquire(t, l, req)
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	pttl, _ := strconv.Atoi(redisDo(t, addr, "PTTL", l.lockKey("minhold")))
	if pttl < 1500 || pttl > 3000 {
		t.Fatalf("PTTL after a min-hold release = %d ms, want the rest of 3s", pttl)
	}
	var held *lockrun.HeldError
	if _, err := l.Acquire(ctx, redisTestReq("minhold")); !errors.As(err, &held) {
		t.Fatalf("Acquire during the min hold: %v, want *HeldError", err)
	}
	// The released lock is not alive any more: unlock removes it without --force.
	if h, err := l.Unlock(ctx, "minhold", false); err != nil || h == nil {
		t.Fatalf("Unlock of a released min-hold lock: %+v, %v", h, err)
	}

	// A min hold that has already passed deletes at once.
	req = redisTestReq("minhold-past")
	req.MinHold = 50 * time.Millisecond
	lease = redisMustAcquire(t, l, req)
	time.Sleep(120 * time.Millisecond)
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := redisDo(t, addr, "EXISTS", l.lockKey("minhold-past")); got != "0" {
		t.Fatalf("lock kept after its min hold had passed (EXISTS = %s)", got)
	}
}

func TestRedisWaiterIsWokenByRelease(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	l.poll = 20 * time.Second // only the PUBLISH can wake the waiter in time
	ctx := context.Background()
	a := redisMustAcquire(t, l, redisTestReq("wake"))

	type result struct {
		lease lockrun.Lease
		err   error
		at    time.Time
	}
	done := make(chan result, 1)
	go func() {
		req := redisTestReq("wake")
		req.Node, req.Wait = "waiter", 15*time.Second
		lease, err := l.Acquire(ctx, req)
		done <- result{lease, err, time.Now()}
	}()
	time.Sleep(400 * time.Millisecond) // let the waiter subscribe and fail its first attempt
	select {
	case r := <-done:
		t.Fatalf("waiter returned while the lock was held: %v", r.err)
	default:
	}
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if d := r.at.Sub(released); d > 2*time.Second {
		t.Fatalf("waiter took %s after the release; pub/sub did not wake it", d)
	}
	if r.lease.FencingToken() <= a.FencingToken() {
		t.Fatalf("waiter fence %d, want > %d", r.lease.FencingToken(), a.FencingToken())
	}
}

func TestRedisWaiterAcquiresAfterExpiry(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	req := redisTestReq("expiry")
	req.TTL = 800 * time.Millisecond
	start := time.Now()
	redisMustAcquire(t, l, req) // never renewed nor released: it expires, which publishes nothing

	w := redisTestReq("expiry")
	w.Wait = 10 * time.Second
	lease, err := l.Acquire(context.Background(), w)
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	d := time.Since(start)
	if d < 600*time.Millisecond || d > 4*time.Second {
		t.Fatalf("waiter acquired after %s, want soon after the 800ms lease expired", d)
	}
	lease.Release(context.Background())
}

// TestRedisLeaseCountsFromTheAcquireThatTookIt: a lease taken after a wait longer than
// its TTL counts from the acquire that took it (Sent), so a keeper started on it has the
// whole TTL ahead, not a lease that ran out while the lock was still someone else's.
func TestRedisLeaseCountsFromTheAcquireThatTookIt(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	req := redisTestReq("sent")
	req.TTL = 800 * time.Millisecond
	holder := redisMustAcquire(t, l, req) // never renewed: it expires after 800ms

	w := redisTestReq("sent")
	w.TTL, w.Wait, w.RunID = 2*time.Second, 10*time.Second, "waiter"
	waitFrom := lockrun.Boottime()
	lease, err := l.Acquire(context.Background(), w)
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	defer lease.Release(context.Background())
	got := lockrun.Boottime()
	// The holder's key lived 800ms from after its Sent; an attempt in flight at that
	// instant may have been sent a moment before it.
	if lease.Sent() < holder.Sent()+780*time.Millisecond || lease.Sent() > got {
		t.Fatalf("waiter's Sent is %v after it began waiting, the holder's lease ended %v after; want the acquire that took the lock, after that",
			lease.Sent()-waitFrom, holder.Sent()+req.TTL-waitFrom)
	}
	k := &lockrun.Keeper{Lease: lease, Grace: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	k.Run(ctx)
	cancel()
	left := k.SafeUntil() - got
	if want := w.TTL - lockrun.Drift(w.TTL) - 100*time.Millisecond; left < want {
		t.Fatalf("the keeper's lease ends %v after the acquire returned, want about the whole TTL (at least %v)", left, want)
	}
	if _, lost := k.Check(); lost {
		t.Fatal("a lease just taken after a long wait is reported lost")
	}
}

func TestRedisWaitRunsOut(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	redisMustAcquire(t, l, redisTestReq("waitout"))
	w := redisTestReq("waitout")
	w.Wait = 400 * time.Millisecond
	start := time.Now()
	_, err := l.Acquire(context.Background(), w)
	var held *lockrun.HeldError
	if !errors.As(err, &held) || held.Holder == nil || held.Holder.Node != "host-a" {
		t.Fatalf("Acquire after the wait ran out: %v, want *HeldError naming host-a", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 3*time.Second {
		t.Fatalf("wait of 400ms took %s", d)
	}
}

func TestRedisWrongPasswordSaysSoWithoutThePassword(t *testing.T) {
	// Set the password after the start: redistest's readiness PING has no AUTH.
	s := redistest.Start(t)
	redisDo(t, s.Addr, "CONFIG", "SET", "requirepass", "s3cretPW")
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"wrong in URL", Options{URL: "redis://:n0tThePW@" + s.Addr}},
		{"wrong from file", Options{URL: "redis://" + s.Addr, Password: "n0tThePW"}},
		{"file overrides URL", Options{URL: "redis://:s3cretPW@" + s.Addr, Password: "n0tThePW"}},
		{"none", Options{URL: "redis://" + s.Addr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = l.Acquire(context.Background(), redisTestReq("auth"))
			if err == nil {
				t.Fatal("Acquire with a wrong password succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, "authentication failed") {
				t.Fatalf("error %q does not say authentication failed", msg)
			}
			for _, pw := range []string{"s3cretPW", "n0tThePW"} {
				if strings.Contains(msg, pw) || strings.Contains(l.Describe(), pw) {
					t.Fatalf("password %q shown: %q / %q", pw, msg, l.Describe())
				}
			}
		})
	}
	l, err := New(Options{URL: "redis://:s3cretPW@" + s.Addr + "/2"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	redisMustAcquire(t, l, redisTestReq("auth"))
	if want := "redis " + s.Addr + "/2"; l.Describe() != want {
		t.Fatalf("Describe() = %q, want %q", l.Describe(), want)
	}
}

func TestRedisUnreachableFailsFastWithAHint(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)) // nobody listens
	l := newRedisTestLocker(t, addr, func(o *Options) { o.URL = "redis://:pw-in-url@" + addr })
	start := time.Now()
	_, err := l.Acquire(context.Background(), redisTestReq("down"))
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("Acquire against a closed port took %s", d)
	}
	if err == nil {
		t.Fatal("Acquire against a closed port succeeded")
	}
	var held *lockrun.HeldError
	if errors.As(err, &held) {
		t.Fatalf("unreachable reported as held: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"redis " + addr + " unreachable", "connection refused", "CRONLOCK_REDIS_URL"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "pw-in-url") {
		t.Fatalf("error shows the password: %q", msg)
	}
}

func TestRedisFrozenServerTimesOut(t *testing.T) {
	s := redistest.Start(t)
	l := newRedisTestLocker(t, s.Addr, func(o *Options) { o.Timeout = 300 * time.Millisecond })
	s.Stop() // accepts connections (the kernel does) but never answers
	t.Cleanup(s.Cont)
	start := time.Now()
	_, err := l.Acquire(context.Background(), redisTestReq("frozen"))
	// One operation time-out for the acquire, one for the best-effort release.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("Acquire against a frozen server took %s (timeout 300ms)", d)
	}
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("error %v, want a time-out that says so", err)
	}
}

func TestRedisRenewUnderClientPauseRespectsDeadline(t *testing.T) {
	s := redistest.Start(t)
	l := newRedisTestLocker(t, s.Addr, func(o *Options) { o.Timeout = 2 * time.Second })
	short := newRedisTestLocker(t, s.Addr, func(o *Options) {
		o.Timeout = 300 * time.Millisecond
		o.Prefix = l.prefix
	})
	lease := redisMustAcquire(t, l, redisTestReq("pause"))
	req := redisTestReq("pause2")
	lease2 := redisMustAcquire(t, short, req)

	paused := time.Now()
	redisDo(t, s.Addr, "CLIENT", "PAUSE", "1800", "ALL")

	// The caller's deadline (300ms) is shorter than the operation time-out (2s).
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := lease.Renew(ctx)
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("Renew with a 300ms deadline took %s", d)
	}
	if err == nil || errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Renew under CLIENT PAUSE: %v, want a non-ErrLockLost error", err)
	}
	// No caller deadline: the operation time-out (300ms) bounds it.
	start = time.Now()
	err = lease2.Renew(context.Background())
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("Renew with a 300ms operation time-out took %s", d)
	}
	if err == nil || errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("Renew under CLIENT PAUSE: %v, want a non-ErrLockLost error", err)
	}

	// Once the pause is over, renewal works again on fresh connections.
	time.Sleep(time.Until(paused.Add(1900 * time.Millisecond)))
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatalf("Renew after the pause: %v", err)
	}
}

func TestRedisUnlock(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()

	if h, err := l.Unlock(ctx, "free", false); h != nil || err != nil {
		t.Fatalf("Unlock of a free key: %+v, %v", h, err)
	}

	a := redisMustAcquire(t, l, redisTestReq("unlock"))
	_, err := l.Unlock(ctx, "unlock", false)
	if err == nil || !strings.Contains(err.Error(), "host-a (pid 4242, run run-a)") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Unlock without force of a live lock: %v, want a refusal naming the holder and --force", err)
	}
	if h, _ := l.Inspect(ctx, "unlock"); h == nil {
		t.Fatal("a refused Unlock removed the lock")
	}
	h, err := l.Unlock(ctx, "unlock", true)
	if err != nil || h == nil || h.Node != "host-a" || h.PID != 4242 || h.FencingToken != a.FencingToken() || !h.Revoked {
		t.Fatalf("Unlock with force: %+v, %v; want the live holder host-a, revoked", h, err)
	}
	// Revoked, not deleted: the key keeps others out until the lease the holder may still
	// run on has ended.
	if h, _ := l.Inspect(ctx, "unlock"); h == nil || !h.Revoked || h.TTLLeft <= 0 {
		t.Fatalf("after a forced Unlock of a live lock: %+v, want it kept, revoked, with its TTL", h)
	}
	if err := a.Renew(ctx); !errors.Is(err, lockrun.ErrLockLost) || !strings.Contains(err.Error(), "unlock --force") {
		t.Fatalf("the old holder's Renew: %v, want ErrLockLost naming unlock --force", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("the revoked holder's Release: %v", err)
	}
	if h, _ := l.Inspect(ctx, "unlock"); h != nil {
		t.Fatalf("lock still there after its revoked holder released it: %+v", h)
	}

	// A holder that has not confirmed its lock for longer than its TTL is stale: removed
	// without force. (Write such a value directly: the PX outlives the TTL on purpose.)
	old := time.Now().Add(-time.Minute).UnixMicro()
	v := fmt.Sprintf(`{"token":"t","fence":"7","node":"gone","pid":1,"run_id":"r","since_ms":"0","acquired_us":"%d","renewed_us":"%d","ttl_ms":10000}`, old, old)
	redisDo(t, addr, "SET", l.lockKey("stale"), v, "PX", "60000")
	h, err = l.Unlock(ctx, "stale", false)
	if err != nil || h == nil || h.Node != "gone" || h.FencingToken != 7 {
		t.Fatalf("Unlock of a stale lock: %+v, %v", h, err)
	}
}

func TestRedisInspectAndList(t *testing.T) {
	addr := redistest.Addr(t)
	l := newRedisTestLocker(t, addr)
	ctx := context.Background()

	if h, err := l.Inspect(ctx, "a"); h != nil || err != nil {
		t.Fatalf("Inspect of a free key: %+v, %v", h, err)
	}
	a := redisMustAcquire(t, l, redisTestReq("a"))
	breq := redisTestReq("team/b@x")
	breq.Node = "host-b"
	redisMustAcquire(t, l, breq)
	// Something else under the prefix that is not a lock.
	redisDo(t, addr, "SET", l.prefix+"other:lock", "x")

	h, err := l.Inspect(ctx, "a")
	if err != nil || h == nil || h.Node != "host-a" || h.TTLLeft <= 0 {
		t.Fatalf("Inspect: %+v, %v", h, err)
	}
	all, err := l.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(all) != 2 || all["a"].Node != "host-a" || all["team/b@x"].Node != "host-b" || all["a"].FencingToken != a.FencingToken() {
		t.Fatalf("List = %+v", all)
	}
	a.Release(ctx)
	if h, err := l.Inspect(ctx, "a"); h != nil || err != nil {
		t.Fatalf("Inspect after release: %+v, %v", h, err)
	}
	if all, _ := l.List(ctx); len(all) != 1 {
		t.Fatalf("List after release = %+v", all)
	}
}

// An ACL user without channel rights (the default for new users since Redis 7) cannot
// PUBLISH or SUBSCRIBE: release must still work, and waiters fall back to polling.
func TestRedisACLWithoutChannelRights(t *testing.T) {
	s := redistest.Start(t)
	redisDo(t, s.Addr, "ACL", "SETUSER", "cron", "on", ">cronpw", "~*", "resetchannels", "+@all")
	l := newRedisTestLocker(t, s.Addr, func(o *Options) { o.URL = "redis://cron:cronpw@" + s.Addr })
	ctx := context.Background()
	if err := l.srv.Commands.(*redis.Client).Publish(ctx, "anything", "x").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("PUBLISH as the limited user: %v; want NOPERM, else the test proves nothing", err)
	}

	lease := redisMustAcquire(t, l, redisTestReq("acl"))
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release without channel rights: %v", err)
	}
	if got := redisDo(t, s.Addr, "EXISTS", l.lockKey("acl")); got != "0" {
		t.Fatal("Release without channel rights left the lock")
	}

	req := redisTestReq("acl")
	req.TTL = 500 * time.Millisecond
	redisMustAcquire(t, l, req)
	w := redisTestReq("acl")
	w.Wait = 5 * time.Second
	if _, err := l.Acquire(ctx, w); err != nil {
		t.Fatalf("waiter without channel rights: %v", err)
	}
	if h, err := l.Unlock(ctx, "acl", true); err != nil || h == nil {
		t.Fatalf("Unlock without channel rights: %+v, %v", h, err)
	}
}

// TestRedisErrorsNeverNameThePassword: a failure's message is made of parts that hold no
// password, so it is the same whatever the password: never a password replaced by its
// text, which garbles "127.0.0.1" for the password "1".
func TestRedisErrorsNeverNameThePassword(t *testing.T) {
	msg := func(pw string) string {
		l, err := New(Options{URL: "redis://127.0.0.1:1", Password: pw, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, err = l.Acquire(context.Background(), lockrun.Request{Key: "k", TTL: time.Second})
		if err == nil {
			t.Fatal("acquire on a closed port succeeded")
		}
		return err.Error()
	}
	want := msg("reference-password-71")
	if !strings.Contains(want, "127.0.0.1:1") {
		t.Fatalf("the message %q does not name the server", want)
	}
	for _, pw := range []string{"1", "2", "7", ":", "@", "%40", "127.0.0.1", "p@ss w0rd", "xxxxx", "redis"} {
		if got := msg(pw); got != want {
			t.Errorf("with the password %q: %q, want %q", pw, got, want)
		}
	}
}

// TestRedisNewRefusesBadSettings: New refuses a URL it cannot read (conn.ParseURL says
// why, without the password) and a prefix that would break the keys' hash tags.
func TestRedisNewRefusesBadSettings(t *testing.T) {
	if _, err := New(Options{URL: "redis://:s3cretPW@h:notaport"}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New with a bad port: %v; want an error without the password", err)
	}
	if _, err := New(Options{URL: "redis://h", Prefix: "a{b}"}); err == nil {
		t.Error("a prefix with braces was accepted")
	}
}
