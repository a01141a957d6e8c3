package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// localHelperEnv makes the test binary, re-executed by startLocalHolder, a process that
// takes a lock and holds it until it is killed.
const localHelperEnv = "CRONLOCK_TEST_LOCAL_HOLD"

// TestLocalHelperProcess is not a test: it is the body of the helper process (it does
// nothing unless localHelperEnv is set). It prints "held <token>" once it holds the lock.
func TestLocalHelperProcess(t *testing.T) {
	spec := os.Getenv(localHelperEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	dir, key := spec, os.Getenv(localHelperEnv+"_KEY")
	l, err := New(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	lease, err := l.Acquire(context.Background(), lockrun.Request{Key: key, Node: "helper-node", PID: os.Getpid(), RunID: "helper-run"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	fmt.Println("held", lease.FencingToken())
	for {
		time.Sleep(time.Hour)
	}
}

// startLocalHolder starts a process that holds key in dir, and returns it once it holds
// the lock, with the token it got.
func startLocalHolder(t *testing.T, dir, key string) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalHelperProcess$")
	cmd.Env = append(os.Environ(), localHelperEnv+"="+dir, localHelperEnv+"_KEY="+key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	tok, ok := strings.CutPrefix(strings.TrimSpace(line), "held ")
	if !ok {
		t.Fatalf("helper said %q", line)
	}
	n, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, n
}

func TestLocalExclusion(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()
	before := time.Now().Truncate(time.Microsecond)
	first := mustAcquire(t, l, lockrun.Request{Key: "billing", Node: "web1", PID: 4242, RunID: "run-1"})
	if first.TTL() != 0 {
		t.Errorf("TTL = %v, want 0", first.TTL())
	}

	_, err := l.Acquire(ctx, localReq("billing", "run-2"))
	he := wantHeld(t, err)
	if he.Key != "billing" || he.Holder == nil {
		t.Fatalf("HeldError = %+v", he)
	}
	h := he.Holder
	if h.Node != "web1" || h.PID != 4242 || h.RunID != "run-1" || h.FencingToken != first.FencingToken() {
		t.Errorf("holder = %+v, want web1/4242/run-1/token %d", h, first.FencingToken())
	}
	if h.Since.Before(before) || h.Since.After(time.Now()) {
		t.Errorf("holder since %v, want about %v", h.Since, before)
	}
	if !strings.Contains(err.Error(), "web1 (pid 4242, run run-1)") {
		t.Errorf("error %q does not name the holder", err)
	}

	// Another locker on the same folder (another open file description) is excluded too.
	l2, err := New(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Acquire(ctx, localReq("billing", "run-3")); err == nil {
		t.Fatal("second locker got the lock")
	}
	// Other keys are independent.
	mustAcquire(t, l, localReq("other", "run-4"))

	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	mustAcquire(t, l, localReq("billing", "run-5"))
}

func TestLocalExclusionAcrossProcesses(t *testing.T) {
	l := newTestLocker(t)
	lease := mustAcquire(t, l, localReq("x/y", "run-1"))
	path := l.LockPath("x/y")

	if _, err := exec.LookPath("flock"); err == nil {
		// util-linux flock(1) takes the same kind of lock on the same file.
		cmd := exec.Command("flock", "-n", path, "true")
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("flock -n while held: %v, want exit 1", err)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("flock", "-n", path, "true").CombinedOutput(); err != nil {
			t.Fatalf("flock -n after release: %v %s", err, out)
		}
	}

	// And a cronlock in another process excludes this one.
	_, tok := startLocalHolder(t, l.Dir(), "x/y")
	if tok <= lease.FencingToken() {
		t.Errorf("helper token %d not above ours %d", tok, lease.FencingToken())
	}
	_, err := l.Acquire(context.Background(), localReq("x/y", "run-2"))
	he := wantHeld(t, err)
	if he.Holder == nil || he.Holder.Node != "helper-node" || he.Holder.RunID != "helper-run" {
		t.Fatalf("holder = %+v", he.Holder)
	}
}

func TestLocalFreedWhenHolderDies(t *testing.T) {
	l := newTestLocker(t)
	cmd, tok := startLocalHolder(t, l.Dir(), "job")

	_, err := l.Acquire(context.Background(), localReq("job", "run-1"))
	he := wantHeld(t, err)
	if he.Holder == nil || he.Holder.PID != cmd.Process.Pid {
		t.Fatalf("holder = %+v, want pid %d", he.Holder, cmd.Process.Pid)
	}
	h, err := l.Inspect(context.Background(), "job")
	if err != nil || h == nil || h.PID != cmd.Process.Pid {
		t.Fatalf("Inspect = %+v, %v", h, err)
	}

	// A waiter is woken when the holder dies.
	done := make(chan error, 1)
	var lease lockrun.Lease
	go func() {
		var err error
		lease, err = l.Acquire(context.Background(), lockrun.Request{Key: "job", Wait: 10 * time.Second, PID: 1, RunID: "waiter"})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if err := <-done; err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	t.Logf("hand-off after SIGKILL took %v", time.Since(killed))
	defer lease.Release(context.Background())
	if lease.FencingToken() <= tok {
		t.Errorf("token %d not above the dead holder's %d", lease.FencingToken(), tok)
	}
}

func TestLocalFileDescriptorNotInherited(t *testing.T) {
	l := newTestLocker(t)
	lease := mustAcquire(t, l, localReq("k", "run-1")).(*localLease)
	flags, err := unix.FcntlInt(uintptr(lease.fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("lock fd is not close-on-exec")
	}
	// And a child started while the lock is held does not have it open.
	child := exec.Command("sleep", "10")
	if err := child.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	time.Sleep(20 * time.Millisecond) // let it exec
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", child.Process.Pid))
	if err != nil {
		t.Skip("no /proc:", err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", child.Process.Pid, fd.Name()))
		if strings.HasSuffix(target, "k.lock") {
			t.Fatalf("child inherited the lock file as fd %s", fd.Name())
		}
	}
}

func TestLocalKeyEncoding(t *testing.T) {
	tests := []struct{ key, name string }{
		{"billing", "billing.lock"},
		{"Ab_-9", "Ab_-9.lock"},
		{"../../etc/x", "%2E%2E%2F%2E%2E%2Fetc%2Fx.lock"},
		{"a/b", "a%2Fb.lock"},
		{"a.b", "a%2Eb.lock"},
		{"@:", "%40%3A.lock"},
		{".", "%2E.lock"},
		{"..", "%2E%2E.lock"},
		{"a%2Fb", "a%252Fb.lock"}, // not a valid key, but must not collide with a/b
	}
	for _, tt := range tests {
		if got := localFileName(tt.key); got != tt.name {
			t.Errorf("localFileName(%q) = %q, want %q", tt.key, got, tt.name)
		}
		if lockrun.ValidKey(tt.key) == nil {
			if back, ok := localKeyFromName(tt.name); !ok || back != tt.key {
				t.Errorf("localKeyFromName(%q) = %q, %v", tt.name, back, ok)
			}
		}
	}
	// Long keys stay under NAME_MAX, stay distinct, and do not split a %XX.
	long1 := strings.Repeat("/", lockrun.MaxKeyLen)
	long2 := strings.Repeat("/", lockrun.MaxKeyLen-1) + "a"
	n1, n2 := localFileName(long1), localFileName(long2)
	if len(n1) > 255 || len(n2) > 255 || n1 == n2 {
		t.Errorf("long names %q (%d), %q (%d)", n1, len(n1), n2, len(n2))
	}
	if strings.Count(strings.Split(n1, "=")[0], "%2F")*3 != len(strings.Split(n1, "=")[0]) {
		t.Errorf("long name splits an escape: %q", n1)
	}
	if _, ok := localKeyFromName(n1); ok {
		t.Errorf("hashed name %q decoded", n1)
	}
}

// TestLocalFileNamePinned pins lock file names byte for byte: an older and a newer
// cronlock on one host must lock the same file for a key. It covers keys kept whole up to
// the 250 encoded bytes that leave room for ".lock" in 255, hashed names past that, and
// every position of the 200-byte cut relative to a %XX triple.
func TestLocalFileNamePinned(t *testing.T) {
	r := strings.Repeat
	for _, tt := range []struct{ key, name string }{
		{"", ".lock"},
		{"billing", "billing.lock"},
		{"a.b_c-d", "a%2Eb_c-d.lock"},
		{"team/report:daily", "team%2Freport%3Adaily.lock"},
		{"../up@x", "%2E%2E%2Fup%40x.lock"},
		{"a=b", "a%3Db.lock"},
		{"\x00\xff", "%00%FF.lock"},
		{r("a", 250), r("a", 250) + ".lock"},                                  // 250 encoded bytes: whole
		{r("a", 251), r("a", 200) + "=772f911dd9d6692897188d0b03f718fb.lock"}, // 251: hashed
		{r("/", 83) + "a", r("%2F", 83) + "a.lock"},                           // 250 with escapes: whole
		{r("/", 83) + "ab", r("%2F", 66) + "=985156bd9f58ee835b23adeb5b613843.lock"},
		{r(".", 83) + "a", r("%2E", 83) + "a.lock"},
		{r("/", 200), r("%2F", 66) + "=a9edaa36c97b0b8200699dcc7a4f4e94.lock"},               // cut 200 splits "%2F" after "%2"
		{"a" + r("/", 199), "a" + r("%2F", 66) + "=f6c4f0bc2ffbd92f77ddaa09993b012d.lock"},   // cut 200 splits after "%"
		{"ab" + r("/", 198), "ab" + r("%2F", 66) + "=fa453b278f3a8633b24058e54204da46.lock"}, // cut 200 between triples
		{r("x", 170) + "/", r("x", 170) + "%2F.lock"},
	} {
		if got := localFileName(tt.key); got != tt.name {
			t.Errorf("localFileName(%q) = %q, want %q", tt.key, got, tt.name)
		}
		back, ok := localKeyFromName(tt.name)
		if want := lockrun.ValidKey(tt.key) == nil && !strings.Contains(tt.name, "="); ok != want || ok && back != tt.key {
			t.Errorf("localKeyFromName(%q) = %q, %v; want %q, %v", tt.name, back, ok, tt.key, want)
		}
	}
}

func TestLocalPathStaysInDir(t *testing.T) {
	l := newTestLocker(t)
	keys := []string{"../../etc/x", "a/b", "a.b", "@:", "..", strings.Repeat("./", lockrun.MaxKeyLen/2)}
	for _, key := range keys {
		path := l.LockPath(key)
		if filepath.Dir(path) != l.Dir() {
			t.Errorf("LockPath(%q) = %q, outside %q", key, path, l.Dir())
		}
		mustAcquire(t, l, localReq(key, "r"))
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("lock file of %q: %v", key, err)
		}
	}
	entries, err := os.ReadDir(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(keys) {
		t.Errorf("%d files in the folder, want %d", len(entries), len(keys))
	}
	// List finds every key back, the hashed long one included.
	held, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if h, ok := held[key]; !ok || h.RunID != "r" {
			t.Errorf("List is missing %q: %v", key, held)
		}
	}
	if _, err := l.Acquire(context.Background(), localReq("bad key", "r")); err == nil {
		t.Error("invalid key accepted")
	}
}

func TestLocalSymlinkRefused(t *testing.T) {
	l := newTestLocker(t)
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, l.LockPath("k")); err != nil {
		t.Fatal(err)
	}
	_, err := l.Acquire(context.Background(), localReq("k", "r"))
	var he *lockrun.HeldError
	if err == nil || errors.As(err, &he) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Acquire through a symlink: %v", err)
	}
	if !strings.Contains(err.Error(), "CRONLOCK_LOCK_DIR") {
		t.Errorf("error %q does not say what to do", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("symlink target changed: %q", b)
	}
	if _, err := l.Inspect(context.Background(), "k"); err == nil {
		t.Error("Inspect followed the symlink")
	}

	// A hard link to someone else's file is refused too (root would overwrite it).
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(other, l.LockPath("h")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), localReq("h", "r")); err == nil {
		t.Error("Acquire wrote through a hard link")
	}
	if b, _ := os.ReadFile(other); string(b) != "keep me" {
		t.Errorf("hard-linked file changed: %q", b)
	}
}

func TestLocalDirChecks(t *testing.T) {
	base := t.TempDir()

	// Created 0700 whatever the umask, with missing parents.
	old := unix.Umask(0o077)
	dir := filepath.Join(base, "a", "b", "locks")
	l, err := New(dir)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("created folder: %v %v", st.Mode(), err)
	}
	if got := l.Describe(); got != "local "+dir {
		t.Errorf("Describe = %q", got)
	}
	// Reopening it is fine.
	if _, err := New(dir); err != nil {
		t.Fatal(err)
	}

	// A symlinked folder is refused.
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := New(link); err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "--lock-dir") {
		t.Errorf("symlinked folder: %v", err)
	}

	// A group- or world-writable folder it did not create is refused.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	if _, err := New(open); err == nil || !strings.Contains(err.Error(), "writable") {
		t.Errorf("world-writable folder: %v", err)
	}

	// A file where the folder should be.
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := New(file); err == nil {
		t.Error("a file accepted as lock folder")
	}

	// A folder of another user is refused.
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a folder to another user")
	}
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err = New(theirs)
	if err == nil || !strings.Contains(err.Error(), "uid 65534") || !strings.Contains(err.Error(), "CRONLOCK_LOCK_DIR") {
		t.Errorf("folder of uid 65534: %v", err)
	}
}

func TestLocalDefaultLockDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/nonexistent/xdg")
	t.Setenv("TMPDIR", "/nonexistent/tmp")
	t.Setenv("HOME", "/nonexistent/home")
	want := "/tmp/cronlock-" + strconv.Itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		want = "/run/cronlock"
	}
	if got := DefaultDir(); got != want {
		t.Errorf("DefaultDir() = %q, want %q", got, want)
	}
}

