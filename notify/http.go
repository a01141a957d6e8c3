package notify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// netConn is what the client needs of a connection; tests dial in-memory pipes.
type netConn = net.Conn

func dialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// StatusError is a ping the server answered with a status other than 2xx.
type StatusError struct{ Code int }

func (e *StatusError) Error() string {
	hint := ""
	switch {
	case e.Code == 404:
		hint = " (no check has this ping URL: is it the check's current one?)"
	case e.Code == 409:
		hint = " (the slug names more than one check)"
	case e.Code >= 300 && e.Code < 400:
		hint = " (redirects are not followed: give the URL it redirects to)"
	}
	return fmt.Sprintf("the server answered HTTP %d%s", e.Code, hint)
}

// send makes one request and returns nil for a 2xx answer, else an error that says
// why without the URL.
func (p *Pinger) send(ctx context.Context, what string, body []byte) error {
	if p.err != nil {
		return p.err
	}
	if err := p.do(ctx, what, body); err != nil {
		return p.cause(ctx, err)
	}
	return nil
}

func (p *Pinger) do(ctx context.Context, what string, body []byte) error {
	host, port := p.u.Hostname(), p.u.Port()
	if port == "" {
		port = "80"
		if p.u.Scheme == "https" {
			port = "443"
		}
	}
	conn, err := p.dial(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// A cancelled ctx (not only a passed deadline) must end a blocked read as well.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if p.u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: p.roots})
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		conn = tc
	}
	method := "GET"
	if len(body) > 0 {
		method = "POST"
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: cronlock\r\nConnection: close\r\n",
		method, p.target(what), p.u.Host)
	if len(body) > 0 {
		fmt.Fprintf(&req, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", len(body))
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		return err
	}
	line, err := bufio.NewReaderSize(conn, 256).ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return errors.New("the server's answer is not HTTP")
		}
		return err
	}
	code, ok := statusCode(string(line))
	if !ok {
		return errors.New("the server's answer is not HTTP")
	}
	if code/100 != 2 {
		return &StatusError{Code: code}
	}
	return nil
}

// statusCode reads the code of an HTTP/1.x status line ("HTTP/1.1 200 OK\r\n").
func statusCode(line string) (int, bool) {
	rest, ok := strings.CutPrefix(line, "HTTP/1.")
	if !ok || len(rest) < 5 || rest[1] != ' ' {
		return 0, false
	}
	code, err := strconv.Atoi(rest[2:5])
	if err != nil || code < 100 || code > 599 {
		return 0, false
	}
	return code, true
}

// cause turns err into a one-line reason that holds nothing of the URL: the net and
// TLS errors name the address or host they failed on (a DNS error names the host, a
// certificate error the name it was not valid for).
func (p *Pinger) cause(ctx context.Context, err error) error {
	var se *StatusError
	var dns *net.DNSError
	switch {
	case errors.As(err, &se):
		return se
	case ctx.Err() != nil, errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer within %v", p.deadline())
	case errors.As(err, &dns):
		return errors.New("the host name could not be resolved")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("connection refused")
	case errors.Is(err, syscall.ECONNRESET):
		return errors.New("connection reset by the server")
	}
	for inner := errors.Unwrap(err); inner != nil; inner = errors.Unwrap(err) {
		err = inner
	}
	return errors.New(p.scrub(err.Error()))
}

// scrub removes the URL's host, its address and its path from msg.
func (p *Pinger) scrub(msg string) string {
	for _, s := range []string{p.u.String(), p.u.EscapedPath(), p.u.Path, p.u.Host, p.u.Hostname()} {
		if len(s) > 1 {
			msg = strings.ReplaceAll(msg, s, "(hidden)")
		}
	}
	return msg
}
