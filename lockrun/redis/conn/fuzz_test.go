package conn

// Fuzz targets for the Redis URL parser and its redaction. Without -fuzz they run their
// seeds (f.Add and testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzRedisURLPassword$' -fuzztime 60s ./lockrun/redis/conn/

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"cronlock/internal/fuzzcheck"
)

// FuzzParseRedisURL: whatever the input, ParseURL and RedactURL do not panic; a
// password that url.Parse finds never shows in RedactURL's output, in the error, or in
// describe/server; an accepted URL has a network, an address and a database ≥ 0.
func FuzzParseRedisURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379/0", "redis://localhost", "redis://u:p%40ss@h:7000/3",
		"redis://:pw@[::1]:6380?db=4", "rediss://redis.example.com:6380/1",
		"unix:///run/redis/redis.sock?db=2", "unix://u:pw@/run/r.sock", "", "localhost:6379",
		"http://h", "redis://:s3cretPW@h:notaport", "redis://:s3cretPW@h/x",
		"redis://:s3cretPW@h?dial_timeout=10s", "unix://", "redis://:s3cret%zzPW@h",
		"redis://h:0", "redis://h:65536", "redis://h/1?db=2", "redis://h/-1", "redis://[::1",
		"redis://u:pa#ss@h", "redis://u:/pw@h", "redis://u:?pw@h", "redis://:#pw@h:6379",
		"redis:u:pw@h", "redis:/u:pw@h", "//u:pw@h", "redis://u:p@ss@h", "REDIS://H",
		"redis://h:+1", "redis://h?db=+3", "redis://h?db=1&db=2", "redis://%zz",
		"unix:///run/redis@1.sock", "unix:///run/a:b@c.sock", "redis://u:p//w@h", "redis:u:p//w@h",
		"redis-sentinel://u:s3cretPW@s1:26379,[::1]:5/m/2", "redis-cluster://:s3cretPW@n1,n2:7000",
		"redis-sentinel://:s3cret#PW@s1/m", "redis-cluster://:s3cretPW@n1/ma@ster", "rediss-cluster://:pw@h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		red := RedactURL(raw)
		tg, err := ParseURL(raw)
		// The password as url.Parse finds it, decoded; others is raw without it; mraw is
		// raw with the password (as written) in sameShape.
		var pw, others, mraw string
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			pw, _ = u.User.Password()
			others, mraw = raw, raw
			if i := strings.Index(raw, "//"); i >= 0 {
				auth := raw[i+2:]
				if j := strings.IndexAny(auth, "/?#"); j >= 0 {
					auth = auth[:j]
				}
				if at := strings.LastIndex(auth, "@"); at >= 0 {
					others = raw[:i+2] + auth[at:] + raw[i+2+len(auth):]
					if c := strings.Index(auth[:at], ":"); c >= 0 {
						mraw = raw[:i+2+c+1] + sameShape(auth[c+1:at]) + raw[i+2+at:]
					}
				}
			}
		}
		if mu, perr := url.Parse(mraw); secretLike(pw, others) && perr == nil && mu.User != nil {
			p := pw
			mpw, _ := mu.User.Password()
			mmsg, mdesc, msrv := told(mraw)
			if mpw != pw && secretLike(mpw, others) {
				if shows(red, RedactURL(mraw), p) {
					t.Fatalf("RedactURL(%q) = %q shows the password %q", raw, red, p)
				}
				if err != nil && shows(err.Error(), mmsg, p) {
					t.Fatalf("ParseURL(%q) error shows the password %q: %v", raw, p, err)
				}
				if err == nil && (shows(tg.Describe(), mdesc, p) || shows(tg.Server(), msrv, p)) {
					t.Fatalf("ParseURL(%q) describes itself with the password %q: %s", raw, p, tg.Describe())
				}
			}
		}
		// Any socket path (printable, no "?", "#" or "%", no ":" before an "@") is accepted
		// as it is: an "@" in it is not taken for a password.
		if path, ok := strings.CutPrefix(raw, "unix://"); ok && strings.HasPrefix(path, "/") &&
			!strings.ContainsAny(path, "?#%") && !fuzzcheck.HasControl(path) &&
			!(strings.Contains(path, "@") && strings.Contains(path[:strings.LastIndex(path, "@")], ":")) &&
			(err != nil || tg.Addr != path) {
			t.Fatalf("ParseURL(%q) = %+v, %v", raw, tg, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseURL(%q): empty error", raw)
			}
			return
		}
		if tg.DB < 0 || tg.Addr == "" || (tg.Network != "tcp" && tg.Network != "unix") {
			t.Fatalf("ParseURL(%q) = %+v", raw, tg)
		}
		if tg.Network == "tcp" {
			if _, port, serr := netSplit(tg.Addr); serr != nil || port < 1 || port > 65535 {
				t.Fatalf("ParseURL(%q): address %q", raw, tg.Addr)
			}
		}
	})
}

