package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"cronlock/internal/redistest"
)

// TestStatusListsSuspensions: status without --key lists every suspended key (who, until,
// why), held or not, in its text and in --json, on Redis and on the local backend; a
// resumed key leaves the list.
func TestStatusListsSuspensions(t *testing.T) {
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			url := ""
			if backend == "redis" {
				url = "redis://" + redistest.Addr(t) + "/0"
			}
			c := newCLI(t, url)
			c.env = append(c.env, "CRONLOCK_BACKEND="+backend)
			if code, _, errs := c.run("suspend", "-k", "billing", "--for", "1h", "--reason", "db upgrade"); code != 0 {
				t.Fatalf("suspend billing: exit %d (%s)", code, errs)
			}
			code, out, errs := c.run("status")
			if code != 0 || !strings.Contains(out, "no locks are held") || !strings.Contains(out, "billing is suspended by ") ||
				!strings.Contains(out, " until ") || !strings.Contains(out, "db upgrade") {
				t.Fatalf("status, nothing held: exit %d, %q (%s); want the suspension of billing with who, until and why", code, out, errs)
			}

			run, errb, let := c.startHolding([]string{"run", "-k", "report"})
			if code, _, errs := c.run("suspend", "-k", "report"); code != 0 {
				t.Fatalf("suspend report: exit %d (%s)", code, errs)
			}
			code, out, errs = c.run("status")
			if code != 0 || !strings.Contains(out, "locks held on") || !strings.Contains(out, "billing is suspended by ") ||
				!strings.Contains(out, "report is suspended by ") {
				t.Errorf("status, report held: exit %d, %q (%s); want the table and both suspensions", code, out, errs)
			}
			code, out, errs = c.run("status", "--json")
			type line struct {
				Key        string
				Node       string
				Suspension *struct{ By, Reason, Until string }
			}
			var lines []line
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var v line
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("status --json: %q: %v", l, err)
				}
				lines = append(lines, v)
			}
			if code != 0 || len(lines) != 2 || lines[0].Key != "billing" || lines[0].Node != "" || lines[0].Suspension == nil ||
				lines[0].Suspension.Reason != "db upgrade" || lines[0].Suspension.Until == "" || !strings.Contains(lines[0].Suspension.By, "@") ||
				lines[1].Key != "report" || lines[1].Node != "clinode" || lines[1].Suspension == nil || lines[1].Suspension.Until != "" {
				t.Errorf("status --json: exit %d, %s (%s); want billing (suspended, not held) then report (held, suspended)", code, out, errs)
			}
			let()
			if err := run.Wait(); err != nil {
				t.Fatalf("the held run: %v (%s)", err, errb)
			}

			if code, _, errs := c.run("resume", "-k", "billing"); code != 0 {
				t.Fatalf("resume billing: exit %d (%s)", code, errs)
			}
			code, out, errs = c.run("status")
			if code != 0 || strings.Contains(out, "billing") || !strings.Contains(out, "report is suspended by ") {
				t.Errorf("status after resume of billing: exit %d, %q (%s); want only report's suspension", code, out, errs)
			}
		})
	}
}