func TestLocalFencingTokens(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()
	acquire := func() uint64 {
		t.Helper()
		lease, err := l.Acquire(ctx, localReq("f", "r"))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return lease.FencingToken()
	}

	// Strictly rising, and at least the wall clock in microseconds.
	before := uint64(time.Now().UnixMicro())
	var last uint64
	for i := 0; i < 50; i++ {
		tok := acquire()
		if tok <= last || tok < before {
			t.Fatalf("token %d after %d (clock %d)", tok, last, before)
		}
		last = tok
	}
	if r := readTestRecord(t, l, "f"); r.FencingToken != last {
		t.Errorf("stored token %d, want %d", r.FencingToken, last)
	}

	// A stored token far ahead of the clock (the clock went back): stored + 1 wins.
	future := uint64(time.Now().Add(1000*time.Hour).UnixMicro()) + 12345
	rec := readTestRecord(t, l, "f")
	rec.FencingToken = future
	fd, err := unix.Open(l.LockPath("f"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLocalRecord(fd, rec); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if tok := acquire(); tok != future+1 {
		t.Errorf("token %d, want stored+1 = %d", tok, future+1)
	}
	if tok := acquire(); tok != future+2 {
		t.Errorf("token %d, want %d", tok, future+2)
	}

	// The file deleted (a reboot emptied /run): the clock wins.
	if err := os.Remove(l.LockPath("f")); err != nil {
		t.Fatal(err)
	}
	before = uint64(time.Now().UnixMicro())
	tok := acquire()
	if tok < before || tok >= future {
		t.Errorf("token %d after deletion, want the clock (%d…)", tok, before)
	}

	// A garbled record: the clock still wins, and nothing panics.
	if err := os.WriteFile(l.LockPath("f"), []byte("{\"fencing_tok\x00\xff garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok2 := acquire(); tok2 <= tok {
		t.Errorf("token %d after garbage, want above %d", tok2, tok)
	}
}

func TestLocalReplacedBetweenOpenAndLock(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()
	mustAcquire(t, l, localReq("race", "warmup")).Release(ctx) // the file exists

	// While A is between open and flock, the file is deleted and C locks a new one.
	fired := false
	var c lockrun.Lease
	var cErr error
	localTestHookAfterOpen = func(path string) {
		if fired {
			return // C's own open, or A's reopen
		}
		fired = true
		if cErr = os.Remove(path); cErr == nil {
			c, cErr = l.Acquire(ctx, localReq("race", "C"))
		}
	}
	defer func() { localTestHookAfterOpen = nil }()

	_, err := l.Acquire(ctx, localReq("race", "A"))
	if cErr != nil {
		t.Fatal(cErr)
	}
	defer c.Release(ctx)
	he := wantHeld(t, err)
	if he.Holder == nil || he.Holder.RunID != "C" {
		t.Fatalf("holder %+v, want C", he.Holder)
	}
}

func TestLocalRenew(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()
	lease := mustAcquire(t, l, localReq("r", "run-1"))
	path := l.LockPath("r")

	// Renew may run beside FencingToken and Release in other goroutines.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if err := lease.Renew(ctx); err != nil {
					t.Error(err)
				}
				_ = lease.FencingToken()
			}
		}()
	}
	wg.Wait()

	// Renew touches the times, so age-based /tmp cleaners leave the file alone.
	old := time.Now().Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(st.ModTime()) > time.Minute {
		t.Errorf("mtime %v not refreshed", st.ModTime())
	}
	if atime := time.Unix(st.Sys().(*syscall.Stat_t).Atim.Unix()); time.Since(atime) > time.Minute {
		t.Errorf("atime %v not refreshed", atime)
	}
	h, err := l.Inspect(ctx, "r")
	if err != nil || h == nil {
		t.Fatal(h, err)
	}
	if !h.Renewed.After(h.Since) || h.FencingToken != lease.FencingToken() || h.RunID != "run-1" {
		t.Errorf("after Renew: %+v", h)
	}

	// The file deleted under the running job (rm): the renewal puts it back and keeps the
	// lock (localorphan_test.go has the rest).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew after rm: %v, want the file put back", err)
	}
	if h, err := l.Inspect(ctx, "r"); err != nil || h == nil || h.RunID != "run-1" || h.FencingToken != lease.FencingToken() {
		t.Fatalf("after the file was put back: %+v, %v; want run-1's record", h, err)
	}

	// Replaced by rename (mv new old): the same.
	lease2 := mustAcquire(t, l, localReq("mv", "run-1"))
	tmp := filepath.Join(l.Dir(), "tmp")
	os.WriteFile(tmp, nil, 0o600)
	if err := os.Rename(tmp, l.LockPath("mv")); err != nil {
		t.Fatal(err)
	}
	if err := lease2.Renew(ctx); err != nil {
		t.Fatalf("Renew after mv: %v, want the lock moved to the new file", err)
	}
	if _, err := l.Acquire(ctx, localReq("mv", "run-2")); err == nil {
		t.Fatal("a second run took the lock after mv")
	}
}

