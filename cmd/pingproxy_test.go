package cmd

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hcHost is the made-up name of the ping server in the proxy tests. Only the test's proxy
// resolves it (to the server's loopback address): cronlock, which must go through the
// proxy, never looks it up, and Go's ProxyFromEnvironment never proxies loopback
// addresses or "localhost", so the name is what makes the proxy be used at all.
const hcHost = "hc.cronlock.test"

// pingLog is a ping server's record, with the headers the proxy tests look at.
type pingLog struct {
	mu    sync.Mutex
	pings []pingSeen
}

type pingSeen struct{ Method, Path, Body, UserAgent string }

func (l *pingLog) add(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pings = append(l.pings, pingSeen{r.Method, r.URL.Path, string(b), r.Header.Get("User-Agent")})
}

func (l *pingLog) got() []pingSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]pingSeen(nil), l.pings...)
}

// testProxy is a small forward proxy on loopback: CONNECT for https, absolute-form
// requests for http. It dials what it is asked for, resolving the names of its table
// itself (hcHost is the test server's 127.0.0.1) and refusing anything off loopback.
type testProxy struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "CONNECT hc.cronlock.test:443", "GET hc.cronlock.test:80"
}

func newTestProxy(t *testing.T, names map[string]string) *testProxy {
	p := &testProxy{}
	dial := func(addr string) (net.Conn, error) {
		host, port, _ := net.SplitHostPort(addr)
		if ip, ok := names[host]; ok {
			host = ip
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, &net.AddrError{Err: "the test proxy dials loopback only", Addr: addr}
		}
		return net.Dial("tcp", net.JoinHostPort(host, port))
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if r.Method != http.MethodConnect {
			host = r.URL.Host
		}
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+host)
		p.mu.Unlock()
		up, err := dial(host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		if r.Method == http.MethodConnect {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
			go func() { io.Copy(up, rw); up.(*net.TCPConn).CloseWrite() }()
			io.Copy(conn, up)
			return
		}
		r.RequestURI = ""
		r.Header.Del("Proxy-Connection")
		r.Close = true
		if err := r.Write(up); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(up), r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(p.Server.Close)
	return p
}

func (p *testProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// hostsLoopbackName is a name other than localhost that /etc/hosts gives a 127.0.0.0/8
// address, "" if none: a NO_PROXY test needs a name cronlock resolves without DNS.
func hostsLoopbackName() (name, addr string) {
	b, _ := os.ReadFile("/etc/hosts")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.SplitN(line, "#", 2)[0])
		if len(f) < 2 || !strings.HasPrefix(f[0], "127.") {
			continue
		}
		for _, n := range f[1:] {
			if n != "localhost" && !strings.Contains(n, "localhost") {
				return n, f[0]
			}
		}
	}
	return "", ""
}

