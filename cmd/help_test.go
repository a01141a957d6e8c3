package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestRunHelpGroupsEveryFlag: run's --help lists each of its flags under a heading of its
// group, none under "Other flags" (a new flag must be given a group), and in a build
// without etcd no etcd flag.
func TestRunHelpGroupsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := Execute([]string{"run", "--help"}, &out, &out); code != 0 {
		t.Fatalf("run --help: exit %d: %s", code, out.String())
	}
	help := out.String()
	for _, g := range runFlagGroups {
		if g.title != "Help" && !strings.Contains(help, "\n"+g.title+":\n") {
			t.Errorf("no heading %q in run --help", g.title)
		}
	}
	if strings.Contains(help, "Other flags:") {
		t.Errorf("run --help lists flags of no group:\n%s", help[strings.Index(help, "Other flags:"):])
	}
	if strings.Contains(help, "--etcd") != etcdBuilt {
		t.Errorf("etcd flags shown: %v, in a build with etcd: %v", strings.Contains(help, "--etcd"), etcdBuilt)
	}
	if !strings.Contains(help, "(default 60s)") || strings.Contains(help, "1m0s") || strings.Contains(help, "(default 0s)") {
		t.Errorf("durations not as written (want --ttl's default 60s, no 1m0s, no default 0s):\n%s", help)
	}
}

// TestEveryCommandHasExamples: each command's --help shows examples.
func TestEveryCommandHasExamples(t *testing.T) {
	var out bytes.Buffer
	root := newRootCmd(&out, &out)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.Hidden && c.Name() != "help" && c.Name() != "__complete" && c.Name() != "__completeNoDesc" {
			if strings.TrimSpace(c.Example) == "" {
				t.Errorf("%q has no examples in its --help", c.CommandPath())
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// TestNoHelpTemplates: no command sets a usage or help template. A template brings
// text/template into the binary, whose reflection keeps every method of every type: 12 MB
// more (groupFlags writes run's usage in Go instead).
func TestNoHelpTemplates(t *testing.T) {
	var out bytes.Buffer
	root := newRootCmd(&out, &out)
	plain := &cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.UsageTemplate() != plain.UsageTemplate() || c.HelpTemplate() != plain.HelpTemplate() {
			t.Errorf("%q sets a usage or help template", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

func TestCommandOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-k", "x", "--", "true"}, "run"},
		{[]string{"-v", "history", "show", "x"}, "history"},
		{[]string{"--log-format", "json", "run"}, ""}, // a flag's value first: the whole tree
		{[]string{"runn"}, ""},
		{[]string{"help", "run"}, ""},
		{[]string{"completion", "bash"}, ""},
		{[]string{"--", "run"}, ""},
		{nil, ""},
	} {
		if got := commandOf(tc.args); got != tc.want {
			t.Errorf("commandOf(%q) = %q; want %q", tc.args, got, tc.want)
		}
	}
}
