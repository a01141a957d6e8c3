package etcd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"cronlock/internal/etcdtest"
	"cronlock/lockrun"
)

// standbyReq is a standby's ask for key's tick, with slots standby slots.
func standbyReq(key, run string, tick time.Time, slots int, slotTTL time.Duration) lockrun.Request {
	req := tickReq(key, run, tick)
	req.Standby = lockrun.StandbyRequest{Mode: "lost", Slots: slots, MaxAttempts: 3, SlotTTL: slotTTL}
	return req
}

// tickReq is a run of key's every-minute tick.
func tickReq(key, run string, tick time.Time) lockrun.Request {
	req := etcdReq(key, run)
	req.Tick, req.Schedule, req.Zone = tick, "* * * * *", "UTC"
	return req
}

// TestEtcdStandbySlotsRace: many standbys (each with its own client, as on as many hosts)
// released together at one tick never hold more than --standbys slots: each slot is
// taken in a transaction of its own, created only if absent. Several rounds, each on a
// key of its own: a count taken outside a transaction let more through in nearly every
// round.
func TestEtcdStandbySlotsRace(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	const standbys, slots, rounds = 12, 2, 5
	ls := make([]*Locker, standbys)
	for i := range ls {
		ls[i] = newEtcdLocker(t, srv, Options{})
		if _, err := ls[i].FleetKeys(context.Background()); err != nil { // connected before the race
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Minute)
	for round := range rounds {
		key := fmt.Sprintf("race%d", round)
		holder, err := ls[0].Acquire(ctx, tickReq(key, "holder", tick))
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make([]error, standbys)
		var wg sync.WaitGroup
		for i := range standbys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = ls[i].Acquire(ctx, standbyReq(key, fmt.Sprintf("sb%02d", i), tick, slots, 10*time.Second))
			}()
		}
		close(start)
		wg.Wait()
		waiting := 0
		for i, err := range errs {
			var w *lockrun.StandbyWaitError
			var te *lockrun.TickError
			switch {
			case errors.As(err, &w):
				waiting++
			case errors.As(err, &te):
			default:
				t.Fatalf("round %d, standby %d: %v; want a wait or a skip", round, i, err)
			}
		}
		kv, err := srv.Root().Get(ctx, ls[0].standbyDir(key), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if waiting != slots || len(kv.Kvs) != slots {
			t.Fatalf("round %d: %d of %d standbys wait, %d slot keys; want %d (--standbys)", round, waiting, standbys, len(kv.Kvs), slots)
		}
		// A standby asking again keeps its slot; one that was refused is refused again.
		for i, err := range errs {
			var w *lockrun.StandbyWaitError
			_, again := ls[i].Acquire(ctx, standbyReq(key, fmt.Sprintf("sb%02d", i), tick, slots, 10*time.Second))
			var w2 *lockrun.StandbyWaitError
			if errors.As(err, &w) != errors.As(again, &w2) {
				t.Fatalf("round %d, standby %d asked again: %v after %v; want the same", round, i, again, err)
			}
		}
		holder.Release(ctx)
	}
}

