// Package redistest gives tests a real redis-server: the shared one that scripts/test.sh
// starts (CRONLOCK_TEST_REDIS_ADDR), or a private one a test may kill, pause and restart.
//
// A test that needs Redis and finds none fails when CI=true; elsewhere it is skipped with
// a message that says how to run it.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// missing fails the test under CI and skips it elsewhere.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("redis needed but %s (CI=true: Redis tests never skip here); run scripts/test.sh", why)
	}
	t.Skipf("redis needed but %s; run scripts/test.sh", why)
}

// Addr returns host:port of the shared test server started by scripts/test.sh.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := Lookup()
	if err != nil {
		missing(t, err.Error())
	}
	return addr
}

// Lookup returns host:port of the shared test server, or why there is none: for callers
// that decide later, or elsewhere, whether to fail or skip (testscript's commands).
func Lookup() (string, error) {
	addr := os.Getenv("CRONLOCK_TEST_REDIS_ADDR")
	if addr == "" {
		return "", errors.New("CRONLOCK_TEST_REDIS_ADDR is not set")
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("%s does not answer: %v", addr, err)
	}
	c.Close()
	return addr, nil
}

// Server is a private redis-server owned by one test.
type Server struct {
	Addr string
	Port int
	Dir  string
	// Password is the default user's, from a --requirepass among Start's arguments:
	// Do authenticates with it.
	Password string
	args     []string
	cmd      *exec.Cmd
	t        testing.TB
}

// Start launches a private redis-server on a free loopback port with extra config
// arguments (e.g. "--appendonly", "yes"); it is stopped when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server is not installed")
	}
	s := &Server{Dir: t.TempDir(), t: t, Port: FreePort(t), Password: requirepass(extra)}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--dir", s.Dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log")}, extra...)
	s.start(bin)
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start(bin string) {
	s.t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		reply, err := s.Do("PING")
		if err == nil && reply == "PONG" {
			return
		}
		// A server started with --requirepass answers NOAUTH: it is up.
		if err != nil && strings.Contains(err.Error(), "NOAUTH") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("redis-server on %s did not answer PING within 10s", s.Addr)
}

// Kill stops the server with SIGKILL (no shutdown save) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server and starts it again with the same arguments and data folder.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	bin, _ := exec.LookPath("redis-server")
	s.start(bin)
}

// Stop and Cont pause and resume the server process (SIGSTOP/SIGCONT).
func (s *Server) Stop() { s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Cont() { s.cmd.Process.Signal(syscall.SIGCONT) }

// requirepass is the value of a --requirepass among redis-server arguments, or "".
func requirepass(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			return args[i+1]
		}
	}
	return ""
}

// Do sends one command over a fresh RESP2 connection and returns a simple reply as text.
// It is a tiny client for fault injection (CLIENT PAUSE, DEL, FLUSHALL) that does not
// share state with the client under test. It sends AUTH first when s has a Password.
func (s *Server) Do(args ...string) (string, error) { return do(s.Addr, s.Password, args...) }

// Do sends one command to addr; see Server.Do.
func Do(addr string, args ...string) (string, error) { return do(addr, "", args...) }

func do(addr, password string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	write := func(args ...string) {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if password != "" {
		write("AUTH", password)
	}
	write(args...)
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if password != "" {
		// AUTH's reply is one line; an error there is the command's error too.
		if line, err := r.ReadString('\n'); err != nil || line[0] == '-' {
			return "", fmt.Errorf("redis: AUTH: %q %v", strings.TrimSpace(line), err)
		}
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
