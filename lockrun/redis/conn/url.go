package conn

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Target is a parsed --redis URL. It holds the password in clear: never print it;
// Describe and Server name the target without it.
type Target struct {
	Scheme   string // redis, rediss, unix, redis-sentinel or redis-cluster
	Network  string // tcp or unix
	Addr     string // host:port, or the socket path
	Host     string // for TLS server name checks
	Username string
	Password string
	DB       int

	// Sentinel and Cluster (urlha.go): every seed address, and the master's name.
	Addrs  []string // Sentinels, or Cluster nodes; Addr is then the first of them
	Master string   // the name Sentinel knows the master by
}

// ParseURL understands redis://[user:pass@]host[:port][/db], rediss://… (TLS) and
// unix://[user:pass@]/path[?db=N]. It is stricter than go-redis's ParseURL on purpose: that
// one accepts query options (timeouts, retries, pool size) that would silently override the
// lock-safe settings, and its errors can quote the whole URL, password included. Errors
// from this function never contain the password.
func ParseURL(raw string) (Target, error) {
	var t Target
	bad := func(format string, a ...any) error {
		return fmt.Errorf("invalid Redis URL %q: %s (want redis://[user:pass@]host:port/db, rediss://…, unix:///path, redis-sentinel://h1:26379,h2:26379/MASTER or redis-cluster://h1:6379,h2:6379; check --redis / CRONLOCK_REDIS_URL)",
			RedactURL(raw), fmt.Sprintf(format, a...))
	}
	if strings.TrimSpace(raw) == "" {
		return t, fmt.Errorf("no Redis URL given: set --redis or CRONLOCK_REDIS_URL")
	}
	if haScheme(raw) != "" {
		return parseHAURL(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's own message quotes the raw URL, password and all: leave it out.
		return t, bad("it does not parse as a URL")
	}
	t.Scheme = u.Scheme
	// An "@" outside the user info means a password with an unescaped "/", "?" or "#"
	// (redis://u:pa#ss@h): url.Parse took part of it for the host, path, query or
	// fragment. Refuse it before any message can quote one of those parts.
	if userInfoMisread(raw) {
		return t, bad(`the part before the last "@" is not user:password@host; write "/", "?", "#" and "@" in a password as %%2F, %%3F, %%23 and %%40`)
	}
	if u.User != nil {
		t.Username = u.User.Username()
		t.Password, _ = u.User.Password()
	}
	q := u.Query()
	for name := range q {
		if name != "db" {
			return t, bad("unknown parameter %q (time-outs and retries come from --redis-timeout, not the URL)", name)
		}
	}
	switch u.Scheme {
	case "redis", "rediss":
		t.Network = "tcp"
		t.Host = u.Hostname()
		if t.Host == "" {
			return t, bad("it names no host")
		}
		port := u.Port()
		if port == "" {
			port = "6379"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return t, bad("the port %q is not a number from 1 to 65535", port)
		}
		t.Addr = net.JoinHostPort(t.Host, port)
		switch path := strings.Trim(u.Path, "/"); {
		case path != "" && q.Has("db"):
			return t, bad("the database is given twice, in the path and in ?db=")
		case path != "":
			if t.DB, err = parseDB(path); err != nil {
				return t, bad("%v", err)
			}
		}
	case "unix":
		t.Network = "unix"
		t.Addr = u.Path
		if t.Addr == "" || !strings.HasPrefix(t.Addr, "/") {
			return t, bad("it names no absolute socket path (unix:///run/redis/redis.sock)")
		}
	case "":
		return t, bad("it has no scheme")
	case SchemeSentinel, SchemeCluster:
		return t, bad("it has no \"//\" after %q", u.Scheme+":") // haScheme took it otherwise
	default:
		return t, bad("the scheme %q is not redis, rediss, unix, redis-sentinel or redis-cluster", u.Scheme)
	}
	if q.Has("db") {
		if t.DB, err = parseDB(q.Get("db")); err != nil {
			return t, bad("%v", err)
		}
	}
	return t, nil
}

func parseDB(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("the database %q is not a number from 0 up", s)
	}
	return n, nil
}

// TLSConfig is the TLS setting of a rediss:// target (nil otherwise): the server's
// certificate is checked against the system roots and the URL's host name.
func (t Target) TLSConfig() *tls.Config {
	if t.Scheme != "rediss" {
		return nil
	}
	return &tls.Config{ServerName: t.Host, MinVersion: tls.VersionTLS12}
}

