package crontab

import (
	"strings"
	"testing"
)

// wrap writes the path of the cronlock that runs it (or --cronlock), which need not end
// in /cronlock: its own output must still come back unchanged, never wrapped twice.
func TestWrapOwnPathIsWrapped(t *testing.T) {
	for _, system := range []bool{false, true} {
		o := Options{Cronlock: "/opt/cronlock-2.1/bin/cronlock-2.1", System: system, User: "alice"}
		text := "*/5 * * * * echo \"hello world\" >> /tmp/out\n"
		if system {
			text = "*/5 * * * * root echo \"hello world\" >> /tmp/out\n"
		}
		once, _ := wrapText(text, o)
		if !strings.Contains(once, o.Cronlock+" run --key ") {
			t.Fatalf("system %v: first wrap gave %q", system, once)
		}
		if twice, notes := wrapText(once, o); twice != once || notes != "" {
			t.Errorf("system %v: wrapping wrap's own output changed it:\n%s\ninto\n%s%s", system, once, twice, notes)
		}
		if lint := lintText(once, o); lint != "" {
			t.Errorf("system %v: lint of wrap's own output: %s", system, lint)
		}
	}
}
