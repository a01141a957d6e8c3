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
	// TLSPort is the --tls-port of a server from StartTLS, else 0.
	TLSPort int
	args    []string
	log     string // the server's log file
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has exited and been waited for
	t       testing.TB
}

// Start launches a private redis-server on a free loopback port with extra config
// arguments (e.g. "--appendonly", "yes"); it is stopped when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return startServer(t, false, extra)
}

// StartTLS is Start with a TLS port as well (--tls-port TLSPort, free and reserved as
// Port is): extra names the certificates (--tls-cert-file, --tls-key-file, …).
func StartTLS(t testing.TB, extra ...string) *Server {
	t.Helper()
	return startServer(t, true, extra)
}

func startServer(t testing.TB, withTLS bool, extra []string) *Server {
	t.Helper()
	bin := serverBinary(t)
	s := &Server{t: t, Password: requirepass(extra)}
	s.startOnFreePort(bin, func() {
		s.log = filepath.Join(s.Dir, "redis.log")
		s.args = []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
			"--dir", s.Dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
			"--logfile", s.log}
		if withTLS {
			s.TLSPort = freePort(t)
			s.args = append(s.args, "--tls-port", strconv.Itoa(s.TLSPort))
		}
		s.args = append(s.args, extra...)
	})
	return s
}

func serverBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server is not installed")
	}
	return bin
}

// startTries is how many free ports a server is tried on before the test fails.
const startTries = 5

// startOnFreePort gives s a free port (FreePort) and a new data folder, has setArgs set
// s.log and s.args for them, and starts the server, which is killed when the test ends.
// A server that lost one of its ports to another process between FreePort and its bind
// is started again on other ports, in another folder (a Cluster node has written its
// nodes.conf by then); any other failure fails the test.
func (s *Server) startOnFreePort(bin string, setArgs func()) {
	s.t.Helper()
	for try := 1; ; try++ {
		s.Dir = s.t.TempDir()
		s.Port = freePort(s.t)
		s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
		setArgs()
		err := s.launch(bin)
		if err == nil {
			s.t.Cleanup(s.Kill)
			return
		}
		if !errors.Is(err, errPortTaken) || try == startTries {
			s.t.Fatal(err)
		}
		s.t.Logf("%v; trying other ports", err)
	}
}

// errPortTaken: a server could not have its port, another process listens there.
var errPortTaken = errors.New("port taken")

// startWithin is how long a started server has to answer. redis-server answers
// within milliseconds; the margin is for a loaded two-core machine.
const startWithin = 30 * time.Second

// launch starts the server and returns once it answers, or an error that says why not,
// with the end of its log; the error wraps errPortTaken when a port was taken (the log
// says "Address already in use", or another process answers on Port).
func (s *Server) launch(bin string) error {
	os.Remove(s.log) // what an earlier try logged must not speak for this one
	cmd := exec.Command(bin, s.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(startWithin)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			s.cmd = nil
			return s.startError(fmt.Sprintf("exited (%v)", cmd.ProcessState), nil)
		default:
		}
		// Up is PONG: a server still loading its data answers LOADING (INFO, by contrast,
		// it answers at once). A server started with --requirepass may answer NOAUTH.
		reply, err := doWithin(500*time.Millisecond, s.Addr, s.Password, "PING")
		up := (err == nil && reply == "PONG") || (err != nil && strings.Contains(err.Error(), "NOAUTH"))
		// And it must be ours: the process that answers says its pid.
		if up {
			pid, ok := s.serverPID()
			if ok && pid != cmd.Process.Pid {
				s.Kill()
				return s.startError(fmt.Sprintf("pid %d, not ours, answers there", pid), errPortTaken)
			}
			if ok {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill()
	return s.startError(fmt.Sprintf("did not answer PING and INFO within %v", startWithin), nil)
}

// startError says that the server on s.Addr did not start and why, with its log's end.
func (s *Server) startError(why string, kind error) error {
	b, _ := os.ReadFile(s.log)
	if kind == nil && strings.Contains(strings.ToLower(string(b)), "address already in use") {
		kind = errPortTaken
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if kind == nil {
		return fmt.Errorf("redis-server on %s %s; its log:\n%s", s.Addr, why, b)
	}
	return fmt.Errorf("redis-server on %s %s: %w; its log:\n%s", s.Addr, why, kind, b)
}

// serverPID is the process_id the server on s.Addr reports (INFO server), if it does.
// A short limit (as for launch's PING): whatever else may listen on the port must not
// hold up the look at whether the server exited.
func (s *Server) serverPID() (int, bool) {
	info, err := doWithin(500*time.Millisecond, s.Addr, s.Password, "INFO", "server")
	if err != nil {
		return 0, false
	}
	_, rest, found := strings.Cut(info, "process_id:")
	if !found {
		return 0, false
	}
	line, _, _ := strings.Cut(rest, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil
}

// Kill stops the server with SIGKILL (no shutdown save) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart kills the server and starts it again with the same arguments, ports and data
// folder. The ports stay reserved for the test (FreePort), so no other test takes them
// meanwhile; a process from elsewhere that does is waited out for a while.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	bin := serverBinary(s.t)
	deadline := time.Now().Add(startWithin)
	for {
		err := s.launch(bin)
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || time.Now().After(deadline) {
			s.t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// Do sends one command over a fresh RESP2 connection and returns a simple reply as text
// (an array of strings as its elements, one a line).
// It is a tiny client for fault injection (CLIENT PAUSE, DEL, FLUSHALL) that does not
// share state with the client under test. It sends AUTH first when s has a Password.
func (s *Server) Do(args ...string) (string, error) { return do(s.Addr, s.Password, args...) }

// Do sends one command to addr; see Server.Do.
func Do(addr string, args ...string) (string, error) { return do(addr, "", args...) }

func do(addr, password string, args ...string) (string, error) {
	return doWithin(5*time.Second, addr, password, args...)
}

// doWithin is do with a limit on the whole exchange.
func doWithin(limit time.Duration, addr, password string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, min(limit, time.Second))
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(limit))
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
	return readReply(r, true)
}

// readReply reads one reply. At the top level an array of simple or bulk strings
// (CLUSTER GETKEYSINSLOT, KEYS) comes back as its elements, one a line; nested arrays
// are not read.
func readReply(r *bufio.Reader, top bool) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("redis: empty reply line")
	}
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
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if !top || n < 0 {
			return line, nil
		}
		elems := make([]string, 0, n)
		for range n {
			e, err := readReply(r, false)
			if err != nil {
				return "", err
			}
			elems = append(elems, e)
		}
		return strings.Join(elems, "\n"), nil
	}
	return line, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a server or
// for a port where nobody listens. The port is reserved until t ends: no other FreePort
// of these tests, in any test process, returns it meanwhile, nor the port 10000 above it
// (a Cluster node's bus port) — so a server may be killed and restarted on it. It comes
// from outside the kernel's range of ephemeral ports (ip_local_port_range), where no
// outgoing connection and no listener on port 0 can take it; only a process that is not
// one of these tests can, and a server started on it then fails to bind: Start tries
// other ports then.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := reservePort(t)
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return port
}

// freePort is FreePort; a test of this package makes it return a port already taken.
var freePort = FreePort
