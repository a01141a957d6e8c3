package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// takenFirst makes the next freePort return port, and the ones after it free ports.
func takenFirst(t *testing.T, port int) {
	calls := 0
	freePort = func(t testing.TB) int {
		calls++
		if calls == 1 {
			return port
		}
		return FreePort(t)
	}
	t.Cleanup(func() { freePort = FreePort })
}

// TestStartOnTakenPort: a server whose port was taken after FreePort (here by a
// listener of this process) is started on another one, not a failed test.
func TestStartOnTakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	takenFirst(t, taken)
	s := Start(t)
	if s.Port == taken {
		t.Fatalf("started on the taken port %d", taken)
	}
	if reply, err := s.Do("PING"); err != nil || reply != "PONG" {
		t.Fatalf("PING: %q, %v", reply, err)
	}
}

// TestStartBesideOtherRedis: a port that another redis-server has is given up even
// though PING is answered there: the answer is not from the server just started.
func TestStartBesideOtherRedis(t *testing.T) {
	other := Start(t)
	takenFirst(t, other.Port)
	s := Start(t)
	if s.Port == other.Port {
		t.Fatalf("started on the port of another server, %d", other.Port)
	}
	if pid, ok := s.serverPID(); !ok || pid != s.cmd.Process.Pid {
		t.Fatalf("server on %s says pid %d (%v); started pid %d", s.Addr, pid, ok, s.cmd.Process.Pid)
	}
}

// TestStartTLSOnTakenPort: a taken TLS port is retried too.
func TestStartTLSOnTakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	calls := 0
	freePort = func(t testing.TB) int {
		calls++
		if calls == 2 { // the first try's TLS port
			return taken
		}
		return FreePort(t)
	}
	t.Cleanup(func() { freePort = FreePort })
	cert, key := selfSigned(t)
	s := StartTLS(t, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert,
		"--tls-auth-clients", "no")
	if s.TLSPort == taken || s.TLSPort == 0 || calls < 4 {
		t.Fatalf("TLS port %d after %d ports asked for; %d was taken", s.TLSPort, calls, taken)
	}
	c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.TLSPort), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS port %d: %v", s.TLSPort, err)
	}
	c.Close()
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (cert, key string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestFreePortReserved: a port from FreePort, and its bus port, cannot be reserved
// again while the test runs.
func TestFreePortReserved(t *testing.T) {
	p := FreePort(t)
	f, err := os.OpenFile(reservations, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, q := range []int{p, p + busOffset} {
		if lockByte(f, q) {
			t.Errorf("port %d reserved twice", q)
		}
	}
	if ephemeral(p) || ephemeral(p+busOffset) {
		t.Errorf("port %d (or its bus port) is in the ephemeral range", p)
	}
}

// TestRestartKeepsPort: Restart comes back on the same port, with its data loaded
// (a server still loading answers INFO, but LOADING to everything else).
func TestRestartKeepsPort(t *testing.T) {
	s := Start(t, "--appendonly", "yes", "--appendfsync", "always")
	port := s.Port
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if s.Port != port {
		t.Fatalf("port %d after Restart, was %d", s.Port, port)
	}
	if reply, err := s.Do("GET", "k"); err != nil || reply != "v" {
		t.Fatalf("GET right after Restart: %q, %v", reply, err)
	}
}

// TestDoArrayReply: an array of strings comes back as its elements, one a line (what
// MigrateSlot reads from CLUSTER GETKEYSINSLOT); an empty one as "".
func TestDoArrayReply(t *testing.T) {
	s := Start(t)
	for _, k := range []string{"a", "b"} {
		if _, err := s.Do("RPUSH", "l", k); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Do("LRANGE", "l", "0", "-1"); err != nil || got != "a\nb" {
		t.Fatalf("LRANGE: %q, %v; want \"a\\nb\"", got, err)
	}
	if got, err := s.Do("LRANGE", "none", "0", "-1"); err != nil || got != "" {
		t.Fatalf("LRANGE of nothing: %q, %v", got, err)
	}
}
