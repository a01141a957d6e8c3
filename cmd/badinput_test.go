package cmd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/redistest"
	"cronlock/runstatus"
)

// badInputCase is one row of the bad-input table: what is run, what exit code and stderr
// line it must give (README, "Exit codes and statuses": one `cronlock:` line for every
// failure cronlock causes), and what must have been recorded.
type badInputCase struct {
	name  string
	args  []string                   // after "cronlock"; $DIR is the case's folder, $REDIS the shared server
	env   []string                   // extra environment, same substitutions
	setup func(t *testing.T, c *cli) // optional preparation
	code  int
	// stderr must match; for a failure cronlock causes it is its one "cronlock: " line.
	stderr string
	// oneLine: stderr is exactly one line (failures cronlock causes); false where the job
	// itself writes to stderr or a warning accompanies a run that succeeded.
	oneLine bool
	// status, when set, is the status the run's history row must have.
	status string
	check  func(t *testing.T, c *cli, stdout string)
	// slow, when set, says why `go test -short` skips the case (skipIfShort).
	slow string
}

// TestBadInput runs every case through the built binary and checks the documented exit
// code, one clear line, no panic or stack trace, no hang, and nothing lost.
func TestBadInput(t *testing.T) {
	addr := redistest.Addr(t)
	long := strings.Repeat("k", 201)
	cases := []badInputCase{
		// Durations, sizes and numbers.
		{name: "ttl not a duration", args: []string{"run", "-k", "a", "--ttl", "banana", "--", "true"}, code: 125, stderr: `--ttl.*"banana" is not a duration`, oneLine: true},
		{name: "ttl under 1s", args: []string{"run", "-k", "a", "--ttl", "999ms", "--", "true"}, code: 125, stderr: `--ttl 999ms is too short`, oneLine: true},
		{name: "ttl zero", args: []string{"run", "-k", "a", "--ttl", "0", "--", "true"}, code: 125, stderr: `must be more than 0`, oneLine: true},
		{name: "timeout negative", args: []string{"run", "-k", "a", "--timeout", "-1s", "--", "true"}, code: 125, stderr: `negative`, oneLine: true},
		{name: "wait without unit", args: []string{"run", "-k", "a", "--wait", "5", "--", "true"}, code: 125, stderr: `"5" is not a duration`, oneLine: true},
		{name: "grace garbage", args: []string{"run", "-k", "a", "--grace", "1x", "--", "true"}, code: 125, stderr: `not a duration`, oneLine: true},
		{name: "capture garbage", args: []string{"run", "-k", "a", "--capture", "lots", "--", "true"}, code: 125, stderr: `not a size`, oneLine: true},
		{name: "capture too big", args: []string{"run", "-k", "a", "--capture", "10GiB", "--", "true"}, code: 125, stderr: `64MiB limit`, oneLine: true},
		{name: "conflict code out of range", args: []string{"run", "-k", "a", "--conflict-exit-code", "300", "--", "true"}, code: 125, stderr: `use 0 to 255`, oneLine: true},
		{name: "min-replicas not a number", args: []string{"run", "-k", "a", "--min-replicas", "abc", "--", "true"}, code: 125, stderr: `--min-replicas" flag: "abc" is not a whole number`, oneLine: true},
		{name: "min-replicas not a number in the environment", args: []string{"run", "-k", "a", "--", "true"}, env: []string{"CRONLOCK_REDIS_MIN_REPLICAS=2x"}, code: 125, stderr: `CRONLOCK_REDIS_MIN_REPLICAS: "2x" is not a whole number`, oneLine: true},
		{name: "history limit out of range", args: []string{"history", "--limit", "99999999999999999999"}, code: 125, stderr: `"99999999999999999999" is out of range`, oneLine: true},
		{name: "on-lock-lost unknown", args: []string{"run", "-k", "a", "--on-lock-lost", "maybe", "--", "true"}, code: 125, stderr: `use kill or continue`, oneLine: true},
		// Keys and the command line.
		{name: "key missing", args: []string{"run", "--", "true"}, code: 125, stderr: `--key is required`, oneLine: true},
		{name: "key empty", args: []string{"run", "-k", "", "--", "true"}, code: 125, stderr: `the key is empty`, oneLine: true},
		{name: "key with space", args: []string{"run", "-k", "a b", "--", "true"}, code: 125, stderr: `the key has ' ' at position 2`, oneLine: true},
		{name: "key too long", args: []string{"run", "-k", long, "--", "true"}, code: 125, stderr: `201 characters long`, oneLine: true},
		{name: "key not ascii", args: []string{"run", "-k", "café", "--", "true"}, code: 125, stderr: `the key has`, oneLine: true},
		{name: "key that looks like a path", args: []string{"run", "-k", "../../etc/cronlock-x", "--", "true"}, code: 0, status: runstatus.Succeeded,
			check: func(t *testing.T, c *cli, out string) {
				// A legal key: its lock file stays inside the lock folder.
				if _, err := os.Stat("/etc/cronlock-x.lock"); err == nil {
					t.Error("the key's lock file escaped the lock folder")
				}
				if m, _ := filepath.Glob(filepath.Join(c.dir, "locks", "*etc*cronlock-x.lock")); len(m) != 1 {
					t.Errorf("lock files %v, want the encoded key inside the lock folder", m)
				}
			}},
		{name: "missing --", args: []string{"run", "-k", "a", "true"}, code: 125, stderr: `put -- before the command`, oneLine: true},
		{name: "nothing after --", args: []string{"run", "-k", "a", "--"}, code: 125, stderr: `no command`, oneLine: true},
		{name: "unknown flag", args: []string{"run", "-k", "a", "--frobnicate", "--", "true"}, code: 125, stderr: `unknown flag: --frobnicate \(see 'cronlock run --help'\)`, oneLine: true},
		{name: "quiet and verbose", args: []string{"run", "-k", "a", "-q", "-v", "--", "true"}, code: 125, stderr: `contradict`, oneLine: true},
		// Backends and Redis.
		{name: "backend unknown", args: []string{"run", "-k", "a", "--backend", "consul", "--", "true"}, code: 125, stderr: `use redis, etcd, local or auto`, oneLine: true},
		{name: "etcd without endpoints", args: []string{"run", "-k", "a", "--backend", "etcd", "--", "true"}, code: 125, stderr: `CRONLOCK_ETCD_ENDPOINTS is required`, oneLine: true},
		{name: "backend redis without url", args: []string{"run", "-k", "a", "--backend", "redis", "--", "true"}, code: 125, stderr: `--redis or CRONLOCK_REDIS_URL is required`, oneLine: true},
		{name: "redis url bad scheme", args: []string{"run", "-k", "a", "--redis", "ftp://h:1/0", "--", "true"}, code: 125, stderr: `cronlock: `, oneLine: true, status: runstatus.Error},
		{name: "redis url garbage", args: []string{"run", "-k", "a", "--redis", "::not a url::", "--", "true"}, code: 125, stderr: `cronlock: `, oneLine: true, status: runstatus.Error},
		{name: "redis unreachable", args: []string{"run", "-k", "a", "--redis", "redis://127.0.0.1:1/0", "--redis-timeout", "300ms", "--", "true"}, code: 125, stderr: `127.0.0.1:1 unreachable`, oneLine: true, status: runstatus.Error},
		{name: "redis speaks nonsense", args: []string{"run", "-k", "a", "--redis", "redis://$NONSENSE/0", "--redis-timeout", "500ms", "--", "true"}, code: 125, stderr: `cronlock: `, oneLine: true, status: runstatus.Error},
		{name: "redis database the server lacks", args: []string{"run", "-k", "a", "--redis", "$REDIS/99", "--", "true"}, code: 125, stderr: `has no database 99 \(ERR DB index is out of range\); give one below`, oneLine: true, status: runstatus.Error},
		{name: "redis cluster url without slashes", args: []string{"run", "-k", "a", "--redis", "redis-cluster:h1", "--", "true"}, code: 125, stderr: `it has no "//" after "redis-cluster:"`, oneLine: true},
		{name: "redis prefix with braces", args: []string{"run", "-k", "a", "--redis", "$REDIS", "--prefix", "x{y}:", "--", "true"}, code: 125, stderr: `prefix`, oneLine: true},
		{name: "redis password file missing", args: []string{"run", "-k", "a", "--redis", "$REDIS", "--redis-password-file", "$DIR/nope", "--", "true"}, code: 125, stderr: `password file`, oneLine: true},
		{name: "redis timeout zero in env", env: []string{"CRONLOCK_REDIS_TIMEOUT=0s"}, args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `CRONLOCK_REDIS_TIMEOUT`, oneLine: true},
		{name: "allow-eviction garbage in env", env: []string{"CRONLOCK_ALLOW_EVICTION=maybe"}, args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `CRONLOCK_ALLOW_EVICTION: use yes or no`, oneLine: true},
		{name: "allow-eviction flag garbage", args: []string{"run", "-k", "a", "--allow-eviction=perhaps", "--", "true"}, code: 125, stderr: `--allow-eviction.*use yes or no`, oneLine: true},
		{name: "ttl garbage in env", env: []string{"CRONLOCK_TTL=soon"}, args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `environment variable CRONLOCK_TTL`, oneLine: true},
		{name: "config file typo", env: []string{"CRONLOCK_CONFIG=$DIR/bad.conf"}, setup: caseFile("bad.conf", "CRONLOCK_TTL=5s\nCRONLOCK_REDIS_ULR=redis://x\n"), args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `bad.conf line 2`, oneLine: true},
		// Lock folder.
		// A named pipe would hang every run waiting for a writer; a folder is no file.
		{name: "config file is a FIFO", env: []string{"CRONLOCK_CONFIG=$DIR/fifo.conf"}, setup: caseFIFO("fifo.conf"), args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `fifo.conf is a named pipe or socket, not a file`, oneLine: true},
		{name: "config file is a folder", env: []string{"CRONLOCK_CONFIG=$DIR"}, args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `is a folder, not a file`, oneLine: true},
		// A Windows editor's byte order mark is no part of line 1's name: the line is read.
		{name: "config file with a BOM", env: []string{"CRONLOCK_CONFIG=$DIR/bom.conf"}, setup: caseFile("bom.conf", "\ufeffCRONLOCK_BACKEND=redis\r\n"), args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `CRONLOCK_BACKEND in .*bom.conf line 1`, oneLine: true},
		{name: "lock dir is a file", env: []string{"CRONLOCK_LOCK_DIR=$DIR/afile"}, setup: caseFile("afile", "x"), args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `CRONLOCK_LOCK_DIR`, oneLine: true, status: runstatus.Error},
		{name: "lock dir of another user", env: []string{"CRONLOCK_LOCK_DIR=$DIR/theirs"}, setup: chownedDir("theirs", 65534), args: []string{"run", "-k", "a", "--", "true"}, code: 125, stderr: `belongs to uid 65534`, oneLine: true, status: runstatus.Error},
		// The command.
		{name: "command not found", args: []string{"run", "-k", "a", "--", "no-such-command-3141"}, code: 127, stderr: `no-such-command-3141: command not found`, oneLine: true, status: runstatus.Error},
		{name: "command not executable", setup: caseFile("plain.txt", "echo hi\n"), args: []string{"run", "-k", "a", "--", "$DIR/plain.txt"}, code: 126, stderr: `plain.txt: cannot execute`, oneLine: true, status: runstatus.Error},
		{name: "command is a directory", args: []string{"run", "-k", "a", "--", "$DIR"}, code: 126, stderr: `cannot execute`, oneLine: true, status: runstatus.Error},
		// The history file: the job runs anyway, with one warning.
		{name: "history corrupt", env: []string{"CRONLOCK_HISTORY=$DIR/junk.db"}, setup: caseFile("junk.db", strings.Repeat("not a database\x00\xff", 512)), args: []string{"run", "-k", "a", "--", "echo", "ran"}, code: 0, stderr: `cannot record this run in the history`, oneLine: true,
			check: func(t *testing.T, c *cli, out string) {
				if out != "ran\n" {
					t.Errorf("the job did not run: stdout %q", out)
				}
				if b, _ := os.ReadFile(filepath.Join(c.dir, "junk.db")); !bytes.HasPrefix(b, []byte("not a database")) {
					t.Error("the corrupt file was changed")
				}
			}},
		{name: "history is a directory", env: []string{"CRONLOCK_HISTORY=$DIR"}, args: []string{"run", "-k", "a", "--", "echo", "ran"}, code: 0, stderr: `cannot record this run`, oneLine: true,
			check: func(t *testing.T, c *cli, out string) {
				if out != "ran\n" {
					t.Errorf("the job did not run: stdout %q", out)
				}
			}},
		// What the child does.
		{name: "child prints 200 MB", args: []string{"run", "-k", "big", "--", "head", "-c", "200000000", "/dev/zero"}, code: 0, status: runstatus.Succeeded,
			slow: "200 MB through cronlock",
			check: func(t *testing.T, c *cli, out string) {
				if len(out) != 200000000 {
					t.Errorf("relayed %d bytes, want 200000000", len(out))
				}
				if r := lastRun(t, c); len(r.Output) != 64<<10 {
					t.Errorf("kept a tail of %d bytes, want 65536", len(r.Output))
				}
			}},
		{name: "child prints binary junk", args: []string{"run", "-k", "junk", "--", "head", "-c", "1000000", "/dev/urandom"}, code: 0, status: runstatus.Succeeded,
			check: func(t *testing.T, c *cli, out string) {
				if len(out) != 1000000 {
					t.Errorf("relayed %d bytes, want 1000000", len(out))
				}
				r := lastRun(t, c)
				if len(r.Output) != 64<<10 || !strings.HasSuffix(out, string(r.Output)) {
					t.Errorf("the tail (%d bytes) is not the last 64 KiB of the output", len(r.Output))
				}
				code, table, _ := c.run("history", "--key", "junk")
				if code != 0 || strings.ContainsAny(table, "\x1b\x07\x00") {
					t.Error("the history table shows raw control bytes")
				}
			}},
		{name: "child closes stdout", args: []string{"run", "-k", "a", "--", "sh", "-c", "exec >&-; sleep 0.1; echo gone >&2; exit 4"}, code: 4, stderr: `gone`, oneLine: true, status: runstatus.Failed},
		{name: "child ignores SIGTERM", args: []string{"run", "-k", "a", "--timeout", "200ms", "--grace", "300ms", "--", "sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}, code: 124, stderr: `--timeout 200ms`, oneLine: true, status: runstatus.Timeout},
		{name: "unknown command word", args: []string{"frobnicate"}, code: 125, stderr: `unknown command`, oneLine: true},
		{name: "history bad status filter", args: []string{"history", "--status", "exploded"}, code: 125, stderr: `--status "exploded"`, oneLine: true},
	}
	nonsense := nonsenseServer(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.slow != "" {
				skipIfShort(t, tc.slow)
			}
			t.Parallel()
			c := newCLI(t, "")
			subst := strings.NewReplacer("$DIR", c.dir, "$REDIS/99", "redis://"+addr+"/99", "$REDIS", "redis://"+addr+"/0", "$NONSENSE", nonsense)
			for _, e := range tc.env {
				c.env = append(c.env, subst.Replace(e))
			}
			if tc.setup != nil {
				tc.setup(t, c)
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = subst.Replace(a)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, cronlockBin, args...)
			cmd.Env, cmd.Dir = c.env, c.dir
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatal("cronlock hung (killed after 60s)")
			}
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			stderr := errb.String()
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("stderr has a panic or stack trace: %q", stderr)
			}
			if tc.stderr != "" && !regexp.MustCompile(tc.stderr).MatchString(stderr) {
				t.Errorf("stderr %q does not match %q", stderr, tc.stderr)
			}
			if tc.oneLine && strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", stderr)
			}
			if tc.stderr == "" && tc.code == 0 && stderr != "" {
				t.Errorf("unexpected stderr %q", stderr)
			}
			if tc.status != "" {
				if r := lastRun(t, c); r.Status != tc.status {
					t.Errorf("history status %q, want %q", r.Status, tc.status)
				}
			}
			if tc.check != nil {
				tc.check(t, c, out.String())
			}
		})
	}
}

func caseFile(name, content string) func(*testing.T, *cli) {
	return func(t *testing.T, c *cli) {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func caseFIFO(name string) func(*testing.T, *cli) {
	return func(t *testing.T, c *cli) {
		if err := syscall.Mkfifo(filepath.Join(c.dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func chownedDir(name string, uid int) func(*testing.T, *cli) {
	return func(t *testing.T, c *cli) {
		p := filepath.Join(c.dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Skipf("cannot chown (not root?): %v", err)
		}
	}
}

// nonsenseServer listens on loopback and answers every connection with bytes that are
// not RESP, then keeps it open: a "Redis" that must not hang or crash cronlock.
func nonsenseServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.Write([]byte("HTTP/1.1 400 Bad Request\r\n\x00\xff\xfe garbage\r\n"))
				time.Sleep(5 * time.Second)
			}()
		}
	}()
	return l.Addr().String()
}
