package conn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Why cronlock does the connection handshake itself (found in go-redis v9.23, redis.go
// initConn): go-redis sends HELLO on every new connection, even with Protocol 2, and waits
// for its reply before anything else; with a database other than 0 it then sends SELECT
// and waits again. A run is one process with one connection that sends two scripts
// (acquire, release), so those were a third to a half of its round trips, and of the
// commands a whole fleet sends Redis at 09:00.
//
// So go-redis is given no credentials and database 0, and the dialer of the plain client
// wraps each new connection:
//
//   - AUTH and SELECT, when the URL needs them, go out pipelined in one round trip right
//     after the connect, and an error reply ends the dial. They are not pipelined with the
//     first script: a failed AUTH on a server whose default user needs no password would
//     let that script run unauthenticated, and a failed SELECT would let it take the lock
//     in database 0.
//   - go-redis's "HELLO 2" is answered on the spot and never sent. Redis starts every
//     connection in RESP2, which is what HELLO 2 asks for, and go-redis reads nothing of
//     the reply but whether it is an error. Any other first command (a later go-redis that
//     sends something else) goes to the server untouched.
//
// A connection without a password on database 0 thus costs no round trip before its first
// command; with either, one.

// handshake is what a new connection must send before go-redis uses it.
type handshake struct {
	username, password string
	db                 int
	timeout            time.Duration // bound of the AUTH/SELECT round trip
}

func newHandshake(t Target, timeout time.Duration) handshake {
	return handshake{username: t.Username, password: t.Password, db: t.DB, timeout: timeout}
}

// wrap returns a go-redis Dialer that dials with dial, does the handshake and answers
// go-redis's HELLO itself. A connection cut during the handshake (a server restarting
// between accept and reply) is dialled again while h.timeout allows, as dial does itself.
func (h handshake) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		deadline := time.Now().Add(h.timeout)
		for {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			err = h.run(ctx, c, deadline)
			if err == nil {
				return wrapHelloConn(c), nil
			}
			c.Close()
			var herr *handshakeError
			if errors.As(err, &herr) || !healableDialError(err) || ctx.Err() != nil || time.Until(deadline) < dialBackoffMin {
				return nil, handshakeFailed(network, err)
			}
			time.Sleep(dialBackoffMin)
		}
	}
}

// handshakeFailed reports a broken handshake as a failed dial (none of the locker's
// commands was sent, so none can have run), and an error reply as it is.
func handshakeFailed(network string, err error) error {
	var herr *handshakeError
	if errors.As(err, &herr) {
		return herr
	}
	return &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("redis handshake: %w", err)}
}

// commands is the pipelined request of the handshake and how many replies it gets.
func (h handshake) commands() ([]byte, int) {
	var b []byte
	n := 0
	if h.password != "" {
		if h.username != "" {
			b = appendCommand(b, "AUTH", h.username, h.password)
		} else {
			b = appendCommand(b, "AUTH", h.password)
		}
		n++
	}
	if h.db != 0 {
		b = appendCommand(b, "SELECT", strconv.Itoa(h.db))
		n++
	}
	return b, n
}

// handshakeError is an error reply to AUTH or SELECT. It is a redis.Error, so the locker
// treats it as the server's answer (nothing uncertain, not retried) and the user sees
// Redis's own words (WRONGPASS, NOPERM, "DB index is out of range"), never the password.
type handshakeError struct{ msg string }

func (e *handshakeError) Error() string { return e.msg }

// RedisError marks it as a reply of the server for go-redis and the locker.
func (e *handshakeError) RedisError() {}

// run sends the handshake on c and reads its replies before deadline (the pool dials
// with no deadline of its own: dial.go).
func (h handshake) run(ctx context.Context, c net.Conn, deadline time.Time) error {
	req, n := h.commands()
	if n == 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(req); err != nil {
		return err
	}
	// Each reply to AUTH and SELECT is one line (+OK or -ERR …), and nothing else comes
	// before them: read until there are n lines.
	var got []byte
	buf := make([]byte, 256)
	for bytes.Count(got, []byte("\r\n")) < n {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			return err
		}
		if len(got) > 64<<10 {
			return errors.New("redis handshake: the server's reply to AUTH/SELECT is not RESP; is --redis a Redis server?")
		}
	}
	for _, line := range bytes.SplitN(got, []byte("\r\n"), n+1)[:n] {
		switch {
		case len(line) > 0 && line[0] == '-':
			return &handshakeError{msg: string(line[1:])}
		case !bytes.Equal(line, []byte("+OK")):
			return fmt.Errorf("redis handshake: unexpected reply %.40q to AUTH/SELECT; is --redis a Redis server?", line)
		}
	}
	return nil
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// hello2 is go-redis's HELLO for Protocol 2 without credentials or a client name.
var hello2 = appendCommand(nil, "hello", "2")

// helloReply is the smallest reply go-redis accepts for HELLO 2 (a RESP2 map).
var helloReply = []byte("*2\r\n$5\r\nproto\r\n:2\r\n")

// helloConn answers the first write on the connection when it is go-redis's HELLO 2,
// and passes every other byte through. go-redis uses a connection from one goroutine at
// a time, so it needs no lock.
type helloConn struct {
	net.Conn
	first   bool   // nothing written yet
	pending []byte // the local reply to HELLO not yet read
}

// helloSysConn is a helloConn on a socket: go-redis's pool checks an idle connection's
// health through SyscallConn before reusing it, so that is kept.
type helloSysConn struct {
	*helloConn
	sc syscall.Conn
}

func (c helloSysConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

func wrapHelloConn(c net.Conn) net.Conn {
	h := &helloConn{Conn: c, first: true}
	if sc, ok := c.(syscall.Conn); ok {
		return helloSysConn{helloConn: h, sc: sc}
	}
	return h
}

func (c *helloConn) Write(b []byte) (int, error) {
	if c.first {
		c.first = false
		if bytes.EqualFold(b, hello2) {
			c.pending = helloReply
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

func (c *helloConn) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// IsAuthError reports a server's refusal of the credentials (or of a client that gave
// none), told by the words of its reply.
func IsAuthError(msg string) bool {
	for _, p := range []string{"WRONGPASS", "NOAUTH", "invalid password", "failed to authenticate", "AUTH failed", "without any password configured", "unauthenticated"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
