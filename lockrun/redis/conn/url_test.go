package conn

import (
	"strings"
	"testing"
)

func TestRedisURLParsing(t *testing.T) {
	for _, tc := range []struct {
		url, describe, network, addr, user, pass string
		db                                       int
		tls                                      bool
	}{
		{"redis://127.0.0.1:6379/0", "redis 127.0.0.1:6379/0", "tcp", "127.0.0.1:6379", "", "", 0, false},
		{"redis://localhost", "redis localhost:6379/0", "tcp", "localhost:6379", "", "", 0, false},
		{"redis://u:p%40ss@h:7000/3", "redis h:7000/3", "tcp", "h:7000", "u", "p@ss", 3, false},
		{"redis://:pw@[::1]:6380?db=4", "redis [::1]:6380/4", "tcp", "[::1]:6380", "", "pw", 4, false},
		{"rediss://redis.example.com:6380/1", "rediss redis.example.com:6380/1", "tcp", "redis.example.com:6380", "", "", 1, true},
		{"unix:///run/redis/redis.sock?db=2", "redis unix:/run/redis/redis.sock/2", "unix", "/run/redis/redis.sock", "", "", 2, false},
	} {
		tg, err := ParseURL(tc.url)
		if err != nil {
			t.Errorf("parse %q: %v", tc.url, err)
			continue
		}
		if tg.Describe() != tc.describe || tg.Network != tc.network || tg.Addr != tc.addr ||
			tg.Username != tc.user || tg.Password != tc.pass || tg.DB != tc.db || (tg.TLSConfig() != nil) != tc.tls {
			t.Errorf("parse %q = %+v (%s)", tc.url, tg, tg.Describe())
		}
	}
	for _, bad := range []string{
		"", "localhost:6379", "http://h", "redis://:s3cretPW@h:notaport",
		"redis://:s3cretPW@h/x", "redis://:s3cretPW@h?dial_timeout=10s", "unix://", "redis://:s3cret%zzPW@h",
	} {
		_, err := ParseURL(bad)
		if err == nil {
			t.Errorf("ParseURL(%q) accepted it", bad)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error for %q shows the password: %v", bad, err)
		}
	}
}

func TestRedisRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://h:6379/0":              "redis://h:6379/0",
		"redis://:s3cret@h:6379/0":      "redis://:xxxxx@h:6379/0",
		"redis://user:s3cret@h/1":       "redis://user:xxxxx@h/1",
		"rediss://user:s%3Acret@h":      "rediss://user:xxxxx@h",
		"redis://user:s3c%zzret@h:6379": "redis://user:xxxxx@h:6379",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedisURLHasPassword(t *testing.T) {
	for in, want := range map[string]bool{
		"redis://h:6379/0":                 false,
		"redis://user@h:6379/0":            false,
		"redis://:1@h":                     true,
		"redis://u:@h":                     true,
		"redis://u:pa#ss@h":                true,
		"redis://u:p@ss@h":                 true,
		"redis://xxxxx.example.com:6379/0": false,
		"unix:///run/redis@1.sock":         false,
		"unix://:pw@/run/redis.sock":       true,
	} {
		if got := URLHasPassword(in); got != want {
			t.Errorf("URLHasPassword(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestHAURLParsing(t *testing.T) {
	for _, tc := range []struct {
		url, describe, master string
		addrs                 []string
		user, pass            string
		db                    int
	}{
		{"redis-sentinel://s1:26379,s2:26380/mymaster", "redis-sentinel s1:26379,s2:26380/mymaster/0", "mymaster", []string{"s1:26379", "s2:26380"}, "", "", 0},
		{"redis-sentinel://u:p%40ss@s1,[::1]:5000/m/3", "redis-sentinel s1:26379,[::1]:5000/m/3", "m", []string{"s1:26379", "[::1]:5000"}, "u", "p@ss", 3},
		{"redis-cluster://n1:7000,n2,n3:7002", "redis-cluster n1:7000,n2:6379,n3:7002", "", []string{"n1:7000", "n2:6379", "n3:7002"}, "", "", 0},
		{"redis-cluster://:secret@n1:7000/", "redis-cluster n1:7000", "", []string{"n1:7000"}, "", "secret", 0},
	} {
		tg, err := ParseURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if tg.Describe() != tc.describe || tg.Master != tc.master || strings.Join(tg.Addrs, " ") != strings.Join(tc.addrs, " ") ||
			tg.Username != tc.user || tg.Password != tc.pass || tg.DB != tc.db {
			t.Errorf("%s: got %+v (describe %q)", tc.url, tg, tg.Describe())
		}
		if strings.Contains(tg.Describe(), "secret") || strings.Contains(tg.Describe(), "p@ss") {
			t.Errorf("%s: describe shows the password: %q", tc.url, tg.Describe())
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"redis-sentinel://s1:26379", "it names no master"},
		{"redis-sentinel://s1:26379/m/1/2", "more than /MASTER/db"},
		{"redis-sentinel://s1:26379/m/x", `the database "x"`},
		{"redis-sentinel://s1:99999/m", `the port "99999"`},
		{"redis-sentinel://s1:26379,,s2/m", "empty entry"},
		{"redis-sentinel:///m", "names no host"},
		{"redis-cluster://n1:7000/2", "database 0 only"},
		{"redis-cluster://n1:7000?timeout=1s", "query"},
		{"rediss-cluster://:secret@n1:7000", "TLS is not supported"},
		{"redis-cluster://u:pa#ss@n1", `not user:password@host`},
	} {
		_, err := ParseURL(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pa#ss") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: the message shows the password or spans lines: %q", tc.url, err)
		}
	}
}
