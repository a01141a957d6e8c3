package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckEnv: which CRONLOCK_ variables of the environment are refused, and what the
// one line about each says.
func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string // "" = accepted; else a part of the only error
	}{
		{"CRONLOCK_REDIS_URL=redis://h/0", ""},
		{"CRONLOCK_CONFIG=/etc/x.conf", ""},
		{"CRONLOCK_KEY=billing", ""}, // a nested run inherits the job's names
		{"CRONLOCK_RUN_ID=0190", ""},
		{"CRONLOCK_TRY=2", ""},
		{"CRONLOCK_FENCING_TOKEN=17", ""},
		{"CRONLOCK_TOKEN_BACKEND=redis", ""},
		{"CRONLOCK_SCHEDULED_FOR=2025-01-01T09:00:00Z", ""},
		{"CRONLOCK_NODE=web1", ""},
		{"CRONLOCK_TEST_CLOCK_OFFSET=1h", ""},
		{"CRONLOCKX=1", ""}, // not CRONLOCK_-prefixed
		{"CRONLOCK=/usr/bin/cronlock", ""},
		{"XCRONLOCK_REDIS_ULR=1", ""},
		{"CRONLOCK_REDIS_ULR=redis://:s3cret@h/0", "unknown environment variable CRONLOCK_REDIS_ULR (did you mean CRONLOCK_REDIS_URL?)"},
		{"CRONLOCK_REDIS_URI=redis://h/0", "did you mean CRONLOCK_REDIS_URL?"},
		{"CRONLOCK_Redis_Url=redis://h/0", "did you mean CRONLOCK_REDIS_URL?"},
		{"CRONLOCK_TT=5s", "did you mean CRONLOCK_TTL?"},
		{"CRONLOCK_HISTORY_RETENTON=30d", "did you mean CRONLOCK_HISTORY_RETENTION?"},
		{"CRONLOCK_BAKEND=redis", "did you mean CRONLOCK_BACKEND?"},
		{"CRONLOCK_REDIS_URL_=x", "did you mean CRONLOCK_REDIS_URL?"},
		{"CRONLOCK_LOCKDIR=/x", "did you mean CRONLOCK_LOCK_DIR?"},
		{"CRONLOCK_REDIS_URL_FILE=/x", "unknown environment variable CRONLOCK_REDIS_URL_FILE; unset it"},
		{"CRONLOCK_SCHEDULE=* * * * *", "unknown environment variable CRONLOCK_SCHEDULE; unset it"},
		{"CRONLOCK_WAIT=5m", "unknown environment variable CRONLOCK_WAIT; unset it"},
		{"CRONLOCK_=1", "unknown environment variable CRONLOCK_"},
		{"CRONLOCK_HOST=redis.internal", "kvz/cronlock, another tool; write CRONLOCK_REDIS_URL=redis://HOST:PORT/0 instead"},
		{"CRONLOCK_PORT=6379", "write CRONLOCK_REDIS_URL=redis://HOST:PORT/0 instead"},
		{"CRONLOCK_GRACE=40", "write --min-hold 40s"},
		{"CRONLOCK_RELEASE=86400", "write CRONLOCK_TTL=60s"},
		{"CRONLOCK_TIMEOUT=60", "write --timeout"},
		{"CRONLOCK_VERBOSE=yes", "write --verbose"},
		{"CRONLOCK_RESET=yes", "cronlock unlock --key KEY"},
		{"CRONLOCK_NTPDATE=yes", "NTP"},
		{"CRONLOCK_USE_SENTINEL=yes", "redis-sentinel://"},
		{"CRONLOCK_SENTINEL_MASTER=mymaster", "redis-sentinel://HOST:26379/MASTER"},
		{"CRONLOCK_RECONNECT_BACKOFF=5", "CRONLOCK_REDIS_TIMEOUT"},
	} {
		errs := CheckEnv([]string{"PATH=/usr/bin:/bin", tc.env})
		switch {
		case tc.want == "" && len(errs) != 0:
			t.Errorf("%s: refused: %v", tc.env, errs)
		case tc.want != "" && len(errs) != 1:
			t.Errorf("%s: %d errors %v; want one", tc.env, len(errs), errs)
		case tc.want != "" && !strings.Contains(errs[0].Error(), tc.want):
			t.Errorf("%s: %q; want it to hold %q", tc.env, errs[0], tc.want)
		case tc.want != "" && (strings.Contains(errs[0].Error(), "s3cret") || strings.Contains(errs[0].Error(), "\n")):
			t.Errorf("%s: %q quotes the value or is not one line", tc.env, errs[0])
		}
	}
}

// TestCheckEnvAll: every unknown variable gets its own line, in name order.
func TestCheckEnvAll(t *testing.T) {
	errs := CheckEnv([]string{"CRONLOCK_ZZ=1", "CRONLOCK_TTL=5s", "CRONLOCK_HOST=h", "CRONLOCK_REDIS_ULR=x"})
	if len(errs) != 3 || !strings.Contains(errs[0].Error(), "CRONLOCK_HOST") || !strings.Contains(errs[2].Error(), "CRONLOCK_ZZ") {
		t.Fatalf("%v", errs)
	}
}

// TestNearest: a name is only suggested when it is close for its length.
func TestNearest(t *testing.T) {
	for name, want := range map[string]string{
		"CRONLOCK_REDIS_ULR": "CRONLOCK_REDIS_URL",
		"cronlock_ttl":       "CRONLOCK_TTL",
		"CRONLOCK_REDIS":     "",
		"CRONLOCK_X":         "",
		"CRONLOCK_NODES":     "CRONLOCK_NODE",
		"CRONLOCK_JITER":     "CRONLOCK_JITTER",
	} {
		if got := Nearest(name); got != want {
			t.Errorf("Nearest(%s) = %q, want %q", name, got, want)
		}
	}
}

// TestLoadOrigins: the file, then the environment; each value says where it came from,
// and the environment's typos come after the file's settings were read.
func TestLoadOrigins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.conf")
	os.WriteFile(path, []byte("# x\nCRONLOCK_TTL=30s\nCRONLOCK_BACKEND=redis\n"), 0o644)
	s, errs := LoadAll([]string{ConfigVar + "=" + path, "CRONLOCK_TTL=5s", "CRONLOCK_PREFIX=", "CRONLOCK_HOTS=x"})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "CRONLOCK_HOTS") {
		t.Fatalf("errors %v", errs)
	}
	if s.Values["CRONLOCK_TTL"] != "5s" || s.Origins["CRONLOCK_TTL"].String() != "env" || s.Where("CRONLOCK_TTL") != "environment variable CRONLOCK_TTL" {
		t.Errorf("TTL %q from %v", s.Values["CRONLOCK_TTL"], s.Origins["CRONLOCK_TTL"])
	}
	if o := s.Origins["CRONLOCK_BACKEND"]; o.String() != "file:"+path+":3" || s.Where("CRONLOCK_BACKEND") != path+" line 3" {
		t.Errorf("BACKEND from %v", o)
	}
	if _, ok := s.Values["CRONLOCK_PREFIX"]; ok {
		t.Error("an empty variable counts as set")
	}
	if _, err := Load([]string{ConfigVar + "=" + path, "CRONLOCK_HOTS=x"}); err == nil {
		t.Error("Load accepted an unknown variable")
	}
}
