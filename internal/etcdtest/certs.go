package etcdtest

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
	"time"
)

// makeCerts writes a CA, a server certificate for 127.0.0.1 and a client certificate into
// the server's folder, and sets the client's file names.
func (s *Server) makeCerts() {
	s.t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cronlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		s.t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	s.CAFile = filepath.Join(s.Dir, "ca.pem")
	s.writePEM(s.CAFile, "CERTIFICATE", caDER)

	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, certFile, keyFile string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			s.t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		s.writePEM(certFile, "CERTIFICATE", der)
		s.writePEM(keyFile, "EC PRIVATE KEY", kb)
	}
	leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, filepath.Join(s.Dir, "server.pem"), filepath.Join(s.Dir, "server-key.pem"))
	s.CertFile, s.KeyFile = filepath.Join(s.Dir, "client.pem"), filepath.Join(s.Dir, "client-key.pem")
	leaf(3, "cronlock", x509.ExtKeyUsageClientAuth, s.CertFile, s.KeyFile)
}

func (s *Server) writePEM(path, typ string, der []byte) {
	s.t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// clientTLS is the TLS configuration of a client that trusts the test CA and shows the
// client certificate.
func (s *Server) clientTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	b, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
