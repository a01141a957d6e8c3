package redis

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// redisTarget is a parsed --redis URL.
type redisTarget struct {
	scheme   string // redis, rediss or unix
	network  string // tcp or unix
	addr     string // host:port, or the socket path
	host     string // for TLS server name checks
	username string
	password string
	db       int

	// Sentinel and Cluster (redisurlha.go): every seed address, and the master's name.
	addrs  []string // Sentinels, or Cluster nodes; addr is then the first of them
	master string   // the name Sentinel knows the master by
}

// parseRedisURL understands redis://[user:pass@]host[:port][/db], rediss://… (TLS) and
// unix://[user:pass@]/path[?db=N]. It is stricter than go-redis's ParseURL on purpose: that
// one accepts query options (timeouts, retries, pool size) that would silently override the
// lock-safe settings, and its errors can quote the whole URL, password included. Errors
// from this function never contain the password.
func parseRedisURL(raw string) (redisTarget, error) {
	var t redisTarget
	bad := func(format string, a ...any) error {
		return fmt.Errorf("invalid Redis URL %q: %s (want redis://[user:pass@]host:port/db, rediss://…, unix:///path, redis-sentinel://h1:26379,h2:26379/MASTER or redis-cluster://h1:6379,h2:6379; check --redis / CRONLOCK_REDIS_URL)",
			redactURL(raw), fmt.Sprintf(format, a...))
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
	t.scheme = u.Scheme
	// An "@" outside the user info means a password with an unescaped "/", "?" or "#"
	// (redis://u:pa#ss@h): url.Parse took part of it for the host, path, query or
	// fragment. Refuse it before any message can quote one of those parts.
	if userInfoMisread(raw) {
		return t, bad(`the part before the last "@" is not user:password@host; write "/", "?", "#" and "@" in a password as %%2F, %%3F, %%23 and %%40`)
	}
	if u.User != nil {
		t.username = u.User.Username()
		t.password, _ = u.User.Password()
	}
	q := u.Query()
	for name := range q {
		if name != "db" {
			return t, bad("unknown parameter %q (time-outs and retries come from --redis-timeout, not the URL)", name)
		}
	}
	switch u.Scheme {
	case "redis", "rediss":
		t.network = "tcp"
		t.host = u.Hostname()
		if t.host == "" {
			return t, bad("it names no host")
		}
		port := u.Port()
		if port == "" {
			port = "6379"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return t, bad("the port %q is not a number from 1 to 65535", port)
		}
		t.addr = net.JoinHostPort(t.host, port)
		switch path := strings.Trim(u.Path, "/"); {
		case path != "" && q.Has("db"):
			return t, bad("the database is given twice, in the path and in ?db=")
		case path != "":
			if t.db, err = parseDB(path); err != nil {
				return t, bad("%v", err)
			}
		}
	case "unix":
		t.network = "unix"
		t.addr = u.Path
		if t.addr == "" || !strings.HasPrefix(t.addr, "/") {
			return t, bad("it names no absolute socket path (unix:///run/redis/redis.sock)")
		}
	case "":
		return t, bad("it has no scheme")
	case schemeSentinel, schemeCluster:
		return t, bad("it has no \"//\" after %q", u.Scheme+":") // haScheme took it otherwise
	default:
		return t, bad("the scheme %q is not redis, rediss, unix, redis-sentinel or redis-cluster", u.Scheme)
	}
	if q.Has("db") {
		if t.db, err = parseDB(q.Get("db")); err != nil {
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

// tlsConfig is the TLS setting of a rediss:// target (nil otherwise): the server's
// certificate is checked against the system roots and the URL's host name.
func (t redisTarget) tlsConfig() *tls.Config {
	if t.scheme != "rediss" {
		return nil
	}
	return &tls.Config{ServerName: t.host, MinVersion: tls.VersionTLS12}
}

// describe names the target for people, without any secret:
// "redis 127.0.0.1:6379/0", "rediss redis.example.com:6380/2", "redis unix:/run/redis.sock/0".
func (t redisTarget) describe() string {
	if t.addrs != nil {
		return t.describeHA()
	}
	where := t.addr
	if t.network == "unix" {
		where = "unix:" + t.addr
	}
	return fmt.Sprintf("%s %s/%d", t.schemeWord(), where, t.db)
}

// server names the server in error messages: "redis 127.0.0.1:6379".
func (t redisTarget) server() string {
	if t.addrs != nil {
		return t.serverHA()
	}
	if t.network == "unix" {
		return t.schemeWord() + " unix:" + t.addr
	}
	return t.schemeWord() + " " + t.addr
}

func (t redisTarget) schemeWord() string {
	if t.scheme == "rediss" {
		return "rediss"
	}
	return "redis"
}

// redactURL returns raw with any password replaced by "xxxxx", for messages and history
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
func redactURL(raw string) string {
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
// redactURL reads it: a password that redactURL would hide.
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
