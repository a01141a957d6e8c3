// Package etcdtest gives tests a real, private etcd server (Debian's etcd-server) on free
// loopback ports with its data in a temporary folder: plain, with TLS (a CA, server and
// client certificates made here), or with user authentication enabled. A test may kill,
// pause and restart it; the data folder survives a restart.
//
// A test that needs etcd and finds none fails when CI=true; elsewhere it is skipped with
// a message that says how to get it. It does not share one server between tests: etcd
// starts in well under a second, and a private server lets each test break its own.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"cronlock/internal/redistest"
)

// Options chooses the variant of server Start runs.
type Options struct {
	TLS  bool // serve https with a CA made for the test; clients must show a certificate
	Auth bool // enable authentication: root, and User with a role on Prefix
	// Prefix is the key range the User's role may read and write; "cronlock:" when empty.
	Prefix string
	// AuthTokenTTL is --auth-token-ttl, the seconds an unused auth token lives (etcd's
	// default, 300, when 0): short, it lets a test see tokens expire between renewals.
	AuthTokenTTL int
	// QuotaBytes is --quota-backend-bytes (etcd's 2 GiB when 0): small, a test can fill
	// the database and raise the NOSPACE alarm.
	QuotaBytes int
}

// User and Password are the unprivileged account an Auth server has; RootPassword is root's.
const (
	User         = "cronlock"
	Password     = "s3cret-etcd-pw"
	RootPassword = "root-pw"
)

// Server is a private etcd owned by one test.
type Server struct {
	Endpoint string // http(s)://127.0.0.1:PORT
	Dir      string // data folder; kept across Restart
	// CAFile, CertFile and KeyFile are the client's TLS files (TLS only).
	CAFile, CertFile, KeyFile string

	opts   Options
	args   []string
	bin    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been waited for
	t      testing.TB
	log    string
}

// missing fails the test under CI and skips it elsewhere.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("etcd needed but %s (CI=true: etcd tests never skip here); run scripts/test.sh", why)
	}
	t.Skipf("etcd needed but %s; install Debian's etcd-server (scripts/test.sh does)", why)
}

// Binary returns the etcd executable, or fails or skips t when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		missing(t, "etcd is not installed")
	}
	return bin
}

// Start launches a private etcd and waits until it answers; it is stopped when the test
// ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = "cronlock:"
	}
	s := &Server{bin: Binary(t), Dir: t.TempDir(), opts: o, t: t}
	scheme := "http"
	if o.TLS {
		scheme = "https"
		s.makeCerts()
	}
	s.log = filepath.Join(s.Dir, "etcd.log")
	for try := 1; ; try++ {
		client, peer := freePort(t), freePort(t)
		s.Endpoint = fmt.Sprintf("%s://127.0.0.1:%d", scheme, client)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
		s.args = []string{"--name", "t", "--data-dir", filepath.Join(s.Dir, "data"),
			"--listen-client-urls", s.Endpoint, "--advertise-client-urls", s.Endpoint,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "t=" + peerURL,
			// The compaction the README asks of every cluster that serves cronlock.
			"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1h",
			"--logger", "zap", "--log-outputs", s.log}
		if o.TLS {
			s.args = append(s.args, "--cert-file", filepath.Join(s.Dir, "server.pem"),
				"--key-file", filepath.Join(s.Dir, "server-key.pem"),
				"--trusted-ca-file", s.CAFile, "--client-cert-auth")
		}
		if o.QuotaBytes > 0 {
			s.args = append(s.args, "--quota-backend-bytes", strconv.Itoa(o.QuotaBytes))
		}
		if o.AuthTokenTTL > 0 {
			s.args = append(s.args, "--auth-token-ttl", strconv.Itoa(o.AuthTokenTTL))
		}
		err := s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || try == startTries {
			t.Fatal(err)
		}
		t.Logf("%v; trying other ports", err)
		s.fresh()
	}
	if o.Auth {
		s.enableAuth()
	}
	t.Cleanup(s.Kill)
	return s
}

// startTries is how many pairs of free ports a server is tried on before the test fails.
const startTries = 5

// errPortTaken: etcd could not have one of its ports, another process listens there.
var errPortTaken = errors.New("port taken")

func (s *Server) start() error {
	s.launch()
	return s.waitReady()
}

// fresh kills the server and empties its data folder and log, for a start on new ports.
func (s *Server) fresh() {
	s.Kill()
	os.RemoveAll(filepath.Join(s.Dir, "data"))
	os.Remove(s.log)
}

// launch starts the process without waiting for it: a cluster's member answers only once
// a quorum of members runs.
func (s *Server) launch() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH=")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
}

// startWithin is how long a started etcd has to answer: it starts in well under a
// second; the margin is for a loaded two-core machine.
const startWithin = 30 * time.Second

