package cmd

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

// ckptBackends are the backends the checkpoint tests run on; the etcd build adds etcd.
var ckptBackends = []string{"local", "redis"}

// ckptEtcd, set by the etcd build, starts a private etcd and returns a cli on it and a
// function that deletes one of its keys by hand.
var ckptEtcd func(t *testing.T) (*cli, func(name string))

// ckptCLI is a cli for one backend whose jobs find the binary under test as $CL, and a
// function that deletes a backend key by hand (nil for local).
func ckptCLI(t *testing.T, backend string) (*cli, func(name string)) {
	t.Helper()
	var c *cli
	var del func(string)
	switch backend {
	case "redis":
		addr := redistest.Addr(t)
		c = newCLI(t, "redis://"+addr+"/0")
		del = func(name string) { mustDo(t, addr, "DEL", name) }
	case "etcd":
		c, del = ckptEtcd(t)
	default:
		c = newCLI(t, "")
		c.env = append(c.env, "CRONLOCK_BACKEND=local")
	}
	c.env = append(c.env, "CL="+cronlockBin)
	return c, del
}

// ckptShow is `checkpoint show --key key --json`, decoded.
type ckptShown struct {
	Last *struct {
		Value *string `json:"value"`
		Try   int     `json:"try"`
		Scope string  `json:"scope"`
	} `json:"last"`
	LastSuccess *struct {
		Value *string `json:"value"`
	} `json:"last_success"`
}

func ckptShow(t *testing.T, c *cli, key string) ckptShown {
	t.Helper()
	code, out, errs := c.run("checkpoint", "show", "--key", key, "--json")
	if code != 0 {
		t.Fatalf("checkpoint show: exit %d, %s", code, errs)
	}
	var s ckptShown
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("checkpoint show --json: %v in %q", err, out)
	}
	return s
}

func value(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

// The second try of a run loads what the first saved; a later run of the key finds
// nothing of its own (another scope) but the last succeeded run's value.
func TestCheckpointResumesAcrossTries(t *testing.T) {
	for _, backend := range ckptBackends {
		t.Run(backend, func(t *testing.T) {
			c, _ := ckptCLI(t, backend)
			job := `v=$("$CL" checkpoint load); rc=$?; echo "try=$CRONLOCK_TRY rc=$rc v=$v"
"$CL" checkpoint save "done-$CRONLOCK_TRY" || exit 9
[ "$CRONLOCK_TRY" = 2 ]`
			code, out, errs := c.run("run", "-k", "ck", "--retries", "1", "--retry-delay", "1ms", "--", "sh", "-c", job)
			if code != 0 || out != "try=1 rc=1 v=\ntry=2 rc=0 v=done-1\n" {
				t.Fatalf("run: exit %d, stdout %q, stderr %q; want try 1 to find none (exit 1) and try 2 to load try 1's value", code, out, errs)
			}
			s := ckptShow(t, c, "ck")
			if s.Last == nil || value(s.Last.Value) != "done-2" || s.Last.Try != 2 || s.LastSuccess == nil || value(s.LastSuccess.Value) != "done-2" {
				t.Fatalf("show after the run: %+v; want done-2 newest (try 2) and as the last success", s)
			}
			code, out, errs = c.run("run", "-k", "ck", "--", "sh", "-c",
				`"$CL" checkpoint load; echo " rc=$?"; "$CL" checkpoint load --last-success; echo " rc=$?"`)
			if code != 0 || out != " rc=1\ndone-2 rc=0\n" {
				t.Fatalf("the next run: exit %d, stdout %q, stderr %q; want no checkpoint of its own (1) and done-2 as the last success", code, out, errs)
			}
		})
	}
}

// Outside a run, and with a value over 64 KiB, the commands say one line and exit 125;
// nothing is saved.
func TestCheckpointBadInput(t *testing.T) {
	c, _ := ckptCLI(t, "local")
	for _, args := range [][]string{{"checkpoint", "save", "x"}, {"checkpoint", "load"}} {
		code, out, errs := c.run(args...)
		if code != 125 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "CRONLOCK_CHECKPOINT_SOCKET") {
			t.Fatalf("%v outside a run: exit %d, stdout %q, stderr %q; want 125 and one line", args, code, out, errs)
		}
	}
	big := filepath.Join(c.dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 64<<10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("run", "-k", "big", "--", "sh", "-c",
		`"$CL" checkpoint save - <`+big+`; echo "over=$?"; head -c 65536 `+big+` | "$CL" checkpoint save -; echo "max=$?"`)
	if code != 0 || out != "over=125\nmax=0\n" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "64 KiB") {
		t.Fatalf("64 KiB + 1: exit %d, stdout %q, stderr %q; want 125 with one line, and exactly 64 KiB saved", code, out, errs)
	}
	if s := ckptShow(t, c, "big"); s.Last == nil || len(value(s.Last.Value)) != 64<<10 {
		t.Fatalf("show: want the 64 KiB value only")
	}
}

