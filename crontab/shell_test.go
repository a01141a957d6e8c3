package crontab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runAsCron runs a crontab line's command part as cron does: what comes before the
// first unescaped %, with \% made %, handed to `SHELL -c`, in the env of the line.
func runAsCron(t *testing.T, l *Line, dir string) string {
	t.Helper()
	cmd, pct := CronCommand(l.Command)
	if pct {
		t.Fatalf("line %d has an unescaped %%", l.Num)
	}
	c := exec.Command("/bin/sh", "-c", cmd)
	c.Dir = dir
	c.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/home/cronuser"}, l.Env...)
	out, err := c.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
		out = append(out, "[exit "+err.Error()+"]"...)
	}
	return string(out)
}

// TestWrappedLineRunsTheSameCommand wraps lines full of shell syntax and runs both, as
// cron would, through /bin/sh; a stand-in cronlock runs what follows its --. The output
// must be the same byte for byte.
func TestWrappedLineRunsTheSameCommand(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "cronlock")
	// Everything up to -- is cronlock's; the rest is the command, run as it is.
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f1.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := `GREETING = "hello world"
SHELL=/bin/sh
* * * * * echo "$GREETING" | tr a-z A-Z
* * * * * true && echo and; false || echo or ; echo semi
* * * * * echo 'single $HOME' "double $HOME" \$HOME plain$HOME
* * * * * echo 'it'"'"'s' "it's" it\'s
* * * * * echo a\\b 'c\d' "e\\f" "g\h"
* * * * * echo "50\% off" 100\%; date +\%Y | wc -c
* * * * * echo	tab	"in	quotes"   many   spaces
* * * * * cat *.txt | sort -r; echo $((6*7)) $(echo sub) ` + "`echo back`" + `
* * * * * (cd / && pwd); { echo group; } 2>&1; echo "$0" | grep -c sh
* * * * * x=1; for i in 1 2; do echo $x$i; done; test -n "$SHELL" && echo "$SHELL"
* * * * * printf '\%s|' a b "c d"; echo; exit 3
`
	lines := Parse(text, false)
	out, notes := Wrap(lines, Options{Cronlock: fake})
	if len(notes) > 0 {
		t.Fatalf("notes: %v", notes)
	}
	wrapped := Parse(strings.Join(out, "\n")+"\n", false)
	n := 0
	for i := range lines {
		if lines[i].Kind != Job {
			continue
		}
		n++
		if wrapped[i].Kind != Wrapped {
			t.Fatalf("line %d was not wrapped: %s", lines[i].Num, out[i])
		}
		want := runAsCron(t, &lines[i], dir)
		got := runAsCron(t, &wrapped[i], dir)
		if got != want {
			t.Errorf("line %d: %s\nwrapped: %s\nthe original printed %q\nthe wrapped line printed %q", lines[i].Num, lines[i].Text, out[i], want, got)
		}
		if want == "" {
			t.Errorf("line %d printed nothing: the test proves nothing", lines[i].Num)
		}
	}
	if n != 11 {
		t.Fatalf("%d job lines, want 11", n)
	}
}

func TestCronCommand(t *testing.T) {
	for _, c := range []struct {
		in, want string
		pct      bool
	}{
		{`date +\%F`, `date +%F`, false},
		{`date +%F`, `date +`, true},
		{`a\\%b`, `a\\`, true},
		{`a\b\%`, `a\b%`, false},
		{`end\`, `end\`, false},
	} {
		got, pct := CronCommand(c.in)
		if got != c.want || pct != c.pct {
			t.Errorf("CronCommand(%q) = %q, %v; want %q, %v", c.in, got, pct, c.want, c.pct)
		}
	}
}

func TestKey(t *testing.T) {
	key := func(text string, system bool) string {
		ls := Parse(text, system)
		return Key(ls[len(ls)-1].User, &ls[len(ls)-1])
	}
	base := key("0 9 * * * /opt/jobs/billing.sh --all\n", false)
	if base != key("0 9  * * *   /opt/jobs/billing.sh   --all\n", false) {
		t.Errorf("blank runs change the key")
	}
	if base != key("MAILTO=ops@example.com\n0 9 * * * /opt/jobs/billing.sh --all\n", false) {
		t.Errorf("MAILTO changes the key")
	}
	for _, other := range []string{
		key("A=1\n0 9 * * * /opt/jobs/billing.sh --all\n", false),
		key("0 9 * * * /opt/jobs/billing.sh --some\n", false),
		key("0 9 * * * root /opt/jobs/billing.sh --all\n", true),
		key("0 9 * * * www-data /opt/jobs/billing.sh --all\n", true),
		Key("alice", &Parse("0 9 * * * /opt/jobs/billing.sh --all\n", false)[0]),
	} {
		if other == base {
			t.Errorf("%s: another env, command or user gives the same key", other)
		}
	}
	if !strings.HasPrefix(base, "billing.sh-") || len(base) != len("billing.sh-")+8 {
		t.Errorf("key %q: want billing.sh- and 8 hex digits", base)
	}
}

// TestBackendChoice: system files get --backend local unless the caller asks for the
// fleet; user files only when asked.
func TestBackendChoice(t *testing.T) {
	for _, c := range []struct {
		text          string
		system, local bool
		want          bool
	}{
		{"0 1 * * * root /opt/x\n", true, true, true},
		{"0 1 * * * root /opt/x\n", true, false, false},
		{"0 1 * * * /opt/x\n", false, false, false},
		{"0 1 * * * /opt/x\n", false, true, true},
	} {
		out, _ := Wrap(Parse(c.text, c.system), Options{Cronlock: "/c/cronlock", System: c.system, Local: c.local})
		if got := strings.Contains(out[0], " --backend local "); got != c.want {
			t.Errorf("system %v local %v: %s", c.system, c.local, out[0])
		}
	}
}
