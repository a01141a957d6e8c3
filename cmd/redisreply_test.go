package cmd

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"cronlock/internal/redistest"
)

// cutReplyProxy forwards connections to upstream and, the first time a reply from the
// server holds match, drops that reply and closes the connection: the command ran on the
// server, and the client never learns it.
func cutReplyProxy(t *testing.T, upstream string, match []byte) (addr string, cut *atomic.Bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cut = new(atomic.Bool)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close() }()
			go func() {
				defer c.Close()
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && bytes.Contains(buf[:n], match) && cut.CompareAndSwap(false, true) {
						return
					}
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), cut
}

// TestReleaseReplyLostRecordsOneRun: a release whose reply is lost (the connection cut
// after the script ran) is sent again; the entry it wrote into the fleet's record must
// not be written twice, or history --fleet shows two runs where one ran.
func TestReleaseReplyLostRecordsOneRun(t *testing.T) {
	// release.lua's reply when it deleted the lock: {1, 0, now, ''}.
	addr, cut := cutReplyProxy(t, redistest.Addr(t), []byte("*4\r\n:1\r\n:0\r\n"))
	c := newCLI(t, "redis://"+addr)
	if code, out, errs := c.run("run", "-k", "relost", "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if !cut.Load() {
		t.Fatal("the proxy never saw the release's reply: the test tests nothing")
	}
	code, out, errs := c.run("history", "--fleet", "--key", "relost", "--json")
	if code != 0 || strings.Count(out, `"status":"succeeded"`) != 1 {
		t.Fatalf("history --fleet: exit %d, stdout %q, stderr %q; want the one run once", code, out, errs)
	}
}

// TestUnlockReplyLostSaysSo: an unlock whose reply is lost is sent again and finds the
// key gone; it must not say "was not held; nothing removed" about a lock it removed.
func TestUnlockReplyLostSaysSo(t *testing.T) {
	upstream := redistest.Addr(t)
	// unlock.lua's reply when it deleted the lock: {1, value, pttl}.
	addr, cut := cutReplyProxy(t, upstream, []byte("*3\r\n:1\r\n"))
	c := newCLI(t, "redis://"+addr)
	mustDo(t, upstream, "SET", c.prefix()+"{ulost}:lock", "by-hand", "PX", "60000")
	code, out, errs := c.run("unlock", "-k", "ulost", "--force")
	if !cut.Load() {
		t.Fatal("the proxy never saw unlock's reply: the test tests nothing")
	}
	if code != 0 || strings.Contains(out, "nothing removed") || !strings.Contains(out, "reply was lost") {
		t.Fatalf("unlock: exit %d, stdout %q, stderr %q; want 0 and a line saying the lost try likely removed it", code, out, errs)
	}
}