// A run whose lock was removed and taken by another run gets 75 for its save, and
// nothing it saved after that is stored.
func TestCheckpointStaleSaveRefused(t *testing.T) {
	for _, backend := range ckptBackends {
		t.Run(backend, func(t *testing.T) {
			c, del := ckptCLI(t, backend)
			started, goOn := filepath.Join(c.dir, "started"), filepath.Join(c.dir, "go")
			job := `"$CL" checkpoint save first || exit 8; touch ` + started + `
while [ ! -e ` + goOn + ` ]; do sleep 0.02; done
"$CL" checkpoint save stale; echo "stale=$?"`
			holder := c.command("run", "-k", "st", "--ttl", "60s", "--", "sh", "-c", job)
			var out, errb bytes.Buffer
			holder.Stdout, holder.Stderr = &out, &errb
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			defer holder.Process.Kill()
			proctest.WaitFile(t, started)
			// The lock goes from under the run: on a server a delete by hand, and another run
			// takes it and saves; locally an rm of the lock file (the kernel still counts the
			// deleted file's flock, so no other run gets in, but the path no longer names the
			// locked file).
			want := "first"
			if del != nil {
				del(c.prefix() + "{st}:lock")
				if code, _, errs := c.run("run", "-k", "st", "--", "sh", "-c", `"$CL" checkpoint save newer`); code != 0 {
					t.Fatalf("the second run: exit %d, %s", code, errs)
				}
				want = "newer"
			} else if err := os.Remove(filepath.Join(c.dir, "locks", "st.lock")); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(goOn, nil, 0o600)
			holder.Wait()
			if !strings.Contains(out.String(), "stale=75\n") || !strings.Contains(errb.String(), "refused") {
				t.Fatalf("the stale run: stdout %q, stderr %q; want its save refused with exit 75", out.String(), errb.String())
			}
			if s := ckptShow(t, c, "st"); s.Last == nil || value(s.Last.Value) != want {
				t.Fatalf("show: %s; stdout %q, stderr %q; want %q, the stale save not written", value(s.Last.Value), out.String(), errb.String(), want)
			}
		})
	}
}

// A load or save while Redis does not answer (SIGSTOPped) exits 75, never 1.
func TestCheckpointBackendDownIs75(t *testing.T) {
	srv := redistest.Start(t)
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	c.env = append(c.env, "CL="+cronlockBin)
	started, goOn := filepath.Join(c.dir, "started"), filepath.Join(c.dir, "go")
	answers := filepath.Join(c.dir, "answers") // a file, not stdout: the test reads it while the run writes
	job := `"$CL" checkpoint save a || exit 8; touch ` + started + `
while [ ! -e ` + goOn + ` ]; do sleep 0.02; done
"$CL" checkpoint load >/dev/null; echo "load=$?" >> ` + answers + `; "$CL" checkpoint save b; echo "save=$?" >> ` + answers
	run := c.command("run", "-k", "down", "--ttl", "60s", "--redis-timeout", "300ms", "--", "sh", "-c", job)
	var errb bytes.Buffer
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	proctest.WaitFile(t, started)
	srv.Stop() // SIGSTOP: connections are accepted, nothing is answered
	defer srv.Cont()
	os.WriteFile(goOn, nil, 0o600)
	// Wait for the job's two answers, then let Redis go so the run can end.
	read := func() string { b, _ := os.ReadFile(answers); return string(b) }
	waitUntil(t, 20*time.Second, "the job's load and save", func() bool { return strings.Contains(read(), "save=") })
	srv.Cont()
	run.Wait()
	if got := read(); got != "load=75\nsave=75\n" {
		t.Fatalf("answers %q, stderr %q; want load and save to exit 75 while Redis is stopped", got, errb.String())
	}
}

