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

// A line that already runs `cronlock run` after a prefix (cd, env, nice -n, exec, a
// NAME=value) is under cronlock too: wrapping it would put a second lock, under a key of
// wrap's, around the line's own, and lint must not ask for that. A line that only names
// cronlock as an argument is wrapped.
func TestWrapLeavesPrefixedCronlock(t *testing.T) {
	o := Options{Cronlock: "/usr/local/bin/cronlock", User: "alice"}
	for _, cmd := range []string{
		"cd /opt && cronlock run --key b -- ./x",
		"env TZ=UTC /usr/bin/cronlock run --key a -- true",
		"nice -n 10 /usr/local/bin/cronlock run --key c -- true",
		"exec /usr/bin/cronlock run --key e -- true",
		"FOO=1 cronlock run --key f -- /opt/f >/dev/null 2>&1",
		"/opt/prep.sh; sudo -u app /usr/bin/cronlock run --key g -- /opt/g",
	} {
		text := "5 4 * * * " + cmd + "\n"
		if got, notes := wrapText(text, o); got != text || notes != "" {
			t.Errorf("%q: wrapped into %q%s", cmd, got, notes)
		}
		if lint := lintText(text, o); strings.Contains(lint, "not under cronlock") {
			t.Errorf("%q: lint asks to wrap it: %s", cmd, lint)
		}
	}
	text := "5 4 * * * echo cronlock run is great\n"
	if got, _ := wrapText(text, o); !strings.Contains(got, o.Cronlock+" run --key ") {
		t.Errorf("a line that only names cronlock was not wrapped: %q", got)
	}
}
