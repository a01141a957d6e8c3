package conn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"

	"cronlock/lockrun"
)

// TLSAdvice says what to do about a connection to a rediss:// server that failed in or
// around its TLS handshake, or "" when err is not such a failure (or t is not rediss://).
// "check --redis" alone does not help there: the URL is fine, the certificates or the
// port are not.
func (t Target) TLSAdvice(err error) string {
	if t.Scheme != "rediss" {
		return ""
	}
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostErr x509.HostnameError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return "the server's certificate is signed by a CA this host does not trust: add that CA to the system's trust store (update-ca-certificates), or point SSL_CERT_FILE at a file that holds it"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the server's certificate has expired or is not valid yet: renew it on the server, and check this host's clock"
	case errors.As(err, &invalid):
		return "the server's certificate is not valid for a TLS server: check the certificate the server is given (tls-cert-file)"
	case errors.As(err, &hostErr):
		return "the server's certificate does not name " + t.Host + ": write in --redis / CRONLOCK_REDIS_URL a host name the certificate names"
	case strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate"):
		return "the server asks for a client certificate (tls-auth-clients yes), and cronlock sends none: set tls-auth-clients no (or optional) on the server"
	case errors.As(err, &record) || lockrun.IsTimeout(err):
		// A plain Redis port does not answer a TLS handshake, or answers it in plain text.
		return "no TLS handshake: is that port the server's tls-port? rediss:// needs one; use redis:// for a plain port"
	}
	return ""
}