// waitReady returns once the server answers a read from the process just launched, or
// an error with the end of its log, which wraps errPortTaken when the process exited
// because a port was taken ("address already in use"). It gives up as well when one of
// others (the other members of a cluster) exited: then the error is that one's.
func (s *Server) waitReady(others ...*Server) error {
	deadline := time.Now().Add(startWithin)
	for {
		for _, m := range append([]*Server{s}, others...) {
			if err := m.exitError(); err != nil {
				return err
			}
		}
		err := s.ping()
		if err == nil && listening(s.cmd.Process.Pid, s.Port()) {
			return nil
		} else if err == nil {
			err = errors.New("the client port answers, but not from the etcd just started")
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.log)
			s.Kill()
			return fmt.Errorf("etcd at %s did not answer within %v: %v\n%s", s.Endpoint, startWithin, err, tail(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exitError is nil while the server launched last runs; once it has exited, it says so
// with the end of its log, wrapping errPortTaken when the log says a port was taken.
func (s *Server) exitError() error {
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.exited:
	default:
		return nil
	}
	b, _ := os.ReadFile(s.log)
	err := fmt.Errorf("etcd at %s exited (%v)", s.Endpoint, s.cmd.ProcessState)
	if bytes.Contains(bytes.ToLower(b), []byte("address already in use")) {
		err = fmt.Errorf("%w: %w", err, errPortTaken)
	}
	s.cmd = nil
	return fmt.Errorf("%w\n%s", err, tail(b))
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// ping asks for a key once, as root when authentication is on.
func (s *Server) ping() error {
	c, err := s.Client(s.opts.Auth, "root", RootPassword)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c.Get(ctx, "ping")
	return err
}

// Client connects to the server (as user/password when auth is true).
func (s *Server) Client(auth bool, user, password string) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()}
	if auth {
		cfg.Username, cfg.Password = user, password
	}
	if s.opts.TLS {
		tc, err := s.clientTLS()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

// Root is a client with every right, for tests that look at or change the keys directly.
func (s *Server) Root() *clientv3.Client {
	s.t.Helper()
	c, err := s.Client(s.opts.Auth, "root", RootPassword)
	if err != nil {
		s.t.Fatalf("etcd client: %v", err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// enableAuth creates root and User, gives User's role read/write on the prefix, and turns
// authentication on.
func (s *Server) enableAuth() {
	s.t.Helper()
	c, err := s.Client(false, "", "")
	if err != nil {
		s.t.Fatalf("etcd client: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", RootPassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "cronlock-rw"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "cronlock-rw", s.opts.Prefix, clientv3.GetPrefixRangeEnd(s.opts.Prefix),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, User, Password); return err },
		func() error { _, err := c.UserGrantRole(ctx, User, "cronlock-rw"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			s.t.Fatalf("etcd auth set-up step %d: %v", i+1, err)
		}
	}
}

// Kill ends the server at once (SIGKILL), as a crash would; the data folder stays.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart kills the server and starts it again on the same ports and data. The ports
// stay reserved for the test (redistest.FreePort), so no other test takes them
// meanwhile; a process from elsewhere that does is waited out for a while.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	deadline := time.Now().Add(startWithin)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || time.Now().After(deadline) {
			s.t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop freezes the server (SIGSTOP): connections stay open and nothing answers.
func (s *Server) Stop() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Cont resumes a frozen server.
func (s *Server) Cont() { s.cmd.Process.Signal(syscall.SIGCONT) }

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Env is what a cronlock process needs to reach the server: the endpoint, and the TLS
// files and user of its variant (the password in a file under the test's folder).
func (s *Server) Env() []string {
	env := []string{"CRONLOCK_BACKEND=etcd", "CRONLOCK_ETCD_ENDPOINTS=" + s.Endpoint}
	if s.opts.TLS {
		env = append(env, "CRONLOCK_ETCD_CA_FILE="+s.CAFile, "CRONLOCK_ETCD_CERT_FILE="+s.CertFile,
			"CRONLOCK_ETCD_KEY_FILE="+s.KeyFile)
	}
	if s.opts.Auth {
		pw := filepath.Join(s.Dir, "etcd-password")
		if err := os.WriteFile(pw, []byte(Password+"\n"), 0o600); err != nil {
			s.t.Fatal(err)
		}
		env = append(env, "CRONLOCK_ETCD_USER="+User, "CRONLOCK_ETCD_PASSWORD_FILE="+pw)
	}
	return env
}

// Port is the client port of the server.
func (s *Server) Port() int {
	i := len(s.Endpoint) - 1
	for i >= 0 && s.Endpoint[i] != ':' {
		i--
	}
	p, _ := strconv.Atoi(s.Endpoint[i+1:])
	return p
}

// freePort is redistest.FreePort; a test of this package makes it return a port taken.
var freePort = redistest.FreePort
