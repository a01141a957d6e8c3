package jobrun

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"cronlock/checkpoint"
	"cronlock/settings"
)

// TestChildEnvNames: the names the job gets are exactly settings.JobNames, which a
// nested run accepts; an inherited one this run has no value for is dropped.
func TestChildEnvNames(t *testing.T) {
	t.Setenv(settings.JobScheduledFor, "2020-01-01T00:00:00Z")  // an outer run's tick
	t.Setenv(settings.JobCheckpointSocket, "/outer/run/socket") // and its socket
	srv, err := checkpoint.Listen(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ck := &ckptRun{srv: srv}
	for _, tick := range []time.Time{{}, time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)} {
		env := ck.forTry(childEnv(&Options{Key: "k", Node: "n"}, "rid", 7, "redis", tick, 1, 1, ""), 1)
		var got []string
		for _, kv := range env {
			name, v, _ := strings.Cut(kv, "=")
			if _, inherited := os.LookupEnv(name); inherited && !slices.Contains(settings.JobNames, name) {
				continue // the test's own environment (CRONLOCK_TEST_REDIS_ADDR…)
			}
			if strings.HasPrefix(name, "CRONLOCK_") {
				if name == settings.JobScheduledFor && v == "2020-01-01T00:00:00Z" ||
					name == settings.JobCheckpointSocket && v != srv.Path() {
					t.Fatalf("the outer run's %s was passed on", name)
				}
				got = append(got, name)
			}
		}
		want := slices.Clone(settings.JobNames)
		// No takeover here: CRONLOCK_TAKEOVER_OF is left out, as the tick's two are without one.
		want = slices.DeleteFunc(want, func(n string) bool { return n == settings.JobTakeoverOf })
		if tick.IsZero() {
			want = slices.DeleteFunc(want, func(n string) bool { return n == settings.JobScheduledFor || n == settings.JobTickAttempt })
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("tick %v: the job gets %v; want %v (settings.JobNames)", tick, got, want)
		}
	}
}