// writeHostCert makes a CA (written to ca.pem in dir) and a server certificate for hcHost.
func writeHostCert(t *testing.T, dir string) (caFile string, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cronlock ping test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hcHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{hcHost}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "ping-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// portOf is the port of a test server's URL.
func portOf(t *testing.T, u string) string {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestPingThroughProxy: HTTP_PROXY and HTTPS_PROXY carry the pings (a forward request,
// a CONNECT tunnel with the server's certificate checked end to end), NO_PROXY skips the
// proxy, a proxy that is down is named in the one warning line, and the requests say
// User-Agent cronlock/<version>. The URL shows nowhere.
func TestPingThroughProxy(t *testing.T) {
	c := newCLI(t, "")
	base := c.env

	var plain pingLog
	hc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { plain.add(r) }))
	t.Cleanup(hc.Close)
	names := map[string]string{hcHost: "127.0.0.1"}
	if name, addr := hostsLoopbackName(); name != "" {
		names[name] = addr
	}
	proxy := newTestProxy(t, names)

	t.Run("http", func(t *testing.T) {
		c.env = append(base, "HTTP_PROXY="+proxy.URL)
		url := "http://" + hcHost + ":" + portOf(t, hc.URL) + "/" + pingSecret
		code, _, errs := c.run("run", "-k", "viaproxy", "--ping", url, "--", "sh", "-c", "echo failing; exit 3")
		if code != 3 || strings.Contains(errs, "ping") {
			t.Fatalf("exit %d, stderr %q; want 3 and no ping warning", code, errs)
		}
		got := plain.got()
		if len(got) != 2 || got[0].Path != "/"+pingSecret+"/start" || got[1].Path != "/"+pingSecret+"/3" || !strings.Contains(got[1].Body, "failing\n") {
			t.Fatalf("pings %+v; want start and /3 with the output", got)
		}
		if ua := got[0].UserAgent; !strings.HasPrefix(ua, "cronlock/") || len(ua) <= len("cronlock/") {
			t.Errorf("User-Agent %q; want cronlock/<version>", ua)
		}
		if seen := proxy.requests(); len(seen) != 2 || seen[0] != "GET "+hcHost+":"+portOf(t, hc.URL) {
			t.Errorf("the proxy saw %q; want both pings", seen)
		}
	})

	t.Run("https", func(t *testing.T) {
		caFile, cert := writeHostCert(t, c.dir)
		var tlsLog pingLog
		hcs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tlsLog.add(r) }))
		hcs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		hcs.StartTLS()
		t.Cleanup(hcs.Close)
		tproxy := newTestProxy(t, names)
		url := "https://" + hcHost + ":" + portOf(t, hcs.URL) + "/" + pingSecret
		c.env = append(base, "HTTPS_PROXY="+tproxy.URL, "SSL_CERT_FILE="+caFile)
		code, _, errs := c.run("run", "-k", "viatunnel", "--ping", url, "--", "true")
		if code != 0 || errs != "" {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		if got := tlsLog.got(); len(got) != 2 || got[1].Path != "/"+pingSecret {
			t.Fatalf("pings %+v; want start and success over TLS", got)
		}
		if seen := tproxy.requests(); len(seen) < 1 || seen[0] != "CONNECT "+hcHost+":"+portOf(t, hcs.URL) {
			t.Errorf("the proxy saw %q; want a CONNECT to %s", seen, hcHost)
		}
	})

	t.Run("proxy-down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := ln.Addr().String()
		ln.Close()
		c.env = append(base, "HTTPS_PROXY=http://"+down, "CRONLOCK_TEST_PING_DEADLINE=3s")
		url := "https://" + hcHost + "/" + pingSecret
		code, _, errs := c.run("run", "-k", "proxydown", "--ping", url, "--", "true")
		want := "ping to the --ping URL failed: via proxy " + down + ": connection refused"
		if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, want) {
			t.Fatalf("exit %d, stderr %q; want 0 and one line with %q", code, errs, want)
		}
		noSecret(t, "stderr", errs)
		if strings.Contains(errs, hcHost) {
			t.Errorf("stderr %q names the ping host", errs)
		}
	})

	t.Run("no-proxy", func(t *testing.T) {
		name, addr := hostsLoopbackName()
		if name == "" {
			t.Skip("no name other than localhost for a 127.0.0.0/8 address in /etc/hosts: NO_PROXY needs a name resolved without DNS")
		}
		var direct pingLog
		ln, err := net.Listen("tcp", addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { direct.add(r) }))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		before := len(proxy.requests())
		url := "http://" + name + ":" + portOf(t, srv.URL) + "/" + pingSecret
		// Without NO_PROXY the name goes through the proxy; with it, straight to the server.
		c.env = append(base, "HTTP_PROXY="+proxy.URL, "NO_PROXY=other.example,"+name)
		if code, _, errs := c.run("run", "-k", "noproxy", "--ping", url, "--", "true"); code != 0 || errs != "" {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		if got := direct.got(); len(got) != 2 {
			t.Fatalf("pings %+v; want start and success, straight", got)
		}
		if seen := proxy.requests(); len(seen) != before {
			t.Errorf("the proxy saw %q despite NO_PROXY", seen[before:])
		}
		c.env = append(base, "HTTP_PROXY="+proxy.URL)
		if code, _, errs := c.run("run", "-k", "noproxy", "--ping", url, "--", "true"); code != 0 || errs != "" {
			t.Fatalf("without NO_PROXY: exit %d, stderr %q", code, errs)
		}
		if seen := proxy.requests(); len(seen) != before+2 {
			t.Errorf("the proxy saw %q; want both pings without NO_PROXY", seen[before:])
		}
	})
}

