package cmd

import (
	"strings"
	"testing"

	"cronlock/internal/redistest"
)

// TestAutoRefusesRedisAndEtcd: with both a Redis URL and etcd endpoints set, auto cannot
// tell which one the fleet locks on; it refuses in one line rather than guess.
func TestAutoRefusesRedisAndEtcd(t *testing.T) {
	c := newCLI(t, "redis://127.0.0.1:1/0")
	c.env = append(c.env, "CRONLOCK_ETCD_ENDPOINTS=http://127.0.0.1:1")
	code, _, errs := c.run("run", "-k", "both", "--", "true")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "CRONLOCK_ETCD_ENDPOINTS") {
		t.Fatalf("exit %d, stderr %q; want 125 and one line naming both settings", code, errs)
	}
	if code, _, errs := c.run("run", "--backend", "redis", "-k", "both", "--redis-timeout", "200ms", "--", "true"); code != 125 || strings.Contains(errs, "auto cannot tell") {
		t.Fatalf("--backend redis with both set: exit %d, stderr %q; want 125 for the unreachable Redis, not the refusal", code, errs)
	}
}

// TestTokenBackendNamed: the job learns which backend issued its fencing token, since
// tokens of two backends do not compare.
func TestTokenBackendNamed(t *testing.T) {
	c := newCLI(t, "redis://"+redistest.Addr(t)+"/0")
	for _, backend := range []string{"local", "redis"} {
		code, out, errs := c.run("run", "--backend", backend, "--capture", "0", "-k", "tb", "--", "sh", "-c", "echo $CRONLOCK_TOKEN_BACKEND")
		if code != 0 || out != backend+"\n" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want CRONLOCK_TOKEN_BACKEND=%s", backend, code, out, errs, backend)
		}
	}
}
