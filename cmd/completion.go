package cmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"cronlock/logline"
	"cronlock/runstatus"
)

// completionShells are the shells `cronlock completion` writes a script for (cobra's).
var completionShells = []string{"bash", "zsh", "fish", "powershell"}

// setUpCompletion makes cobra's `completion` command refuse what it does not know: by
// itself it prints its help and exits 0 for `completion bogus` (or no shell at all), so
// `cronlock completion bsah > /etc/bash_completion.d/cronlock` would install a help text
// and succeed. It also teaches the shells the values of the flags that take a fixed set.
func setUpCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args = func(c *cobra.Command, args []string) error {
			shells := strings.Join(completionShells[:len(completionShells)-1], ", ") + " or " + completionShells[len(completionShells)-1]
			if len(args) == 0 {
				return &usageError{fmt.Errorf("name the shell: %s, e.g. cronlock completion bash > /etc/bash_completion.d/cronlock", shells)}
			}
			return &usageError{fmt.Errorf("unknown shell %q: use %s", args[0], shells)}
		}
		// Only a runnable command gets its Args checked; with a shell named, cobra runs
		// that shell's subcommand instead.
		c.RunE = func(c *cobra.Command, args []string) error { return nil }
	}
	enums := map[string][]string{
		"backend":      backends(),
		"on-lock-lost": {"kill\tstop the job, exit 125", "continue\twarn and let the job finish"},
		"status":       runstatus.All,
		"format":       {"auto\tby the path: system for /etc/crontab and /etc/cron.d/*", "user", "system\ta user field after the schedule"},
		"cron-daemon":  {"debian\tignores CRON_TZ", "cronie\thonours CRON_TZ"},
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, values := range enums {
			if c.LocalNonPersistentFlags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
				// Errors only for a flag that is missing or registered twice: neither here.
				_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions(
		[]string{logline.Text + "\tcronlock: … lines", logline.JSON + "\tone JSON object per line"}, cobra.ShellCompDirectiveNoFileComp))
}

// subcommandArgs refuses an argument of a command that takes only subcommands, with the
// nearest subcommand names. cobra suggests names only for the root's own subcommands and
// only when the root has no Args: `cronlock history sho` got no "did you mean".
func subcommandArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(quoteAll(s), " or ") + "?"
	}
	return &usageError{errors.New(msg)}
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return q
}

// backends are the values of --backend this build can run: etcd only in the etcd build.
func backends() []string {
	if etcdBuilt {
		return []string{"auto\tredis when a Redis URL is set, etcd when etcd endpoints are, else local", "redis", "etcd", "local"}
	}
	return []string{"auto\tredis when a Redis URL is set, else local", "redis", "local"}
}
