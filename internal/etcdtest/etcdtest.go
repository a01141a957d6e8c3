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
	"context"
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

	opts Options
	args []string
	bin  string
	cmd  *exec.Cmd
	t    testing.TB
	log  string
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
	client, peer := redistest.FreePort(t), redistest.FreePort(t)
	s.Endpoint = fmt.Sprintf("%s://127.0.0.1:%d", scheme, client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	s.log = filepath.Join(s.Dir, "etcd.log")
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
	s.start()
	if o.Auth {
		s.enableAuth()
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	s.launch()
	s.waitReady()
}

// launch starts the process without waiting for it: a cluster's member answers only once
// a quorum of members runs.
func (s *Server) launch() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH=")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
}

// waitReady returns once the server answers a read; it fails the test after 15s.
func (s *Server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := s.ping(); err == nil {
			return
		} else if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.log)
			s.t.Fatalf("etcd at %s did not answer within 15s: %v\n%s", s.Endpoint, err, tail(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server and starts it again on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
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
