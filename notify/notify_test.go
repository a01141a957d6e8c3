package notify

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hc records the pings a fake Healthchecks server gets.
type hc struct {
	mu    sync.Mutex
	pings []ping
	code  int
}

type ping struct{ method, path, rid, query, body string }

func newHC(t *testing.T) (*hc, *httptest.Server) {
	h := &hc{code: 200}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.pings = append(h.pings, ping{r.Method, r.URL.Path, r.URL.Query().Get("rid"), r.URL.RawQuery, string(b)})
		code := h.code
		h.mu.Unlock()
		w.WriteHeader(code)
		io.WriteString(w, "OK")
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hc) got() []ping {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ping(nil), h.pings...)
}

const rid = "0190b6c4-5d7e-7cde-8f00-112233445566"

func TestPings(t *testing.T) {
	cases := []struct {
		name   string
		exit   int
		failed bool
		body   string
		want   ping
	}{
		{"success", 0, false, "", ping{method: "GET", path: "/ping/abc"}},
		{"exit", 3, true, "boom\n", ping{method: "POST", path: "/ping/abc/3", body: "boom\n"}},
		{"fail", 0, true, "missed", ping{method: "POST", path: "/ping/abc/fail", body: "missed"}},
		{"signal", 143, true, "", ping{method: "GET", path: "/ping/abc/143"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, srv := newHC(t)
			p := New(srv.URL+"/ping/abc?create=1", rid)
			p.Start()
			if err := p.Finish(context.Background(), c.exit, c.failed, []byte(c.body)); err != nil {
				t.Fatal(err)
			}
			got := h.got()
			if len(got) != 2 || got[0].path != "/ping/abc/start" || got[0].method != "GET" {
				t.Fatalf("pings %+v; want the start, then the end", got)
			}
			end := got[1]
			if end.method != c.want.method || end.path != c.want.path || end.body != c.want.body {
				t.Errorf("end ping %+v; want %+v", end, c.want)
			}
			for _, g := range got {
				if g.rid != rid || !strings.Contains(g.query, "create=1") {
					t.Errorf("ping %+v: want rid=%s and the URL's own create=1", g, rid)
				}
			}
		})
	}
}

func TestFinishWithoutStart(t *testing.T) {
	h, srv := newHC(t)
	if err := New(srv.URL+"/x", rid).Finish(context.Background(), 125, true, []byte("redis down")); err != nil {
		t.Fatal(err)
	}
	if got := h.got(); len(got) != 1 || got[0].path != "/x/125" || got[0].body != "redis down" {
		t.Fatalf("pings %+v; want one /x/125 with the message", got)
	}
}

// The errors never hold the URL: its path is the secret, and its host is dropped too.
func TestErrorsKeepURLSecret(t *testing.T) {
	h, srv := newHC(t)
	h.code = 500
	const secret = "s3cr3t-token"
	err := New(srv.URL+"/"+secret, rid).Finish(context.Background(), 0, false, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 500 {
		t.Fatalf("error %v; want the server's 500", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	errs := []error{err, New("http://"+closed+"/"+secret, rid).Finish(context.Background(), 1, true, nil)}
	if !strings.Contains(errs[1].Error(), "refused") {
		t.Errorf("closed port: %v; want connection refused", errs[1])
	}
	// A DNS error names the host; a certificate error the name it was not valid for.
	p := New("https://hc.example.internal/"+secret, rid)
	p.dial = func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "hc.example.internal"}}
	}
	dnsErr := p.Finish(context.Background(), 0, false, nil)
	if dnsErr == nil || !strings.Contains(dnsErr.Error(), "could not be resolved") {
		t.Errorf("DNS failure: %v", dnsErr)
	}
	errs = append(errs, dnsErr)
	errs = append(errs, p.cause(context.Background(), errors.New("x509: certificate is valid for a.example, not hc.example.internal")))
	for _, e := range errs {
		if e == nil {
			t.Fatal("a failed ping returned no error")
		}
		for _, leak := range []string{secret, "hc.example.internal", closed, srv.URL} {
			if strings.Contains(e.Error(), leak) {
				t.Errorf("error %q holds %q", e, leak)
			}
		}
	}
}

// A server that never answers costs Finish its deadline and no more, the wait for the
// start ping included.
func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New("http://hc.test/uuid", rid)
		var mu sync.Mutex
		var servers []net.Conn
		p.dial = func(context.Context, string, string) (net.Conn, error) {
			c, s := net.Pipe()
			mu.Lock()
			servers = append(servers, s) // never read: the request's write blocks
			mu.Unlock()
			return c, nil
		}
		p.Start()
		time.Sleep(2 * time.Second) // the job, while the start ping hangs
		t0 := time.Now()
		err := p.Finish(context.Background(), 0, false, nil)
		if took := time.Since(t0); took != DefaultDeadline {
			t.Errorf("Finish took %v; want its deadline %v, the wait for the start included", took, DefaultDeadline)
		}
		if err == nil || !strings.Contains(err.Error(), "no answer within 5s") {
			t.Errorf("error %v; want no answer within 5s", err)
		}
		t0 = time.Now()
		p = New("http://hc.test/uuid", rid)
		p.Deadline = 300 * time.Millisecond
		p.dial = func(context.Context, string, string) (net.Conn, error) { c, _ := net.Pipe(); return c, nil }
		p.Finish(context.Background(), 1, true, []byte("x"))
		if took := time.Since(t0); took != p.Deadline {
			t.Errorf("Finish took %v; want its deadline %v", took, p.Deadline)
		}
		for _, s := range servers {
			s.Close()
		}
	})
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"https://hc-ping.com/5b2b9f3c-aaaa-bbbb-cccc-1234567890ab", "http://127.0.0.1:8000/ping/k/slug?create=1", "http://[::1]/p"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v; want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "hc-ping.com/uuid", "ftp://x/y", "https://", "http:opaque", "://x", "https://u:secretpw@hc/x", "http://a b/"} {
		err := Check(bad)
		if err == nil {
			t.Errorf("Check(%q) = nil; want an error", bad)
			continue
		}
		if strings.Contains(err.Error(), "secretpw") || (len(bad) > 8 && strings.Contains(err.Error(), bad)) {
			t.Errorf("Check(%q) = %q: echoes the URL", bad, err)
		}
	}
}

