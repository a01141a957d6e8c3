package cmd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/redistest"
)

// TestRedisTLS: rediss:// works against a real TLS Redis whose CA the machine trusts
// (here through SSL_CERT_FILE), and an untrusted certificate is a clear 125.
func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCerts(t, dir)
	srv := redistest.StartTLS(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	tlsPort := srv.TLSPort
	c := newCLI(t, "rediss://localhost:"+strconv.Itoa(tlsPort)+"/0")

	code, _, stderr := c.run("run", "-k", "tls", "--", "true")
	if code != 125 || !strings.Contains(stderr, "certificate") {
		t.Fatalf("untrusted certificate: exit %d, stderr %q; want 125 naming the certificate", code, stderr)
	}
	c.env = append(c.env, "SSL_CERT_FILE="+caFile)
	code, out, stderr := c.run("run", "-k", "tls", "--", "echo", "over-tls")
	if code != 0 || out != "over-tls\n" {
		t.Fatalf("trusted: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, out, _ := c.run("history", "--json", "--key", "tls"); !strings.Contains(out, `"backend":"rediss localhost:`) {
		t.Fatalf("history does not name the TLS backend: %s", out)
	}
}

// writeTestCerts makes a CA and a server certificate for localhost/127.0.0.1.
func writeTestCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cronlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER),
		write("server.key", "EC PRIVATE KEY", keyDER)
}

// TestRedisTLSFailuresSayWhatToDo: a TLS connection that fails says what to fix, not
// "check --redis": an untrusted CA (SSL_CERT_FILE), and rediss:// aimed at a plain port
// (tls-port). (A server that wants a client certificate is told apart only when its
// alert arrives before TLS 1.3's reset, so it is not checked here.)
func TestRedisTLSFailuresSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCerts(t, dir)
	plain := redistest.StartTLS(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	tlsPort := plain.TLSPort
	for _, tc := range []struct {
		url, caFile, want string
	}{
		{"rediss://localhost:" + strconv.Itoa(tlsPort), "", "SSL_CERT_FILE"},
		{"rediss://" + plain.Addr, caFile, "tls-port"},
	} {
		c := newCLI(t, tc.url)
		if tc.caFile != "" {
			c.env = append(c.env, "SSL_CERT_FILE="+tc.caFile)
		}
		code, _, stderr := c.run("run", "-k", "tls", "--redis-timeout", "1s", "--", "true")
		if code != 125 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s (CA %q): exit %d, stderr %q; want 125 and one line naming %s", tc.url, tc.caFile, code, stderr, tc.want)
		}
	}
}