// The socket serves only the run's own job: a process of the same uid outside the job,
// and another uid, are refused.
func TestCheckpointSocketServesOnlyTheJob(t *testing.T) {
	c, _ := ckptCLI(t, "local")
	sockFile, goOn := filepath.Join(c.dir, "sock"), filepath.Join(c.dir, "go")
	job := `"$CL" checkpoint save mine || exit 8; echo "$CRONLOCK_CHECKPOINT_SOCKET" > ` + sockFile + `.tmp; mv ` + sockFile + `.tmp ` + sockFile + `
while [ ! -e ` + goOn + ` ]; do sleep 0.02; done`
	holder := c.command("run", "-k", "peer", "--", "sh", "-c", job)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	proctest.WaitFile(t, sockFile)
	b, _ := os.ReadFile(sockFile)
	sock := strings.TrimSpace(string(b))
	if !strings.HasPrefix(sock, "@cronlock-ckpt-") || len(sock) < 40 {
		t.Fatalf("socket %q; want an abstract one with a random name", sock)
	}
	// Same uid, not of the job.
	load := c.command("checkpoint", "load")
	load.Env = append(load.Env, "CRONLOCK_CHECKPOINT_SOCKET="+sock)
	var out, errb bytes.Buffer
	load.Stdout, load.Stderr = &out, &errb
	if code := c.exitCode(load.Run()); code != 75 || out.Len() != 0 || !strings.Contains(errb.String(), "not a process of this run's job") {
		t.Fatalf("a load from outside the job: exit %d, stdout %q, stderr %q; want 75 and the peer refused", code, out.String(), errb.String())
	}
	// Another uid.
	cred, bin := durabAsNobody(t, &cli{t: t, dir: c.dir, env: append([]string{}, c.env...)})
	nobody := exec.Command(bin, "checkpoint", "load")
	nobody.Env = append(append([]string{}, c.env...), "CRONLOCK_CHECKPOINT_SOCKET="+sock)
	nobody.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out.Reset()
	errb.Reset()
	nobody.Stdout, nobody.Stderr = &out, &errb
	if code := c.exitCode(nobody.Run()); code != 75 || out.Len() != 0 || !strings.Contains(errb.String(), "(uid 65534) is not a process of this run's job") {
		t.Fatalf("a load as uid 65534: exit %d, stdout %q, stderr %q; want 75, the peer refused, nothing read", code, out.String(), errb.String())
	}
	os.WriteFile(goOn, nil, 0o600)
	if code := c.exitCode(holder.Wait()); code != 0 {
		t.Fatalf("the run: exit %d", code)
	}
	if conn, err := net.Dial("unix", sock); err == nil {
		conn.Close()
		t.Fatalf("the socket %s still answers after the run", sock)
	}
}

// A save once the lease is in doubt (Redis stopped answering and the run's keeper told the
// job to stop) is refused by the run itself, with no backend call, and exits 75.
func TestCheckpointRefusedWhileLeaseInDoubt(t *testing.T) {
	srv := redistest.Start(t)
	c := newCLI(t, "redis://"+srv.Addr+"/0")
	c.env = append(c.env, "CL="+cronlockBin)
	started := filepath.Join(c.dir, "started")
	job := `trap '"$CL" checkpoint save late; echo "late=$?"; exit 0' TERM
"$CL" checkpoint save early || exit 8; touch ` + started + `
while :; do sleep 0.02; done`
	run := c.command("run", "-k", "doubt", "--ttl", "3s", "--grace", "1s", "--redis-timeout", "300ms", "--", "sh", "-c", job)
	var out, errb bytes.Buffer
	run.Stdout, run.Stderr = &out, &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	proctest.WaitFile(t, started)
	srv.Stop() // SIGSTOP: connections are accepted, nothing is answered
	defer srv.Cont()
	code := c.exitCode(run.Wait())
	srv.Cont()
	if code != 125 || !strings.Contains(out.String(), "late=75\n") || !strings.Contains(errb.String(), "in doubt") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the late save refused as in doubt (75) and the run lock_lost (125)", code, out.String(), errb.String())
	}
	if s := ckptShow(t, c, "doubt"); s.Last == nil || value(s.Last.Value) != "early" {
		t.Fatalf("show: want early, the late save not written")
	}
}