func TestTail(t *testing.T) {
	long := strings.Repeat("é", MaxBody) // two bytes each: the cut falls inside one
	got := Tail([]byte(long))
	if len(got) > MaxBody || !strings.HasPrefix(string(got), "é") || !strings.HasSuffix(long, string(got)) {
		t.Errorf("Tail: %d bytes starting %q; want at most %d, whole characters, the end", len(got), got[:4], MaxBody)
	}
	if string(Tail([]byte("short"))) != "short" {
		t.Error("Tail cut a short output")
	}
}

// TestHTTPS: pings over TLS, checked against the server's CA; a certificate that does not
// verify is a failed ping whose error names neither host nor path.
func TestHTTPS(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	p := New(srv.URL+"/tls-secret", rid)
	p.roots = x509.NewCertPool()
	p.roots.AddCert(srv.Certificate())
	p.Start()
	if err := p.Finish(context.Background(), 2, true, []byte("tail")); err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || paths[0] != "/tls-secret/start" || paths[1] != "/tls-secret/2" {
		t.Fatalf("paths %q", paths)
	}
	err := New(srv.URL+"/tls-secret", rid).Finish(context.Background(), 0, false, nil) // system CAs
	if err == nil || strings.Contains(err.Error(), "tls-secret") || strings.Contains(err.Error(), strings.TrimPrefix(srv.URL, "https://")) {
		t.Fatalf("unverified certificate: %v; want an error without the URL", err)
	}
	t.Logf("unverified certificate: %v", err)
}

// A proxy setting that does not parse is named by its variable, never quoted: it may hold
// a password. It is not tried again.
func TestBadProxyNotQuoted(t *testing.T) {
	_, srv := newHC(t)
	p := New(srv.URL+"/x", rid)
	tries := 0
	p.proxy = func(*http.Request) (*url.URL, error) {
		tries++
		return nil, errors.New(`invalid proxy address "http://u:proxypw@[bad": missing ']'`)
	}
	err := p.Finish(context.Background(), 0, false, nil)
	if err == nil || strings.Contains(err.Error(), "proxypw") || !strings.Contains(err.Error(), "HTTPS_PROXY") || tries != 1 {
		t.Fatalf("error %v after %d tries; want one line naming HTTPS_PROXY without its value, no retry", err, tries)
	}
}

// TestDeadlineKeepsTheServersAnswer: a try cut short by the deadline does not hide the
// trouble that made the ping retry: the server answered HTTP 500, then its second answer
// never came; the error names the 500, not "no answer".
func TestDeadlineKeepsTheServersAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New("http://hc.test/uuid", rid)
		p.Deadline = time.Second
		var mu sync.Mutex
		var conns []net.Conn
		p.dial = func(context.Context, string, string) (net.Conn, error) {
			c, s := net.Pipe()
			mu.Lock()
			first := len(conns) == 0
			conns = append(conns, s)
			mu.Unlock()
			go func() {
				if _, err := http.ReadRequest(bufio.NewReader(s)); err != nil || !first {
					return // the second try: read, never answered
				}
				io.WriteString(s, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				s.Close()
			}()
			return c, nil
		}
		err := p.Finish(context.Background(), 0, false, nil)
		if err == nil || !strings.Contains(err.Error(), "HTTP 500") {
			t.Errorf("error %v; want the server's HTTP 500, the last answer it gave", err)
		}
		mu.Lock()
		if len(conns) < 2 {
			t.Errorf("%d connections; want a second try after the 500", len(conns))
		}
		for _, s := range conns {
			s.Close()
		}
		mu.Unlock()
	})
}

// TestProxyWantsPassword: a proxy's 407, to a forwarded http:// ping (a status) and to an
// https:// ping's CONNECT (an error text), is said as the proxy's, with what to change;
// the password in the proxy's URL is never shown, and a 407 is not tried again.
func TestProxyWantsPassword(t *testing.T) {
	var tries atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
	}))
	t.Cleanup(proxy.Close)
	pu, err := url.Parse("http://puser:proxypw@" + strings.TrimPrefix(proxy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"http://hc.test/uuid", "https://hc.test/uuid"} {
		tries.Store(0)
		p := New(target, rid)
		p.proxy = func(*http.Request) (*url.URL, error) { return pu, nil }
		err := p.Finish(context.Background(), 0, false, nil)
		if err == nil || !strings.Contains(err.Error(), "the proxy answered HTTP 407") || !strings.Contains(err.Error(), "HTTPS_PROXY") ||
			strings.Contains(err.Error(), "proxypw") || strings.Contains(err.Error(), "uuid") || tries.Load() != 1 {
			t.Errorf("%s: error %v after %d tries; want one try and the proxy's 407 with what to change, no secret", target, err, tries.Load())
		}
	}
}
