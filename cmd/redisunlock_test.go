package cmd

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// TestUnlockForceOfALiveRunLetsNobodyIn: `unlock --force` of a lock whose holder is alive
// must not let another run start while that holder's job still runs. The holder only
// learns of the unlock at its next renewal (ttl/3), so the lock is revoked and kept until
// its lease ends: the holder stops its job (125, lock_lost) and only then may a waiter
// start. A kernel file lock held by each job is the referee.
func TestUnlockForceOfALiveRunLetsNobodyIn(t *testing.T) {
	c := newCLI(t, "redis://"+redistest.Addr(t))
	ref := filepath.Join(c.dir, "referee")
	holder, sc := c.startUntil(lineHas("started"), "run", "-k", "rv", "--ttl", "6s", "--grace", "1s", "--",
		"flock", "-n", ref, "sh", "-c", "echo started >&2; exec sleep 60")
	defer holder.Process.Kill()

	code, out, errs := c.run("unlock", "-k", "rv", "--force")
	if code != 0 || !strings.Contains(out, "revoked rv") || !strings.Contains(out, "clinode") {
		t.Fatalf("unlock --force: exit %d, stdout %q, stderr %q; want the live holder named and its lock revoked", code, out, errs)
	}
	if code, out, _ := c.run("status", "-k", "rv"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("status after the revocation: exit %d, %q; want the lock shown as revoked", code, out)
	}
	if code, _, errs := c.run("run", "-k", "rv", "--conflict-exit-code", "99", "--", "true"); code != 99 {
		t.Fatalf("a run right after the revocation: exit %d, %s; want 99 (the lock is still held)", code, errs)
	}
	code, out, errs = c.run("run", "-k", "rv", "--ttl", "6s", "--wait", "30s", "--",
		"sh", "-c", "flock -n "+ref+" true && echo free || echo OVERLAP")
	if code != 0 || strings.TrimSpace(out) != "free" {
		t.Fatalf("the waiter: exit %d, stdout %q, stderr %q; want its job to start after the revoked one ended", code, out, errs)
	}
	for sc.Scan() {
	}
	if code := c.exitCode(holder.Wait()); code != 125 {
		t.Fatalf("the revoked holder exited %d, want 125", code)
	}
	rows := c.history("rv")
	if len(rows) != 3 || rows[2].Status != runstatus.LockLost || !strings.Contains(rows[2].Error, "unlock --force") {
		t.Fatalf("history %+v: want the revoked run lock_lost, naming unlock --force", rows)
	}
}

// TestLockWithoutExpirySaysSo: a lock key with no TTL (SET by hand, or a PERSIST) never
// frees itself, and cronlock never writes one: every run would skip in silence for good.
// The skip says so and how to remove it; status marks it; unlock without --force names a
// value cronlock did not write for what it is, not as a holder that "looks alive".
func TestLockWithoutExpirySaysSo(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr)
	mustDo(t, addr, "SET", c.prefix()+"{noexp}:lock", "left-by-hand")
	code, _, errs := c.run("run", "-k", "noexp", "--", "true")
	if code != 0 || !strings.Contains(errs, "no expiry") || !strings.Contains(errs, "cronlock unlock --key noexp --force") {
		t.Fatalf("a skip past a lock without expiry: exit %d, stderr %q; want a line saying it never frees itself and how to remove it", code, errs)
	}
	if code, out, _ := c.run("status", "--json", "-k", "noexp"); code != 0 || !strings.Contains(out, `"no_expiry":true`) {
		t.Fatalf("status --json: exit %d, %q; want no_expiry", code, out)
	}
	code, _, errs = c.run("unlock", "-k", "noexp")
	if code != 125 || !strings.Contains(errs, "did not write") || strings.Contains(errs, "looks alive") {
		t.Fatalf("unlock without --force: exit %d, stderr %q; want the value named as not cronlock's", code, errs)
	}
	if code, out, errs := c.run("unlock", "-k", "noexp", "--force"); code != 0 || !strings.Contains(out, "removed noexp") {
		t.Fatalf("unlock --force: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := c.run("run", "-k", "noexp", "--", "echo", "ran"); code != 0 || out != "ran\n" {
		t.Fatalf("the run after the removal: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestUnlockOddReplyIsNoRemoval: a server that is not Redis (or a proxy that mangles
// replies) answering unlock with an array unlock.lua never returns must not make unlock
// say it removed a lock.
func TestUnlockOddReplyIsNoRemoval(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
					conn.Write([]byte("*2\r\n:5\r\n$3\r\nabc\r\n"))
				}
			}()
		}
	}()
	c := newCLI(t, "redis://"+ln.Addr().String())
	code, out, errs := c.run("unlock", "-k", "odd", "--force")
	if code != 125 || strings.Contains(out, "removed") || !strings.Contains(errs, "unexpected reply") {
		t.Fatalf("unlock against a server answering nonsense: exit %d, stdout %q, stderr %q; want 125 and no removal claimed", code, out, errs)
	}
}

// TestRenewalCutByTheLeaseSaysSo: a renewal that the lease cuts short (it must end before
// the job's SIGTERM) timed out well before --redis-timeout, and the lock_lost line said it
// "did not answer within 2s ... raise --redis-timeout", advice that cannot help. It names
// the time the try had and points at the server and --ttl.
func TestRenewalCutByTheLeaseSaysSo(t *testing.T) {
	p, err := faultproxy.Start(redistest.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := newCLI(t, "redis://"+p.Addr)
	holder, sc := c.startUntil(lineHas("started"), "run", "-k", "cut", "--ttl", "3s", "--grace", "1s", "--",
		"sh", "-c", "echo started >&2; exec sleep 30")
	defer holder.Process.Kill()
	p.Set(faultproxy.Blackhole, 0)
	lost := ""
	for sc.Scan() {
		if strings.Contains(sc.Text(), "lock was lost") {
			lost = sc.Text()
		}
	}
	// (The release after it had its whole --redis-timeout: its line may name it.)
	if code := c.exitCode(holder.Wait()); code != 125 || strings.Contains(lost, "raise --redis-timeout") ||
		!strings.Contains(lost, "the lease left") || !strings.Contains(lost, "raise --ttl") {
		t.Fatalf("a holder whose server stalled: exit %d, lock_lost line %q; want 125 naming the time the lease left, not --redis-timeout", code, lost)
	}
}
