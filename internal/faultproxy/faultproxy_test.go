package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/proctest"
)

// echo serves an echo server on loopback for the test's length.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestPartition: a partition passes the connections whose client it keeps, black-holes
// the others, and resets those when it ends; the clients are told apart by the process
// that owns them (here all this one, so by port).
func TestPartition(t *testing.T) {
	p, err := faultproxy.Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, within time.Duration) error {
		c.SetDeadline(time.Now().Add(within))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_, err := r.ReadString('\n')
		return err
	}
	kept, kr := dial()
	cut, cr := dial()
	for _, c := range []struct {
		conn net.Conn
		r    *bufio.Reader
	}{{kept, kr}, {cut, cr}} {
		if err := roundTrip(c.conn, c.r, 5*time.Second); err != nil {
			t.Fatalf("before the partition: %v", err)
		}
	}
	if !proctest.SocketOwnedBy(kept.LocalAddr().(*net.TCPAddr), os.Getpid()) {
		t.Fatal("SocketOwnedBy does not find this process's own connection")
	}
	keepPort := kept.LocalAddr().(*net.TCPAddr).Port
	p.SetPartition(func(client *net.TCPAddr) bool { return client.Port == keepPort })
	if err := roundTrip(kept, kr, 5*time.Second); err != nil {
		t.Fatalf("a kept connection in the partition: %v", err)
	}
	var ne net.Error
	if err := roundTrip(cut, cr, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a cut connection in the partition: %v, want no reply", err)
	}
	p.Set(faultproxy.Pass, 0)
	cut.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := cr.ReadString('\n'); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("a connection the partition black-holed, after it: %v; want it closed (its stream lost bytes)", err)
	}
	if err := roundTrip(kept, kr, 5*time.Second); err != nil {
		t.Fatalf("a kept connection after the partition: %v", err)
	}
}