// --heartbeat-timeout: a job that keeps saving runs on past it; one that stops saving is
// stopped as a timeout (124), saying why.
func TestCheckpointHeartbeatTimeout(t *testing.T) {
	c, _ := ckptCLI(t, "local")
	beats := filepath.Join(c.dir, "beats")
	// Saves every 100ms for 20 saves (twice the 1s timeout in all), then hangs.
	job := `i=0; while [ $i -lt 20 ]; do "$CL" checkpoint save "$i" || exit 8; echo $i >> ` + beats + `; i=$((i+1)); sleep 0.1; done
exec sleep 60`
	code, _, errs := c.run("run", "-k", "hb", "--heartbeat-timeout", "1s", "--grace", "1s", "--", "sh", "-c", job)
	b, _ := os.ReadFile(beats)
	if n := strings.Count(string(b), "\n"); n != 20 {
		t.Fatalf("%d saves before the stop; want all 20 (each save resets the heartbeat)", n)
	}
	if code != 124 || !strings.Contains(errs, "saved no checkpoint for --heartbeat-timeout 1s") {
		t.Fatalf("exit %d, stderr %q; want 124 and the line saying the job is hung", code, errs)
	}
	if rows := c.history("hb"); len(rows) != 1 || rows[0].Status != "timeout" {
		t.Fatalf("history %+v; want one timeout row", rows)
	}
}

// show and reset outside a run: reset is refused while the key runs, unless --force; a
// nested run's job talks to the inner run, whose key its save is for.
func TestCheckpointShowReset(t *testing.T) {
	for _, backend := range ckptBackends {
		t.Run(backend, func(t *testing.T) {
			c, _ := ckptCLI(t, backend)
			if code, _, errs := c.run("run", "-k", "outer", "--", cronlockBin, "run", "-k", "inner", "--",
				"sh", "-c", `"$CL" checkpoint save nested`); code != 0 {
				t.Fatalf("nested runs: exit %d, %s", code, errs)
			}
			if s := ckptShow(t, c, "inner"); s.Last == nil || value(s.Last.Value) != "nested" {
				t.Fatalf("inner: %+v; want the nested job's save", s)
			}
			if s := ckptShow(t, c, "outer"); s.Last != nil {
				t.Fatalf("outer: %+v; want nothing (the save was the inner run's)", s)
			}
			code, out, _ := c.run("checkpoint", "show", "--key", "inner")
			if code != 0 || !strings.Contains(out, `inner: newest: 6 bytes "nested"`) {
				t.Fatalf("show: exit %d, %q", code, out)
			}
			holder, _, release := c.startHolding([]string{"run", "-k", "inner"})
			code, out, errs := c.run("checkpoint", "reset", "--key", "inner")
			if code != 125 || out != "" || !strings.Contains(errs, "inner is running") || strings.Count(errs, "\n") != 1 {
				t.Fatalf("reset while running: exit %d, stdout %q, stderr %q; want 125 and one line", code, out, errs)
			}
			if code, out, errs := c.run("checkpoint", "reset", "--key", "inner", "--force"); code != 0 || !strings.Contains(out, "removed 2 checkpoint record(s) of inner") {
				t.Fatalf("reset --force: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			release()
			holder.Wait()
			if code, out, _ := c.run("checkpoint", "show", "--key", "inner"); code != 0 || out != "inner has no checkpoint\n" {
				t.Fatalf("show after reset: exit %d, %q", code, out)
			}
			if code, out, _ := c.run("checkpoint", "reset", "--key", "inner"); code != 0 || !strings.Contains(out, "nothing removed") {
				t.Fatalf("second reset: exit %d, %q", code, out)
			}
		})
	}
}

// With --min-replicas, a save that the replicas do not acknowledge exits 75: a failover
// could lose it.
func TestCheckpointMinReplicas(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port), "--repl-diskless-sync-delay", "0")
	ackedOffset := regexp.MustCompile(`state=online,offset=[1-9]`)
	waitUntil(t, 10*time.Second, "the master to count its replica's acknowledgement", func() bool {
		master.Do("SET", "written", "1")
		info, err := master.Do("INFO", "replication")
		return err == nil && ackedOffset.MatchString(info)
	})
	c := newCLI(t, "redis://"+master.Addr)
	c.env = append(c.env, "CL="+cronlockBin)
	started, goOn := filepath.Join(c.dir, "started"), filepath.Join(c.dir, "go")
	job := `"$CL" checkpoint save acked || exit 8; touch ` + started + `
while [ ! -e ` + goOn + ` ]; do sleep 0.02; done
"$CL" checkpoint save unacked; echo "save=$?"`
	run := c.command("run", "-k", "rep", "--ttl", "60s", "--min-replicas", "1", "--redis-timeout", "500ms", "--", "sh", "-c", job)
	var out, errb bytes.Buffer
	run.Stdout, run.Stderr = &out, &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	proctest.WaitFile(t, started)
	replica.Stop()
	defer replica.Cont()
	os.WriteFile(goOn, nil, 0o600)
	run.Wait()
	if !strings.Contains(out.String(), "save=75\n") || !strings.Contains(errb.String(), "replicas acknowledged it") {
		t.Fatalf("stdout %q, stderr %q; want the unacknowledged save to exit 75, naming the replicas", out.String(), errb.String())
	}
}