// TestPingRedirectRetryBodyLimit: a redirect is followed (a 308 keeps the POST and its
// body); a ping answered 503, or whose connection is closed without an answer, is tried
// again and arrives, with no warning; the server's Ping-Body-Limit sets how much output
// the end ping carries, below and above the default 10,000 bytes.
func TestPingRedirectRetryBodyLimit(t *testing.T) {
	c := newCLI(t, "")
	var log pingLog
	var mu sync.Mutex
	failNext := 0  // answers left to fail with 503
	closeNext := 0 // connections left to close unanswered
	limit := ""    // Ping-Body-Limit to answer
	hc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fail, drop, lim := failNext > 0, closeNext > 0 && failNext == 0, limit
		if fail {
			failNext--
		} else if drop {
			closeNext--
		}
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/old/") {
			http.Redirect(w, r, "/"+strings.TrimPrefix(r.URL.Path, "/old/")+"?"+r.URL.RawQuery, http.StatusPermanentRedirect)
			return
		}
		log.add(r)
		switch {
		case fail:
			w.WriteHeader(http.StatusServiceUnavailable)
		case drop:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		default:
			if lim != "" {
				w.Header().Set("Ping-Body-Limit", lim)
			}
			io.WriteString(w, "OK")
		}
	}))
	t.Cleanup(hc.Close)
	set := func(fail, drop int, lim string) {
		mu.Lock()
		failNext, closeNext, limit = fail, drop, lim
		mu.Unlock()
		log.mu.Lock()
		log.pings = nil
		log.mu.Unlock()
	}
	url := hc.URL + "/" + pingSecret

	set(0, 0, "")
	code, _, errs := c.run("run", "-k", "redirected", "--ping", hc.URL+"/old/"+pingSecret, "--", "sh", "-c", "echo moved; exit 2")
	if got := log.got(); code != 2 || errs != "" || len(got) != 2 || got[1].Path != "/"+pingSecret+"/2" || got[1].Method != "POST" || !strings.HasPrefix(got[1].Body, "moved\n") {
		t.Fatalf("redirect: exit %d, stderr %q, pings %+v; want /2 with its body at the new place", code, errs, got)
	}

	set(2, 0, "")
	code, _, errs = c.run("run", "-k", "retried", "--ping", url, "--", "true")
	if got := log.got(); code != 0 || errs != "" || len(got) != 4 {
		t.Fatalf("503 twice: exit %d, stderr %q, %d pings %+v; want the start tried again after its 503s, then the end", code, errs, len(got), got)
	}
	set(0, 1, "")
	code, _, errs = c.run("run", "-k", "retried", "--ping", url, "--", "true")
	if got := log.got(); code != 0 || errs != "" || len(got) != 3 {
		t.Fatalf("a closed connection: exit %d, stderr %q, %d pings; want the start tried again", code, errs, len(got))
	}

	big := "seq 1 20000; exit 1" // 108,894 bytes, more than the default 10,000
	for _, lim := range []int{100, 50000} {
		set(0, 0, strconv.Itoa(lim))
		code, _, errs = c.run("run", "-k", "limited", "--capture", "1MiB", "--ping", url, "--", "sh", "-c", big)
		got := log.got()
		if code != 1 || errs != "" || len(got) != 2 {
			t.Fatalf("Ping-Body-Limit %d: exit %d, stderr %q, pings %+v", lim, code, errs, got)
		}
		body := got[1].Body
		if len(body) > lim || len(body) < lim-100 || !strings.Contains(body, "\n20000\ncronlock: limited: ") {
			t.Errorf("Ping-Body-Limit %d: a body of %d bytes ending %q; want at most the limit, the output's end and cronlock's line", lim, len(body), body[max(0, len(body)-80):])
		}
	}
}
