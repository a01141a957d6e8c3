package cmd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPingKeySlug: {key} goes into the ping URL as a Healthchecks slug (a-z 0-9 - _):
// wrap's keys hold dots, and a slug URL with a dot answers 404. The key itself, in the
// history and the lock, stays as it was.
func TestPingKeySlug(t *testing.T) {
	c := newCLI(t, "")
	hc := newHC(t)
	conf := filepath.Join(c.dir, "cronlock.conf")
	if err := os.WriteFile(conf, []byte("CRONLOCK_PING_URL="+hc.url()+"/{key}?create=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, "CRONLOCK_CONFIG="+conf)
	for key, slug := range map[string]string{
		"gc.sh-9cda6ff8":           "gc-sh-9cda6ff8",
		"Team/DB@night":            "team-db-night",
		"a..b:-c_d":                "a-b-c_d",
		"nightly-etl":              "nightly-etl",
		"run-parts.cron.daily-0a1": "run-parts-cron-daily-0a1",
	} {
		if code, _, errs := c.run("run", "-k", key, "--", "true"); code != 0 {
			t.Fatalf("%s: exit %d, %s", key, code, errs)
		}
		rows := c.history(key)
		if len(rows) != 1 {
			t.Fatalf("key %q: %d history rows; want 1 under the key as given", key, len(rows))
		}
		got := hc.got()
		wantPings(t, got[len(got)-2:], rows[0].ID, "/"+slug+"/start", "/"+slug)
	}
}
