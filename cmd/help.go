package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagGroup is a heading of run's --help and the flags listed under it.
type flagGroup struct {
	title string
	names []string
}

// runFlagGroups orders run's 40-odd flags by what a reader looks for; a flag in no group
// would be listed under "Other flags" (TestRunHelpGroupsEveryFlag keeps that list empty).
var runFlagGroups = []flagGroup{
	{"Lock", []string{"key", "ttl", "wait", "jitter", "min-hold", "on-lock-lost", "conflict-exit-code", "stale-after", "node"}},
	{"Schedule (once per tick across the fleet)", []string{"schedule", "tz", "start-deadline", "max-skew", "standby", "standbys", "max-attempts"}},
	{"Supervision", []string{"timeout", "heartbeat-timeout", "grace", "retries", "retry-delay", "retry-on"}},
	{"Output and reporting", []string{"output", "output-max", "ping", "metrics-dir", "quiet", "verbose"}},
	{"History", []string{"history", "capture"}},
	{"Backend", []string{"backend", "redis", "redis-password-file", "redis-timeout", "min-replicas", "allow-eviction", "prefix",
		"etcd", "etcd-user", "etcd-password-file", "etcd-ca-file", "etcd-cert-file", "etcd-key-file", "lock-dir"}},
	{"Help", []string{"help"}},
}

// groupFlags makes c's --help list its own flags under the headings of groups. It is
// cobra's default usage written out in Go with the flags grouped, for a command without
// subcommands or aliases: a usage template would bring text/template back into the
// binary, and its reflection keeps every method of every type (12 MB more).
func groupFlags(c *cobra.Command, groups []flagGroup) {
	c.SetUsageFunc(func(c *cobra.Command) error {
		w := c.OutOrStderr()
		fmt.Fprintf(w, "Usage:\n  %s", c.UseLine())
		if c.HasExample() {
			fmt.Fprintf(w, "\n\nExamples:\n%s", c.Example)
		}
		fmt.Fprint(w, groupedFlagUsages(c, groups))
		if c.HasAvailableInheritedFlags() {
			fmt.Fprintf(w, "\n\nGlobal Flags:\n%s", strings.TrimRight(c.InheritedFlags().FlagUsages(), " \t\n"))
		}
		fmt.Fprintln(w)
		return nil
	})
}

// groupedFlagUsages is c's local flags under their groups' headings, then the others.
func groupedFlagUsages(c *cobra.Command, groups []flagGroup) string {
	var b strings.Builder
	local := c.LocalFlags()
	listed := map[string]bool{}
	section := func(title string, fs *pflag.FlagSet) {
		if fs.HasAvailableFlags() {
			fmt.Fprintf(&b, "\n\n%s:\n%s", title, strings.TrimRight(fs.FlagUsages(), " \n"))
		}
	}
	for _, g := range groups {
		fs := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		fs.SortFlags = false // the group's own order: the flag most often wanted first
		for _, n := range g.names {
			if f := local.Lookup(n); f != nil {
				fs.AddFlag(f)
				listed[n] = true
			}
		}
		section(g.title, fs)
	}
	rest := pflag.NewFlagSet("other", pflag.ContinueOnError)
	local.VisitAll(func(f *pflag.Flag) {
		if !listed[f.Name] {
			rest.AddFlag(f)
		}
	})
	section("Other flags", rest)
	return b.String()
}

// examples are the Examples of each command's --help, by its path after "cronlock"; a
// command that sets its own keeps it.
var examples = map[string]string{
	"": `  cronlock run --key daily-billing --schedule '0 9 * * *' -- /opt/jobs/billing.sh
  cronlock history --key daily-billing
  cronlock check --key daily-billing --schedule '0 9 * * *'`,
	"check": `  cronlock check --key daily-billing --schedule '0 9 * * *'
  cronlock check --key cleanup --max-age 2h --json`,
	"checkpoint": `  cronlock checkpoint save "$LAST_ID"         (inside a job run by cronlock run)
  cronlock checkpoint show --key daily-billing`,
	"checkpoint save": `  cronlock checkpoint save "invoice 1041"
  printf '%s' "$state" | cronlock checkpoint save -`,
	"checkpoint load": `  last=$(cronlock checkpoint load) || last=
  cronlock checkpoint load --last-success`,
	"checkpoint show":  `  cronlock checkpoint show --key daily-billing --json`,
	"checkpoint reset": `  cronlock checkpoint reset --key daily-billing`,
	"config": `  cronlock config
  cronlock config --json`,
	"config check": `  cronlock config check`,
	"crontab": `  crontab -l | cronlock crontab lint
  cronlock crontab wrap /etc/cron.d/billing --write`,
	"crontab wrap": `  crontab -l | cronlock crontab wrap
  cronlock crontab wrap /etc/cron.d/billing --write --backup-dir /root/cron-backup`,
	"crontab lint": `  cronlock crontab lint /etc/cron.d/billing
  crontab -l | cronlock crontab lint -`,
	"history": `  cronlock history --key daily-billing --since 7d
  cronlock history --fleet --status failed --json`,
	"history show":  `  cronlock history show 01a2355`,
	"history stats": `  cronlock history stats --key daily-billing --since 30d`,
	"status": `  cronlock status
  cronlock status --key daily-billing --json`,
	"unlock": `  cronlock unlock --key daily-billing
  cronlock unlock --key daily-billing --force`,
	"version": `  cronlock version`,
	"resume":  `  cronlock resume --key daily-billing`,
	"suspend": `  cronlock suspend --key daily-billing --for 12h --reason "no billing during the migration"
  cronlock suspend --key daily-billing --until '2026-12-24 08:00'`,
	"schedule": `  cronlock schedule '30 2 * * *' --tz Europe/Berlin --from 2026-03-28
  cronlock schedule 'CRON_TZ=America/New_York 0 9 * * 1-5' --next 10 --json`,
	"report": `  cronlock report --html /tmp/runs.html
  cronlock report --html /var/www/cron/week.html --fleet --since 7d --key daily-billing`,
	"completion": `  cronlock completion bash > /etc/bash_completion.d/cronlock
  cronlock completion zsh > "${fpath[1]}/_cronlock"`,
	"completion bash":       `  cronlock completion bash > /etc/bash_completion.d/cronlock`,
	"completion zsh":        `  cronlock completion zsh > "${fpath[1]}/_cronlock"`,
	"completion fish":       `  cronlock completion fish > ~/.config/fish/completions/cronlock.fish`,
	"completion powershell": `  cronlock completion powershell | Out-String | Invoke-Expression`,
}

// addExamples gives every command under root without Examples its entry of examples.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = examples[strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")]
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