func TestLocalWait(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()
	holder := mustAcquire(t, l, localReq("w", "holder"))

	// Wait runs out: HeldError, after about Wait.
	start := time.Now()
	_, err := l.Acquire(ctx, lockrun.Request{Key: "w", Wait: 100 * time.Millisecond, RunID: "late"})
	wantHeld(t, err)
	if el := time.Since(start); el < 100*time.Millisecond || el > 2*time.Second {
		t.Errorf("gave up after %v, want about 100ms", el)
	}

	// A cancelled context ends the wait with its error.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = l.Acquire(cctx, lockrun.Request{Key: "w", Wait: time.Hour})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled wait: %v", err)
	}

	// The waiter is woken promptly when the holder releases: by inotify, not by the
	// fallback poll, which this test turns off.
	defer func(d time.Duration) { localWaitPoll = d }(localWaitPoll)
	localWaitPoll = time.Hour
	type result struct {
		lease lockrun.Lease
		err   error
		at    time.Time
	}
	done := make(chan result, 1)
	go func() {
		lease, err := l.Acquire(ctx, lockrun.Request{Key: "w", Wait: 10 * time.Second, RunID: "waiter"})
		done <- result{lease, err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lease.Release(ctx)
	handoff := r.at.Sub(released)
	t.Logf("hand-off took %v", handoff)
	if handoff > 20*time.Millisecond {
		t.Errorf("hand-off took %v, want a few ms", handoff)
	}
	if r.lease.FencingToken() <= holder.FencingToken() {
		t.Error("waiter's token not above the holder's")
	}
}

// TestLocalLeaseCountsFromTheFlockThatTookIt: a lease taken after a wait is stamped
// with the flock that took it, not with the start of the wait.
func TestLocalLeaseCountsFromTheFlockThatTookIt(t *testing.T) {
	l := newTestLocker(t)
	holder := mustAcquire(t, l, localReq("sent", "holder"))
	var releasedAt atomic.Int64
	go func() {
		time.Sleep(300 * time.Millisecond)
		releasedAt.Store(int64(lockrun.Boottime()))
		holder.Release(context.Background())
	}()
	req := localReq("sent", "waiter")
	req.Wait = 10 * time.Second
	lease, err := l.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	defer lease.Release(context.Background())
	released := time.Duration(releasedAt.Load())
	if got := lockrun.Boottime(); lease.Sent() < released || lease.Sent() > got {
		t.Fatalf("Sent %v is not between the holder's release (%v) and the return of Acquire (%v)", lease.Sent(), released, got)
	}
}

func TestLocalWaitWithoutInotify(t *testing.T) {
	// The polling fallback (inotify unavailable) also hands off within a few ms.
	localInotify = false
	defer func() { localInotify = true }()
	l := newTestLocker(t)
	ctx := context.Background()
	holder := mustAcquire(t, l, localReq("w", "holder"))
	done := make(chan error, 1)
	var at time.Time
	go func() {
		lease, err := l.Acquire(ctx, lockrun.Request{Key: "w", Wait: 10 * time.Second})
		at = time.Now()
		if err == nil {
			lease.Release(ctx)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	holder.Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := at.Sub(released); d > 30*time.Millisecond {
		t.Errorf("polling hand-off took %v", d)
	}
}

func TestLocalMinHold(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()
	req := localReq("m", "r")
	req.MinHold = 300 * time.Millisecond
	lease, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	released := make(chan error, 1)
	go func() { released <- lease.Release(ctx) }()

	time.Sleep(100 * time.Millisecond)
	if _, err := l.Acquire(ctx, localReq("m", "r2")); err == nil {
		t.Fatal("lock free before --min-hold passed")
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("Release returned after %v, want about 300ms", el)
	}
	if err := mustAcquire(t, l, localReq("m", "r3")).Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A MinHold already passed costs nothing; a cancelled ctx cuts it short.
	req.MinHold = time.Hour
	lease, err = l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := lease.Release(cctx); err == nil {
		t.Error("min-hold cut short without an error")
	}
	mustAcquire(t, l, localReq("m", "r4"))
}

func TestLocalUnlockAndInspect(t *testing.T) {
	l := newTestLocker(t)
	ctx := context.Background()

	// Free key: nothing to do, and no file created by looking.
	if h, err := l.Unlock(ctx, "u", false); h != nil || err != nil {
		t.Fatalf("Unlock of a free key = %v, %v", h, err)
	}
	if h, err := l.Inspect(ctx, "u"); h != nil || err != nil {
		t.Fatalf("Inspect of a free key = %v, %v", h, err)
	}
	if _, err := os.Lstat(l.LockPath("u")); !os.IsNotExist(err) {
		t.Errorf("Inspect/Unlock created the lock file: %v", err)
	}

	mustAcquire(t, l, lockrun.Request{Key: "u", Node: "web1", PID: 4242, RunID: "run-1"})
	_, err := l.Unlock(ctx, "u", true)
	if err == nil || !strings.Contains(err.Error(), "pid 4242") || !strings.Contains(err.Error(), "kill 4242") {
		t.Fatalf("Unlock of a held key: %v", err)
	}
	if _, err := os.Lstat(l.LockPath("u")); err != nil {
		t.Errorf("Unlock removed the file: %v", err)
	}
	if _, err := l.Acquire(ctx, localReq("u", "run-2")); err == nil {
		t.Error("Unlock freed the lock")
	}

	// Released: Inspect and List see it free, the file stays.
	l2 := newTestLocker(t)
	lease := mustAcquire(t, l2, localReq("a", "1"))
	mustAcquire(t, l2, localReq("b/c", "2"))
	held, err := l2.List(ctx)
	if err != nil || len(held) != 2 || held["a"].RunID != "1" || held["b/c"].RunID != "2" {
		t.Fatalf("List = %v, %v", held, err)
	}
	lease.Release(ctx)
	held, err = l2.List(ctx)
	if err != nil || len(held) != 1 || held["b/c"].RunID != "2" {
		t.Fatalf("List after release = %v, %v", held, err)
	}
	if _, err := os.Lstat(l2.LockPath("a")); err != nil {
		t.Errorf("released lock file removed: %v", err)
	}

	// A held lock with a garbled record: held, holder unknown, no panic.
	lease3 := mustAcquire(t, l2, localReq("g", "3")).(*localLease)
	for _, junk := range []string{"", "{", "\x00\xff\n{}", `{"pid":"x"}`} {
		unix.Ftruncate(lease3.fd, 0)
		unix.Pwrite(lease3.fd, []byte(junk), 0)
		h, err := l2.Inspect(ctx, "g")
		if err != nil || h == nil {
			t.Errorf("Inspect with record %q = %v, %v", junk, h, err)
		}
		_, err = l2.Acquire(ctx, localReq("g", "4"))
		wantHeld(t, err)
		if _, err := l2.Unlock(ctx, "g", false); err == nil {
			t.Errorf("Unlock with record %q: no error", junk)
		}
	}
	// A partial record (cut mid-write) is garbled too, but a longer old tail is not.
	unix.Pwrite(lease3.fd, []byte(`{"v":1,"node":"n","pid":7}`+"\n"+`trailing old junk`), 0)
	if h, _ := l2.Inspect(ctx, "g"); h == nil || h.PID != 7 || h.Node != "n" {
		t.Errorf("Inspect with trailing junk = %+v", h)
	}

	// Probing by Inspect does not make a concurrent Acquire skip.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				l2.Inspect(ctx, "p")
			}
		}
	}()
	mustAcquire(t, l2, localReq("p", "warm")).Release(ctx)
	for i := 0; i < 200; i++ {
		lease, err := l2.Acquire(ctx, localReq("p", "x"))
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("Acquire %d during Inspect probes: %v", i, err)
		}
		lease.Release(ctx)
	}
	close(stop)
	wg.Wait()
}
