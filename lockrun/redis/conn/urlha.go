package conn

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The high-availability URL forms:
//
//	redis-sentinel://[user:pass@]h1:26379,h2:26379/MASTER[/db]
//	redis-cluster://[user:pass@]h1:6379,h2:6379[,…]
//
// user:pass is the data servers' (as in redis://); the Sentinels' own password comes from
// Options.SentinelPassword. TLS forms (rediss-sentinel, rediss-cluster) are refused:
// every node would need its own certificate name checked, and nothing tests that yet.

const (
	SchemeSentinel = "redis-sentinel"
	SchemeCluster  = "redis-cluster"
)

// haScheme returns the Sentinel or Cluster scheme raw starts with (TLS variants
// included, so that they get their own refusal), or "".
func haScheme(raw string) string {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	switch s := strings.ToLower(scheme); s {
	case SchemeSentinel, SchemeCluster, "rediss-sentinel", "rediss-cluster":
		return s
	}
	return ""
}

// parseHAURL parses a redis-sentinel:// or redis-cluster:// URL. The host list is cut
// out before url.Parse sees the rest, which refuses lists with IPv6 literals.
func parseHAURL(raw string) (Target, error) {
	var t Target
	scheme := haScheme(raw)
	form := "redis-sentinel://[user:pass@]h1:26379,h2:26379/MASTER[/db]"
	defPort := "26379"
	if strings.HasSuffix(scheme, "cluster") {
		form, defPort = "redis-cluster://[user:pass@]h1:6379,h2:6379", "6379"
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("invalid Redis URL %q: %s (want %s; check --redis / CRONLOCK_REDIS_URL)",
			RedactURL(raw), fmt.Sprintf(format, a...), form)
	}
	if strings.HasPrefix(scheme, "rediss-") {
		return t, bad("TLS is not supported with Sentinel or Cluster yet; use %s:// on a private network, or rediss:// to one server", "redis-"+strings.TrimPrefix(scheme, "rediss-"))
	}
	start := strings.Index(raw, "://") + 3
	if at := strings.LastIndex(raw, "@"); at >= start {
		start = at + 1
	}
	end := len(raw)
	if i := strings.IndexAny(raw[start:], "/?#"); i >= 0 {
		end = start + i
	}
	hosts, rest := raw[start:end], raw[:start]+"h"+raw[end:]
	if userInfoMisread(rest) {
		return t, bad(`the part before the last "@" is not user:password@host; write "/", "?", "#" and "@" in a password as %%2F, %%3F, %%23 and %%40`)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return t, bad("it does not parse as a URL")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return t, bad("it has a query or fragment; time-outs and retries come from --redis-timeout, not the URL")
	}
	t.Scheme, t.Network = scheme, "tcp"
	if u.User != nil {
		t.Username = u.User.Username()
		t.Password, _ = u.User.Password()
	}
	if hosts == "" {
		return t, bad("it names no host")
	}
	seen := map[string]bool{}
	for _, h := range strings.Split(hosts, ",") {
		addr, err := splitHostPort(h, defPort)
		if err != nil {
			return t, bad("%v", err)
		}
		if !seen[addr] {
			seen[addr] = true
			t.Addrs = append(t.Addrs, addr)
		}
	}
	t.Addr = t.Addrs[0]
	t.Host, _, _ = net.SplitHostPort(t.Addr)
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if scheme == SchemeCluster {
		if u.Path != "" && u.Path != "/" {
			return t, bad("a cluster has database 0 only, so the URL takes no path")
		}
		return t, nil
	}
	if parts[0] == "" {
		return t, bad("it names no master: add /MASTER, the name the Sentinels monitor it by (sentinel monitor MASTER …)")
	}
	if len(parts) > 2 {
		return t, bad("the path %q has more than /MASTER/db", u.Path)
	}
	t.Master = parts[0]
	if len(parts) == 2 {
		if t.DB, err = parseDB(parts[1]); err != nil {
			return t, bad("%v", err)
		}
	}
	return t, nil
}

// splitHostPort reads one "host[:port]" or "[v6][:port]" of a host list.
func splitHostPort(h, defPort string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("the host list has an empty entry")
	}
	host, port := h, defPort
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			host = strings.Trim(h, "[]")
		} else {
			var err error
			if host, port, err = net.SplitHostPort(h); err != nil {
				return "", fmt.Errorf("the host %q is not host:port", h)
			}
		}
	}
	if host == "" {
		return "", fmt.Errorf("the entry %q names no host", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("the port %q of %q is not a number from 1 to 65535", port, h)
	}
	return net.JoinHostPort(host, port), nil
}

// describeHA names a Sentinel or Cluster target for people, without any secret:
// "redis-sentinel 10.0.0.1:26379,10.0.0.2:26379/mymaster/0", "redis-cluster 10.0.0.1:6379,10.0.0.2:6379".
func (t Target) describeHA() string {
	if t.Scheme == SchemeCluster {
		return t.serverHA()
	}
	return fmt.Sprintf("%s/%d", t.serverHA(), t.DB)
}

// serverHA names a Sentinel or Cluster target in error messages.
func (t Target) serverHA() string {
	s := t.Scheme + " " + strings.Join(t.Addrs, ",")
	if t.Master != "" {
		s += "/" + t.Master
	}
	return s
}
