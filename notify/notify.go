// Package notify sends the Healthchecks pings of one run (healthchecks.io and its
// self-hosted server): a start signal when the job starts, then success, failure with
// the exit status, or fail, each carrying the run id, all within one deadline. It keeps
// the URL secret: no error it returns contains the URL, its path or its host, since
// whoever knows a ping URL can ping it.
//
// It uses net/http, for what a fleet's network needs of a ping: HTTPS_PROXY, HTTP_PROXY
// and NO_PROXY, redirects, a maintained TLS client. A failed ping (no connection, a 5xx)
// is tried again within the deadline; the server's Ping-Body-Limit answer header sets how
// much output the later pings carry. It does not read answers beyond their status and
// headers, and never holds up or changes a run beyond its deadline.
package notify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// DefaultDeadline bounds the pings of one run end, the wait for a start ping still in
// flight included.
const DefaultDeadline = 5 * time.Second

// MaxBody is the most of a run's output a ping carries when the server has not said
// otherwise (its Ping-Body-Limit header): the default body limit of a self-hosted
// Healthchecks (PING_BODY_LIMIT); a longer body would be cut there anyway.
const MaxBody = 10000

// ErrNotHTTP is Check's error for a URL that is not http:// or https://. Its text holds
// nothing of the URL.
var ErrNotHTTP = errors.New("not an http:// or https:// URL")

// Check reports whether raw is a ping URL New can use: an absolute http or https URL
// with a host. The error never quotes raw.
func Check(raw string) error {
	_, err := parse(raw)
	return err
}

func parse(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, ErrNotHTTP
	}
	if u.User != nil {
		// Healthchecks does not use it, and a password there would be one more secret
		// to keep out of messages: better refused now than a ping that fails every time.
		return nil, errors.New("user:password@ in the URL is not supported")
	}
	return u, nil
}

// A Pinger sends the pings of one run. Its methods may be called from one goroutine
// only: Start at most once, then Finish at most once.
type Pinger struct {
	u   *url.URL
	err error // a URL New could not use: every ping fails with it
	rid string
	// Deadline bounds Finish (DefaultDeadline when zero), and the start ping alone.
	Deadline time.Duration
	// UserAgent is the requests' User-Agent ("cronlock/v1.2.3").
	UserAgent string
	// proxy picks the proxy of a request (http.ProxyFromEnvironment; tests replace it).
	proxy func(*http.Request) (*url.URL, error)
	// dial connects to addr ("host:port"); nil = a net.Dialer's (tests replace it).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// roots are the CAs an https server's certificate is checked against; nil = the
	// system's (SSL_CERT_FILE, SSL_CERT_DIR; tests give their server's).
	roots  *x509.CertPool
	hc     *http.Client // made at the first ping (hcOnce)
	hcOnce sync.Once

	mu  sync.Mutex
	via string // host:port of the proxy the last request went through; "" = none

	bodyLimit atomic.Int64 // the server's Ping-Body-Limit; 0 = MaxBody

	startDone chan struct{} // closed when the start ping has ended; nil before Start
	startErr  error
	once      sync.Once
}

// New returns the Pinger of the run rid (a UUID, which Healthchecks needs to pair a
// start with its end) for the check at raw. A raw that Check refuses makes every ping
// fail with Check's error.
func New(raw, rid string) *Pinger {
	u, err := parse(raw)
	return &Pinger{u: u, err: err, rid: rid, UserAgent: "cronlock", proxy: http.ProxyFromEnvironment}
}

func (p *Pinger) deadline() time.Duration {
	if p.Deadline > 0 {
		return p.Deadline
	}
	return DefaultDeadline
}

// Start sends URL/start?rid=RID in the background, so that the job starts at once;
// Finish waits for it (within its own deadline) and reports its error.
func (p *Pinger) Start() {
	p.once.Do(func() {
		p.startDone = make(chan struct{})
		go func() {
			defer close(p.startDone)
			ctx, cancel := context.WithTimeout(context.Background(), p.deadline())
			defer cancel()
			p.startErr = p.send(ctx, "start", nil)
		}()
	})
}

// Finish sends the run's end once the start ping (if any) has ended: URL?rid=RID for a
// success (exit 0 and not failed), URL/EXIT?rid=RID for a non-zero exit, URL/fail?rid=RID
// for a run that exited 0 without succeeding; a non-empty body (its last MaxBody bytes,
// or as many as the server's Ping-Body-Limit said) goes along as a POST. All of it takes at most Deadline. The error, the start ping's
// first, says what went wrong without the URL.
func (p *Pinger) Finish(ctx context.Context, exit int, failed bool, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, p.deadline())
	defer cancel()
	var startErr error
	if p.startDone != nil {
		select {
		case <-p.startDone:
			startErr = p.startErr
		case <-ctx.Done():
			return p.cause(ctx, context.DeadlineExceeded)
		}
	}
	what := ""
	switch {
	case exit != 0:
		what = fmt.Sprint(exit & 0xff)
	case failed:
		what = "fail"
	}
	if err := p.send(ctx, what, p.tail(body)); err != nil {
		return err
	}
	return startErr
}

// tail is the end of body that the server takes: its Ping-Body-Limit (from an earlier
// answer, the start ping's) or MaxBody.
func (p *Pinger) tail(body []byte) []byte {
	n := int(p.bodyLimit.Load())
	if n <= 0 {
		n = MaxBody
	}
	return TailN(body, n)
}

// Tail is TailN(out, MaxBody).
func Tail(out []byte) []byte { return TailN(out, MaxBody) }

// TailN is the end of out: at most n bytes, starting at a whole UTF-8 character.
func TailN(out []byte, n int) []byte {
	if len(out) <= n {
		return out
	}
	out = out[len(out)-n:]
	for i := 0; i < utf8.UTFMax && i < len(out); i++ {
		if utf8.RuneStart(out[i]) {
			return out[i:]
		}
	}
	return out
}

// target is the request's URL: the URL's own, with /what appended and rid added to the
// query (a slug URL's ?create=1 is kept).
func (p *Pinger) target(what string) string {
	u := *p.u
	if what != "" {
		u = *u.JoinPath(what)
	}
	q := u.Query()
	if p.rid != "" {
		q.Set("rid", p.rid)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
