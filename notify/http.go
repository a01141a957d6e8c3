package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StatusError is a ping the server answered with a status other than 2xx (after the
// redirects, which are followed).
type StatusError struct{ Code int }

func (e *StatusError) Error() string {
	hint := ""
	switch {
	case e.Code == 404:
		hint = " (no check has this ping URL: is it the check's current one?)"
	case e.Code == 409:
		hint = " (the slug names more than one check)"
	case e.Code == http.StatusProxyAuthRequired:
		return "the proxy answered HTTP 407" + proxyAuthHint
	case e.Code >= 300 && e.Code < 400:
		hint = " (a redirect with nowhere to go: give the URL it redirects to)"
	}
	return fmt.Sprintf("the server answered HTTP %d%s", e.Code, hint)
}

// proxyAuthHint is the advice after a proxy's 407, which net/http reports as a status for
// a forwarded http:// ping and as an error text for an https:// one's CONNECT: the proxy,
// not the ping's server, refused, and the fix is in the proxy variable.
const proxyAuthHint = " (it wants a user name and password: give them in HTTPS_PROXY / HTTP_PROXY as http://USER:PASSWORD@HOST:PORT, or check the ones there)"

// Retry spacing: a failed ping (no connection, a connection that broke, a 5xx) is tried
// again after retryFirst, then twice as long each time, within the run's deadline and at
// most maxTries times in all: a dead endpoint costs a run about two seconds, not the
// whole deadline.
const (
	retryFirst = 250 * time.Millisecond
	maxTries   = 4
)

// maxBodyLimit caps a server's Ping-Body-Limit (healthchecks.io says 100 kB): the body is
// the captured output, bounded by --capture, and a server's header must not make every
// failing run send megabytes.
const maxBodyLimit = 1 << 20

// client makes the pinger's HTTP client: the standard library's, so that HTTPS_PROXY,
// HTTP_PROXY and NO_PROXY are honoured, redirects followed (ten at most) and TLS is Go's.
func (p *Pinger) client() *http.Client {
	dial := p.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr := &http.Transport{
		Proxy:                 p.proxyFor,
		DialContext:           dial,
		TLSClientConfig:       &tls.Config{RootCAs: p.roots},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       30 * time.Second, // the end ping of a long job dials anew
		TLSHandshakeTimeout:   0,                // the ping's context bounds it all
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errTooManyRedirects
		}
		return nil
	}}
}

// proxyFor is the Transport's Proxy: the environment's choice, remembered (host and port
// only: a proxy URL may hold a password) so that an error can say which proxy it went
// through.
func (p *Pinger) proxyFor(req *http.Request) (*url.URL, error) {
	pu, err := p.proxy(req)
	if err != nil {
		// Its text quotes the proxy setting, which may hold a password.
		return nil, errBadProxy
	}
	if pu != nil {
		p.mu.Lock()
		p.via = pu.Host
		p.mu.Unlock()
	}
	return pu, err
}

// send makes one ping, tried again on a connection error or a 5xx while ctx allows, and
// returns nil for a 2xx answer, else an error that says why without the URL.
func (p *Pinger) send(ctx context.Context, what string, body []byte) error {
	if p.err != nil {
		return p.err
	}
	p.hcOnce.Do(func() { p.hc = p.client() })
	wait := retryFirst
	var prev error // the last try's error, when a try was cut short by the deadline
	for try := 1; ; try++ {
		err := p.do(ctx, what, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && prev != nil {
			// A try the deadline cut short says nothing of the server: the one before
			// it met the trouble (an HTTP 500, a refused connection) that made it retry.
			return p.cause(context.Background(), prev)
		}
		if try == maxTries || !retryable(err) || ctx.Err() != nil {
			return p.cause(ctx, err)
		}
		prev = err
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return p.cause(context.Background(), err) // the last try's cause, not "no answer"
		}
		wait *= 2
	}
}

// retryable: no connection, a connection that broke, or the server's own trouble (5xx).
// A 4xx will not change (a wrong URL), nor will a URL or certificate the client refuses.
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ce *tls.CertificateVerificationError
	var he tls.RecordHeaderError
	return !errors.As(err, &ce) && !errors.As(err, &he) && !errors.Is(err, errTooManyRedirects) && !errors.Is(err, errBadProxy) && !connectNeedsAuth(err)
}

// connectNeedsAuth reports a proxy's 407 to an https:// ping's CONNECT, which net/http
// gives as an error holding only the status text (a forwarded http:// ping gets a
// StatusError instead). It will not change by asking again.
func connectNeedsAuth(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error() == http.StatusText(http.StatusProxyAuthRequired)
}

var (
	errTooManyRedirects = errors.New("more than 10 redirects")
	errBadProxy         = errors.New("HTTPS_PROXY or HTTP_PROXY is not a proxy URL (http://host:port)")
)

func (p *Pinger) do(ctx context.Context, what string, body []byte) error {
	method := http.MethodGet
	var rd io.Reader
	if len(body) > 0 {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.target(what), rd)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", p.UserAgent)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	// Read a little of the answer, so that the connection can carry the next ping.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if n, err := strconv.Atoi(resp.Header.Get("Ping-Body-Limit")); err == nil && n > 0 {
		p.bodyLimit.Store(int64(min(n, maxBodyLimit)))
	}
	if resp.StatusCode/100 != 2 {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

// cause turns err into a one-line reason that holds nothing of the URL: net/http's
// *url.Error quotes it, and the net and TLS errors name the address or host they failed
// on (a DNS error names the host, a certificate error the name it was not valid for).
// A ping that went through a proxy says so: "via proxy 10.0.0.1:3128: connection refused".
func (p *Pinger) cause(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	p.mu.Lock()
	via := p.via
	p.mu.Unlock()
	if via != "" {
		via = "via proxy " + via + ": "
	}
	var se *StatusError
	var dns *net.DNSError
	var ce *tls.CertificateVerificationError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%s%w", via, se)
	case ctx.Err() != nil, errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%sno answer within %v", via, p.deadline())
	case errors.As(err, &dns):
		return fmt.Errorf("%sthe host name could not be resolved", via)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%sconnection refused", via)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%sthe connection was closed without an answer", via)
	case errors.As(err, &ce):
		return fmt.Errorf("%sthe server's certificate is not trusted (%s): give its CA in SSL_CERT_FILE", via, p.scrub(ce.Err.Error()))
	case via != "" && connectNeedsAuth(err):
		return fmt.Errorf("%sthe proxy answered HTTP 407%s", via, proxyAuthHint)
	}
	for inner := errors.Unwrap(err); inner != nil; inner = errors.Unwrap(err) {
		err = inner
	}
	return fmt.Errorf("%s%s", via, p.scrub(err.Error()))
}

// scrub removes the URL, its host, its address and its path from msg.
func (p *Pinger) scrub(msg string) string {
	for _, s := range []string{p.u.String(), p.u.EscapedPath(), p.u.Path, p.u.Host, p.u.Hostname()} {
		if len(s) > 1 {
			msg = strings.ReplaceAll(msg, s, "(hidden)")
		}
	}
	return msg
}
