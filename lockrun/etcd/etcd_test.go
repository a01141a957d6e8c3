package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/internal/etcdtest"
	"cronlock/lockrun"
)

func newEtcdLocker(t *testing.T, srv *etcdtest.Server, o Options) *Locker {
	t.Helper()
	o.Endpoints = []string{srv.Endpoint}
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func etcdReq(key, run string) lockrun.Request {
	return lockrun.Request{Key: key, TTL: 2 * time.Second, Node: "n-" + run, PID: 1, RunID: run}
}

// TestEtcdLockCycle: take, hold off a second taker, renew, release; the fencing token is
// the key's create revision and rises with each acquisition.
func TestEtcdLockCycle(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	a, err := l.Acquire(ctx, etcdReq("cycle", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(ctx, etcdReq("cycle", "r2"))
	var held *lockrun.HeldError
	if !errors.As(err, &held) || held.Holder == nil || held.Holder.RunID != "r1" || held.Holder.FencingToken != a.FencingToken() {
		t.Fatalf("second acquire: %v (holder %+v), want held by r1 with token %d", err, held, a.FencingToken())
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("renew after release: %v, want ErrLockLost", err)
	}
	b, err := l.Acquire(ctx, etcdReq("cycle", "r3"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if b.FencingToken() <= a.FencingToken() {
		t.Fatalf("token %d after %d: want it to rise", b.FencingToken(), a.FencingToken())
	}
	kv, err := srv.Root().Get(ctx, "cronlock:{cycle}:lock")
	if err != nil || len(kv.Kvs) != 1 || uint64(kv.Kvs[0].CreateRevision) != b.FencingToken() {
		t.Fatalf("lock key %+v (%v): want create revision %d", kv, err, b.FencingToken())
	}
}

// TestEtcdRenewSeesKeyReplaced: a key deleted and created again by someone else is a lost
// lock, although the lease itself is still alive.
func TestEtcdRenewSeesKeyReplaced(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	a, err := l.Acquire(ctx, etcdReq("replaced", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	root := srv.Root()
	if _, err := root.Delete(ctx, "cronlock:{replaced}:lock"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "cronlock:{replaced}:lock", `{"node":"intruder"}`); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("renew: %v, want ErrLockLost", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lockrun.ErrLockLost) {
		t.Fatalf("release: %v, want ErrLockLost", err)
	}
	if kv, _ := root.Get(ctx, "cronlock:{replaced}:lock"); len(kv.Kvs) != 1 {
		t.Fatal("the release removed another holder's key")
	}
}

// TestEtcdWaitWakesOnWatch: with polling slowed to a minute, a waiter still takes the lock
// soon after its release: the watch on the key woke it (with users too: the watch carries
// the run's token).
func TestEtcdWaitWakesOnWatch(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprint("auth=", auth), func(t *testing.T) { waitWakesOnWatch(t, auth) })
	}
}

func waitWakesOnWatch(t *testing.T, auth bool) {
	srv := etcdtest.Start(t, etcdtest.Options{Auth: auth})
	o := Options{}
	if auth {
		o.User, o.Password = etcdtest.User, etcdtest.Password
	}
	l := newEtcdLocker(t, srv, o)
	l.poll = time.Minute
	ctx := context.Background()
	a, err := l.Acquire(ctx, etcdReq("watch", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		req := etcdReq("watch", "r2")
		req.Wait = 20 * time.Second
		b, err := l.Acquire(ctx, req)
		if err == nil {
			b.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter did not take the lock after its release: the watch did not wake it")
	}
}

// TestEtcdRenewAfterRestartWithAuth: a restart makes etcd forget every auth token, while
// the lease lives on. The next renewal logs in again and keeps the lock; it does not spend
// its time-out resending the dead token.
func TestEtcdRenewAfterRestartWithAuth(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{Auth: true})
	l := newEtcdLocker(t, srv, Options{User: etcdtest.User, Password: etcdtest.Password, Timeout: 2 * time.Second})
	ctx := context.Background()
	req := etcdReq("relogin", "r1")
	req.TTL = 30 * time.Second
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// etcd writes what it applied to disk every 100ms; a restart replays only later raft
	// entries, so only a token older than that is forgotten (as every running job's is).
	time.Sleep(time.Second)
	srv.Restart()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.Renew(rctx); err != nil {
		t.Fatalf("renew after the restart: %v; want it renewed", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// TestEtcdUserWithoutAuth: a user configured for a cluster that has authentication off
// works (as the etcd client's own login did), and goes on working once it is turned on.
func TestEtcdUserWithoutAuth(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{User: "cronlock", Password: "pw-1"})
	ctx := context.Background()
	a, err := l.Acquire(ctx, etcdReq("authoff", "r1"))
	if err != nil {
		t.Fatalf("acquire with auth off: %v", err)
	}
	root := srv.Root()
	for i, f := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "rw"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "rw", "cronlock:", clientv3.GetPrefixRangeEnd("cronlock:"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "cronlock", "pw-1"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "cronlock", "rw"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := f(); err != nil {
			t.Fatalf("auth set-up step %d: %v", i+1, err)
		}
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("renew once auth is on: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// TestEtcdUnlockLeaselessKey: a lock key written without a lease (by hand, by another
// tool) never goes by itself; unlock without --force says so instead of calling its lease
// alive, and --force removes it.
func TestEtcdUnlockLeaselessKey(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	if _, err := srv.Root().Put(ctx, "cronlock:{bare}:lock", "disabled by ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Unlock(ctx, "bare", false); err == nil || !strings.Contains(err.Error(), "no lease") || strings.Contains(err.Error(), "lease is alive") {
		t.Fatalf("unlock without --force: %v; want a refusal that says the key has no lease", err)
	}
	if h, err := l.Unlock(ctx, "bare", true); err != nil || h == nil {
		t.Fatalf("unlock --force: %v %v; want the key removed", h, err)
	}
}

// TestEtcdElectionIsTransient: the errors a cluster answers while it elects a leader (the
// etcd client hands them over as its own error type, not as gRPC's Unavailable) are worth
// waiting out for a --wait run, and say so.
func TestEtcdElectionIsTransient(t *testing.T) {
	l, err := New(Options{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTooManyRequests} {
		err := l.userError("take lock k", e)
		if !retryableEtcdError(err) || !strings.Contains(err.Error(), "try again") {
			t.Errorf("%v: %q, retryable %v; want a retryable error that says to try again", e, err, retryableEtcdError(err))
		}
	}
	for _, e := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrNoSpace} {
		if retryableEtcdError(l.userError("take lock k", e)) {
			t.Errorf("%v taken as transient", e)
		}
	}
}

// TestEtcdFleetRecordTrimmed: the record keeps the newest FleetKeep entries (and at most a
// tenth more between trims), newest first.
func TestEtcdFleetRecordTrimmed(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{FleetKeep: 10})
	ctx := context.Background()
	var last string
	for i := range 25 {
		last = fmt.Sprintf("0190%04d-0000-7000-8000-000000000000", i)
		if err := l.RecordRun(ctx, "trim", &lockrun.RunRecord{RunID: last, Node: "n", Status: "error", Exit: 125}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := srv.Root().Get(ctx, "cronlock:{trim}:runs/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count < 10 || resp.Count > 11 {
		t.Fatalf("%d entries stored, want 10 or 11", resp.Count)
	}
	es, err := l.Fleet(ctx, "trim", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) < 10 || es[0].RunID != last {
		t.Fatalf("fleet: %d entries, newest %q; want at least 10, newest %q", len(es), es[0].RunID, last)
	}
	keys, err := l.FleetKeys(ctx)
	if err != nil || strings.Join(keys, ",") != "trim" {
		t.Fatalf("FleetKeys = %v, %v; want [trim]", keys, err)
	}
}

// TestEtcdWrongPassword: a refused login is one error that names what to check, never
// the password.
func TestEtcdWrongPassword(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{Auth: true})
	l := newEtcdLocker(t, srv, Options{User: etcdtest.User, Password: "wrong-horse-battery"})
	_, err := l.Acquire(context.Background(), etcdReq("auth", "r1"))
	if err == nil || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "wrong-horse") {
		t.Fatalf("err = %v; want an authentication failure without the password", err)
	}
	anon := newEtcdLocker(t, srv, Options{})
	if _, err := anon.Acquire(context.Background(), etcdReq("auth", "r1")); err == nil || !strings.Contains(err.Error(), "CRONLOCK_ETCD_USER") {
		t.Fatalf("no user: %v; want an error naming CRONLOCK_ETCD_USER", err)
	}
	ok := newEtcdLocker(t, srv, Options{User: etcdtest.User, Password: etcdtest.Password})
	a, err := ok.Acquire(context.Background(), etcdReq("auth", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	a.Release(context.Background())
}

// TestEtcdEndpointPasswordNeverShown: a password pasted into an endpoint URL is refused
// without being repeated.
func TestEtcdEndpointPasswordNeverShown(t *testing.T) {
	_, err := New(Options{Endpoints: []string{"http://127.0.0.1:2379", "http://bob:hunter2@127.0.0.1:2379"}})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "CRONLOCK_ETCD_PASSWORD_FILE") {
		t.Fatalf("err = %v; want a refusal naming the password file, without the password", err)
	}
}

// TestEtcdMinHold: a release before --min-hold keeps the lock, marked released, until the
// hold is over; unlock may remove such a lock without --force.
func TestEtcdMinHold(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	req := etcdReq("hold", "r1")
	req.MinHold = 30 * time.Second
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var held *lockrun.HeldError
	if _, err := l.Acquire(ctx, etcdReq("hold", "r2")); !errors.As(err, &held) {
		t.Fatalf("acquire during the hold: %v, want held", err)
	}
	h, err := l.Unlock(ctx, "hold", false)
	if err != nil || h == nil || h.RunID != "r1" {
		t.Fatalf("unlock of a held-after-release lock: %+v, %v; want r1 removed", h, err)
	}
	b, err := l.Acquire(ctx, etcdReq("hold", "r3"))
	if err != nil {
		t.Fatal(err)
	}
	b.Release(ctx)
}

// TestEtcdDuplicatesByRevision: two runs one after the other are not duplicates even when
// the second host's clock is 10s behind (the hosts' times overlap); a run that kept going
// after its key was removed and taken over is one, both it and the taker.
func TestEtcdDuplicatesByRevision(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	run := func(id string, now func() time.Time) lockrun.Lease {
		t.Helper()
		req := etcdReq("dup", id)
		req.Now = now
		a, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		a.SetRecord(&lockrun.RunRecord{RunID: id, Node: "n-" + id, Status: "succeeded", Tries: 1})
		return a
	}
	a := run("0190a000-0000-7000-8000-000000000001", nil)
	a.Release(ctx)
	b := run("0190a000-0000-7000-8000-000000000002", func() time.Time { return time.Now().Add(-10 * time.Second) })
	b.Release(ctx)
	es, err := l.Fleet(ctx, "dup", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Duplicate {
			t.Fatalf("%s marked DUPLICATE: runs one after the other, only the hosts' clocks overlap (%+v)", e.RunID, es)
		}
	}
	c := run("0190a000-0000-7000-8000-000000000003", nil)
	if _, err := l.Unlock(ctx, "dup", true); err != nil {
		t.Fatal(err)
	}
	d := run("0190a000-0000-7000-8000-000000000004", nil)
	d.Release(ctx)
	c.Release(ctx) // lost, but its job ran until now: an overlap
	es, _ = l.Fleet(ctx, "dup", 0)
	dups := 0
	for _, e := range es {
		if e.Duplicate {
			dups++
		}
	}
	if dups != 2 {
		t.Fatalf("%d DUPLICATE entries, want the 2 overlapping runs: %+v", dups, es)
	}
}

// TestEtcdGiveBackUndoesEntry: a run whose job never started gives its tick back; released
// without an outcome to record (stopped before the job), its running entry goes with its
// claim, so the record shows neither an abandoned run nor two runs of the tick once the
// next host runs it. With an outcome (a command not found), the entry stays, completed.
func TestEtcdGiveBackUndoesEntry(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	req := etcdReq("gb", "01900000-0000-7000-8000-000000000001")
	req.Tick = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := l.Fleet(ctx, "gb", 0); err != nil || len(es) != 1 || es[0].Status != "running" {
		t.Fatalf("while held: %+v, %v; want the running entry written with the claim", es, err)
	}
	a.GiveBackTick()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if es, err := l.Fleet(ctx, "gb", 0); err != nil || len(es) != 0 {
		t.Fatalf("after the give-back: %+v, %v; want no entry", es, err)
	}
	req.RunID = "01900000-0000-7000-8000-000000000002"
	b, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("the next run of the given-back tick: %v", err)
	}
	b.GiveBackTick()
	b.SetRecord(&lockrun.RunRecord{RunID: req.RunID, Node: req.Node, Status: "error", Exit: 127, Tick: req.Tick})
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if es, err := l.Fleet(ctx, "gb", 0); err != nil || len(es) != 1 || es[0].Status != "error" || es[0].Duplicate {
		t.Fatalf("after a give-back with an outcome: %+v, %v; want its error entry", es, err)
	}
}

// TestEtcdReleaseCarriesPending: a run whose completion never reached the cluster is
// abandoned in the record until a later release carries its kept completion
// (jobrun's pending.go): then it is completed with its outcome, in that release's own
// transaction, and its late write is not read as a hold that overlaps the runs between.
func TestEtcdReleaseCarriesPending(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	const idA, idB, idC = "0190b000-0000-7000-8000-000000000001", "0190b000-0000-7000-8000-000000000002", "0190b000-0000-7000-8000-000000000003"
	a, err := l.Acquire(ctx, etcdReq("pend", idA))
	if err != nil {
		t.Fatal(err)
	}
	recA := &lockrun.RunRecord{RunID: idA, Node: "n-" + idA, Status: "succeeded", Tries: 1}
	pa, ok := a.(interface {
		SetPending([]lockrun.PendingCompletion)
		AcquiredUS() string
	})
	if !ok {
		t.Fatal("the etcd lease takes no kept completions")
	}
	startA, endA := pa.AcquiredUS(), fmt.Sprint(time.Now().UnixMicro())
	// A's release is lost: its lock is deleted from outside, as its lease's end would.
	if _, err := l.Unlock(ctx, "pend", true); err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, etcdReq("pend", idB))
	if err != nil {
		t.Fatal(err)
	}
	b.SetRecord(&lockrun.RunRecord{RunID: idB, Node: "n-" + idB, Status: "succeeded", Tries: 1})
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if es, _ := l.Fleet(ctx, "pend", 0); len(es) != 2 || es[1].Status != "abandoned" {
		t.Fatalf("before the kept completion is sent: %+v; want A abandoned", es)
	}
	c, err := l.Acquire(ctx, etcdReq("pend", idC))
	if err != nil {
		t.Fatal(err)
	}
	c.SetRecord(&lockrun.RunRecord{RunID: idC, Node: "n-" + idC, Status: "failed", Exit: 3, Tries: 1})
	c.(interface {
		SetPending([]lockrun.PendingCompletion)
	}).SetPending([]lockrun.PendingCompletion{{Key: "pend", RunID: idA, Entry: lockrun.EncodeFleetEntry(recA, a.FencingToken()), StartUS: startA, EndUS: endA}})
	if err := c.Release(ctx); err != nil || c.RecordErr() != nil {
		t.Fatalf("release with a kept completion: %v, record %v", err, c.RecordErr())
	}
	es, err := l.Fleet(ctx, "pend", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lockrun.FleetEntry{}
	for _, e := range es {
		got[e.RunID] = e
		if e.Duplicate {
			t.Errorf("%s marked DUPLICATE: %+v", e.RunID, es)
		}
	}
	if e := got[idA]; len(es) != 3 || e.Status != "succeeded" || e.Fence != a.FencingToken() || e.EndUS == 0 || got[idC].Status != "failed" {
		t.Fatalf("entries %+v; want A completed as succeeded with its token, B and C", es)
	}
}