// TestEtcdStandbySlotFreedWhenKilled: a standby's slot lives on its own lease, so a
// standby SIGKILLed while it waits (a process of its own, here this test's binary) frees
// it when that lease ends, and the next standby gets it.
func TestEtcdStandbySlotFreedWhenKilled(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Minute)
	holder, err := l.Acquire(ctx, tickReq("killed", "holder", tick))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)

	cmd := exec.Command(os.Args[0], "-test.run", "^TestEtcdStandbySlotChild$")
	cmd.Env = append(os.Environ(), "CRONLOCK_TEST_ETCD_SLOT_CHILD="+srv.Endpoint+" killed "+strconv.FormatInt(tick.UnixMicro(), 10))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "waiting\n" {
		t.Fatalf("the child standby said %q; want waiting", line)
	}
	kv, err := srv.Root().Get(ctx, l.standbyDir("killed"), clientv3.WithPrefix())
	if err != nil || len(kv.Kvs) != 1 || kv.Kvs[0].Lease == 0 || string(kv.Kvs[0].Value) != "child" {
		t.Fatalf("slot keys %v (%v); want the child's, on a lease", kv.Kvs, err)
	}
	if _, err := l.Acquire(ctx, standbyReq("killed", "next", tick, 1, 2*time.Second)); !isTickSkip(err) {
		t.Fatalf("a second standby while the child waits: %v; want a skip (one slot)", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(30 * time.Second) // the slot's lease of 2 s ends well before
	for {
		_, err := l.Acquire(ctx, standbyReq("killed", "next", tick, 1, 2*time.Second))
		var w *lockrun.StandbyWaitError
		if errors.As(err, &w) {
			break
		}
		if !isTickSkip(err) || time.Now().After(deadline) {
			t.Fatalf("after the child's SIGKILL: %v; want its slot free once its lease ended", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEtcdTakeoverFreesSlot: the takeover's transaction deletes the standby's slot, and
// only its own: a slot key on another lease stays.
func TestEtcdTakeoverFreesSlot(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Minute)
	if _, err := l.Acquire(ctx, tickReq("freed", "holder", tick)); err != nil {
		t.Fatal(err)
	}
	var w *lockrun.StandbyWaitError
	for _, run := range []string{"sb1", "sb2"} {
		if _, err := l.Acquire(ctx, standbyReq("freed", run, tick, 2, 10*time.Second)); !errors.As(err, &w) {
			t.Fatalf("standby %s: %v; want a wait", run, err)
		}
	}
	root := srv.Root()
	lock, err := root.Get(ctx, l.lockKey("freed"))
	if err != nil || len(lock.Kvs) != 1 {
		t.Fatalf("lock %+v (%v)", lock, err)
	}
	if _, err := root.Revoke(ctx, clientv3.LeaseID(lock.Kvs[0].Lease)); err != nil { // the holder's host is lost
		t.Fatal(err)
	}
	req := standbyReq("freed", "sb1", tick, 2, 10*time.Second)
	req.Standby.LostRun = "holder"
	lease, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	defer lease.Release(ctx)
	kv, err := root.Get(ctx, l.standbyDir("freed"), clientv3.WithPrefix())
	if err != nil || len(kv.Kvs) != 1 || string(kv.Kvs[0].Value) != "sb2" {
		t.Fatalf("slot keys after sb1's takeover: %+v (%v); want sb2's alone", kv.Kvs, err)
	}
}

// TestEtcdOlderSlotsCounted: an older cronlock's slot (standby/<run id>, no lease, its
// expiry as value) counts until it expires, in the standby's count and in jobs', and is
// swept after.
func TestEtcdOlderSlotsCounted(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	l := newEtcdLocker(t, srv, Options{})
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Minute)
	holder, err := l.Acquire(ctx, tickReq("older", "holder", tick))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	old := l.standbyDir("older") + "old-run"
	put := func(exp time.Time) {
		if _, err := srv.Root().Put(ctx, old, strconv.FormatInt(exp.UnixMicro(), 10)); err != nil {
			t.Fatal(err)
		}
	}
	put(time.Now().Add(time.Hour))
	if _, err := l.Acquire(ctx, standbyReq("older", "new", tick, 1, 10*time.Second)); !isTickSkip(err) {
		t.Fatalf("a standby beside an older cronlock's live slot: %v; want a skip (one slot)", err)
	}
	st, err := l.JobStates(ctx, []string{"older"}, time.Now())
	if err != nil || st[0].Standbys != 1 {
		t.Fatalf("jobs: %+v (%v); want 1 standby, the older cronlock's", st, err)
	}
	put(time.Now().Add(-time.Second))
	var w *lockrun.StandbyWaitError
	if _, err := l.Acquire(ctx, standbyReq("older", "new", tick, 1, 10*time.Second)); !errors.As(err, &w) {
		t.Fatalf("a standby beside an older cronlock's expired slot: %v; want a wait", err)
	}
	kv, err := srv.Root().Get(ctx, l.standbyDir("older"), clientv3.WithPrefix())
	if err != nil || len(kv.Kvs) != 1 || string(kv.Kvs[0].Value) != "new" {
		t.Fatalf("slot keys %v (%v); want the new standby's alone (the expired one swept)", kv.Kvs, err)
	}
	if st, err := l.JobStates(ctx, []string{"older"}, time.Now()); err != nil || st[0].Standbys != 1 {
		t.Fatalf("jobs: %+v (%v); want 1 standby, the new one", st, err)
	}
}

func isTickSkip(err error) bool {
	var te *lockrun.TickError
	return errors.As(err, &te)
}

// TestEtcdStandbySlotChild is the standby TestEtcdStandbySlotFreedWhenKilled kills: with
// CRONLOCK_TEST_ETCD_SLOT_CHILD set ("endpoint key tick-µs") it takes the key's one slot,
// says "waiting" and asks again and again, as a waiting standby does, which keeps its
// slot's lease alive. Without it, it does nothing.
func TestEtcdStandbySlotChild(t *testing.T) {
	f := strings.Fields(os.Getenv("CRONLOCK_TEST_ETCD_SLOT_CHILD"))
	if len(f) != 3 {
		return
	}
	l, err := New(Options{Endpoints: []string{f[0]}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	us, _ := strconv.ParseInt(f[2], 10, 64)
	for i := 0; ; i++ {
		_, err = l.Acquire(context.Background(), standbyReq(f[1], "child", time.UnixMicro(us).UTC(), 1, 2*time.Second))
		var w *lockrun.StandbyWaitError
		if !errors.As(err, &w) {
			t.Fatalf("child standby: %v; want a wait", err)
		}
		if i == 0 {
			fmt.Println("waiting")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