// Describe names the target for people, without any secret:
// "redis 127.0.0.1:6379/0", "rediss redis.example.com:6380/2", "redis unix:/run/redis.sock/0".
func (t Target) Describe() string {
	if t.Addrs != nil {
		return t.describeHA()
	}
	where := t.Addr
	if t.Network == "unix" {
		where = "unix:" + t.Addr
	}
	return fmt.Sprintf("%s %s/%d", t.schemeWord(), where, t.DB)
}

// Server names the server in error messages: "redis 127.0.0.1:6379".
func (t Target) Server() string {
	if t.Addrs != nil {
		return t.serverHA()
	}
	if t.Network == "unix" {
		return t.schemeWord() + " unix:" + t.Addr
	}
	return t.schemeWord() + " " + t.Addr
}

func (t Target) schemeWord() string {
	if t.Scheme == "rediss" {
		return "rediss"
	}
	return "redis"
}

// RedactURL returns raw with any password replaced by "xxxxx", for messages and history
// rows. It works on the URL's structure, never by searching for the password's text.
// Everything between the first ":" after "scheme://" and the last "@" counts as the
// password whenever url.Parse would not find that whole part as the URL's user info: a
// URL that does not parse (a password is most often what makes a URL unparseable), and
// one whose password holds an unescaped "/", "?" or "#", which url.Parse reads as the
// start of the path, query or fragment (redis://u:pa#ss@h), leaving the password in
// plain sight.
//
// A user name that holds the password (redis://secret:secret@h) is hidden as well:
// showing it would show the password.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && !userInfoMisread(raw) {
		if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(u.User.Username(), pw) {
			v := *u
			v.User = url.UserPassword("xxxxx", "xxxxx")
			return v.String()
		}
		return u.Redacted()
	}
	colon, at := rawUserinfo(raw)
	if colon < 0 {
		return raw // no user info, or a user name only: no password to hide
	}
	start := strings.Index(raw, "//") + 2
	if pw := raw[colon+1 : at]; start >= 2 && start <= colon && pw != "" && strings.Contains(raw[start:colon], pw) {
		return raw[:start] + "xxxxx:xxxxx" + raw[at:]
	}
	return raw[:colon+1] + "xxxxx" + raw[at:]
}

// URLHasPassword reports whether raw carries a password in its user info, read the way
// RedactURL reads it: a password that RedactURL would hide.
func URLHasPassword(raw string) bool {
	u, err := url.Parse(raw)
	if err == nil && !userInfoMisread(raw) {
		if u.User == nil {
			return false
		}
		_, ok := u.User.Password()
		return ok
	}
	colon, _ := rawUserinfo(raw)
	return colon >= 0
}

// rawUserinfo finds the user info of a URL that url.Parse cannot be trusted with: it
// starts after "scheme://" and ends at the last "@" (at); colon is the first ":" in it,
// where the password begins, or -1 when there is no user info or no password.
func rawUserinfo(raw string) (colon, at int) {
	at = strings.LastIndex(raw, "@")
	if at < 0 {
		return -1, -1
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + 3
	}
	c := strings.Index(raw[start:at], ":")
	if c < 0 {
		return -1, at
	}
	return start + c, at
}

// userInfoMisread reports whether raw has an "@" that url.Parse does not read as the end
// of the user info after "scheme://", or "//": a password with an unescaped "/", "?" or
// "#" (redis://u:pa#ss@h), or an "@" with no "://" before it (redis:u:pw@h). An "@" in
// a path that follows "://" at once (unix:///run/redis@1.sock) is not user info, unless
// a ":" comes before it (unix:///:pw@/run/redis.sock; a ":" there in a real socket path
// is written %3A).
func userInfoMisread(raw string) bool {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return false
	}
	i := strings.Index(raw, "//")
	if i < 0 || i+2 > at {
		return true
	}
	if raw[i+2] == '/' && !strings.Contains(raw[i+2:at], ":") {
		return false // scheme:/// starts a path, and no "user:password" precedes the "@"
	}
	u, err := url.Parse(raw)
	return err != nil || u.User == nil || strings.ContainsAny(raw[i+2:at], "/?#")
}
