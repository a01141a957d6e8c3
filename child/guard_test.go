package child

import (
	"os"
	"strings"
	"testing"
)

// TestGuardStartErrorIsTold: with neither /bin/sh nor cronlock's own binary to run, the
// guard's first Arm tells OnStartError why, once, and the guard has no process.
func TestGuardStartErrorIsTold(t *testing.T) {
	shell, self := guardShell, guardSelf
	t.Cleanup(func() { guardShell, guardSelf = shell, self })
	guardShell, guardSelf = "/nonexistent/sh", "/nonexistent/cronlock"
	g, err := StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	var told []error
	g.OnStartError(func(err error) { told = append(told, err) })
	if err := g.Arm(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if pid := g.PID(); pid != 0 {
		t.Fatalf("PID %d; want 0, no guard process", pid)
	}
	g.Done()
	if len(told) != 1 || !strings.Contains(told[0].Error(), "/nonexistent/cronlock") {
		t.Fatalf("told %v; want one error naming the binary that could not be run", told)
	}
}

func TestParseTargets(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"123 456 789", 3}, {"123", 1}, {"", 0}, {"1 2", 0}, {"-5", 0}, {"12 x", 0}, {"0", 0}} {
		if got := parseTargets(tc.in); len(got) != tc.want {
			t.Errorf("parseTargets(%q) = %v; want %d targets", tc.in, got, tc.want)
		}
	}
}