// Through Sentinel and on a Cluster (the checkpoint keys share the lock's hash tag, so the
// fenced script runs in the lock's slot): a second try resumes from the first's save,
// with --min-replicas 1 on Sentinel, and show reads it back.
func TestCheckpointSentinelCluster(t *testing.T) {
	for _, form := range []string{"sentinel", "cluster"} {
		t.Run(form, func(t *testing.T) {
			var url string
			var extra []string
			if form == "sentinel" {
				url = redistest.StartSentinel(t).URL()
				extra = []string{"--min-replicas", "1"}
			} else {
				url = redistest.StartCluster(t).URL()
			}
			c := newCLI(t, url)
			c.env = append(c.env, "CL="+cronlockBin)
			job := `v=$("$CL" checkpoint load); echo "try=$CRONLOCK_TRY rc=$? v=$v"; "$CL" checkpoint save "at-$CRONLOCK_TRY" || exit 9; [ "$CRONLOCK_TRY" = 2 ]`
			args := append(append([]string{"run", "-k", "hack"}, extra...), "--retries", "1", "--retry-delay", "1ms", "--", "sh", "-c", job)
			code, out, errs := c.run(args...)
			if code != 0 || out != "try=1 rc=1 v=\ntry=2 rc=0 v=at-1\n" {
				t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if s := ckptShow(t, c, "hack"); s.Last == nil || value(s.Last.Value) != "at-2" || s.LastSuccess == nil {
				t.Fatalf("show: %+v; want at-2, also as the last success", s)
			}
		})
	}
}

// A short --ttl with the default --redis-timeout (2s): between two renewals of a 4s lease
// less than g + 2s (3s) is left for a while, although every renewal is confirmed. A save
// then waits for the next renewal instead of being refused as in doubt, which told a
// healthy job that another host may run it. A 2s lease, which no renewal leaves 2.5s of,
// refuses every save at once with a line that names --ttl.
func TestCheckpointShortTTL(t *testing.T) {
	c, _ := ckptCLI(t, "redis")
	job := `i=0; while [ $i -lt 12 ]; do "$CL" checkpoint save "$i" || exit 8; i=$((i+1)); sleep 0.2; done`
	if code, _, errs := c.run("run", "-k", "short", "--ttl", "4s", "--", "sh", "-c", job); code != 0 || errs != "" {
		t.Fatalf("12 saves over 2.4s of a 4s lease: exit %d, stderr %q; want every save accepted", code, errs)
	}
	if s := ckptShow(t, c, "short"); s.Last == nil || value(s.Last.Value) != "11" {
		t.Fatalf("show: %+v; want the last save, 11", s.Last)
	}
	code, out, errs := c.run("run", "-k", "tooshort", "--ttl", "2s", "--", "sh", "-c", `"$CL" checkpoint save x; echo "save=$?"`)
	if code != 0 || out != "save=75\n" || !strings.Contains(errs, "--ttl 2s is too short for checkpoints") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("a 2s lease: exit %d, stdout %q, stderr %q; want the save refused (75) with one line naming --ttl", code, out, errs)
	}
}

// A VALUE that starts with - (a negative offset, a base64url page token) reads as a flag:
// the save is refused with one line saying to put -- before it, and with -- it is saved.
func TestCheckpointDashValue(t *testing.T) {
	c, _ := ckptCLI(t, "local")
	job := `"$CL" checkpoint save -5; echo "bare=$?"; "$CL" checkpoint save -- -Xy_z; echo "dashed=$?"; "$CL" checkpoint load`
	code, out, errs := c.run("run", "-k", "dash", "--", "sh", "-c", job)
	if code != 0 || out != "bare=125\ndashed=0\n-Xy_z" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the bare -5 refused (125) and -Xy_z saved after --", code, out, errs)
	}
	if !strings.Contains(errs, `"-5" reads as a flag`) || !strings.Contains(errs, "put -- before it") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("stderr %q; want one line saying to put -- before the value", errs)
	}
}