// FuzzRedisURLPassword writes a URL the way people do, scheme://user:PASSWORD@rest,
// with the password as typed (not percent-encoded: "#", "/", "?" and "@" included). Then
// RedactURL, every error of ParseURL and the description of an accepted URL must
// not show the password, whether or not the URL is valid.
func FuzzRedisURLPassword(f *testing.F) {
	for _, s := range [][4]string{
		{"redis", "user", "s3cretPW", "h:6379/0"},
		{"redis", "", "s3cretPW", "h"},
		{"rediss", "default", "p@ss#w0rd", "redis.example.com:6380"},
		{"redis", "u", "#secret", "h:6379"},
		{"redis", "u", "/secret", "h:6379/0"},
		{"redis", "u", "?secret", "h"},
		{"redis", "", "12#secret", "h"},
		{"redis", "u", "6379/secret", "h"},
		{"redis", "u", "s3cret%zz", "h"},
		{"unix", "", "s3cretPW", "/run/redis.sock"},
		{"redis", "u", "a b c d", "h"},
		{"redis", "u:v", "s3cretPW", "h"},
		{"redis-sentinel", "u", "s3cret/PW", "s1:26379,s2/m/1"},
		{"redis-cluster", "", "s3cret?PW", "[::1]:7000,n2"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		raw := scheme + "://" + user + ":" + pass + "@" + rest
		// The same URL with a password of the same shape: its messages have the same
		// fixed text, so only an echoed password makes pass show more often in raw's.
		marker := sameShape(pass)
		mraw := scheme + "://" + user + ":" + marker + "@" + rest
		others := scheme + "://" + user + ":@" + rest
		if marker == pass || !secretLike(pass, others) || !secretLike(marker, others) || strings.Contains(scheme, ":") {
			return
		}
		if red := RedactURL(raw); shows(red, RedactURL(mraw), pass) {
			t.Fatalf("RedactURL(%q) = %q shows the password %q", raw, red, pass)
		}
		tg, err := ParseURL(raw)
		mmsg, mdesc, msrv := told(mraw)
		if err != nil {
			if shows(err.Error(), mmsg, pass) {
				t.Fatalf("ParseURL(%q) error shows the password %q: %v", raw, pass, err)
			}
			return
		}
		if shows(tg.Describe(), mdesc, pass) || shows(tg.Server(), msrv, pass) {
			t.Fatalf("ParseURL(%q) describes itself with the password %q: %s", raw, pass, tg.Describe())
		}
	})
}

// secretLike reports whether p can be told apart in any output: long enough, and in
// none of the other parts of the URL (others), raw, percent-decoded, percent-encoded or
// quoted (else finding it would prove nothing). The fixed text of the messages is
// shows' business.
func secretLike(p, others string) bool {
	if len(p) < 4 {
		return false
	}
	// Messages quote the URL with %q, whose escapes (\U0010b58f) make digits of their own.
	forms := []string{others, url.PathEscape(others), url.QueryEscape(others), strconv.Quote(others),
		strconv.Quote(RedactURL(others))}
	for _, dec := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
		if d, err := dec(others); err == nil {
			forms = append(forms, d)
		}
	}
	for _, o := range forms {
		if strings.Contains(o, p) {
			return false
		}
	}
	return true
}

// sameShape returns p with each ASCII letter and digit replaced by another of its kind
// (a hex digit by a hex digit, so a %-escape stays valid or invalid), every other byte
// kept: a URL with it in place of p parses the same way and gets messages with the same
// fixed text. A p without letters or digits comes back unchanged.
func sameShape(p string) string {
	b := []byte(p)
	for i, c := range b {
		switch {
		case '0' <= c && c <= '9':
			b[i] = '0' + (c-'0'+1)%10
		case 'a' <= c && c <= 'f':
			b[i] = 'a' + (c-'a'+1)%6
		case 'A' <= c && c <= 'F':
			b[i] = 'A' + (c-'A'+1)%6
		case 'g' <= c && c <= 'z':
			b[i] = 'g' + (c-'g'+1)%20
		case 'G' <= c && c <= 'Z':
			b[i] = 'G' + (c-'G'+1)%20
		}
	}
	return string(b)
}

// shows reports whether out shows the password p: more often than mout, the same output
// for the URL whose password is sameShape(p). Help text that happens to contain p
// (redis-sentinel://h1:26379,h2:26379/MASTER holds "379/") is in both; an echoed
// password only in out.
func shows(out, mout, p string) bool {
	return strings.Count(out, p) > strings.Count(mout, p)
}

// told returns what ParseURL(raw) lets cronlock print: its error, else the
// description and server of the URL it accepted ("" for what it has not).
func told(raw string) (msg, desc, srv string) {
	tg, err := ParseURL(raw)
	if err != nil {
		return err.Error(), "", ""
	}
	return "", tg.Describe(), tg.Server()
}

func netSplit(addr string) (string, int, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", 0, strconv.ErrSyntax
	}
	n, err := strconv.Atoi(addr[i+1:])
	return addr[:i], n, err
}
