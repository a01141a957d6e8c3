// Package cmd is cronlock's command line: each command turns its flags into an options
// struct and calls one plain function. Main owns the mapping from errors to exit codes.
//
// The package knows flags, the configuration file and how results are shown to people
// and scripts; a run's steps live in jobrun, locks and children in lockrun, the run
// history in history.
package cmd

import (
	"cronlock/child"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"cronlock/jobrun"
	"cronlock/logline"
	conf "cronlock/settings"
)

// ExitError ends a command with a given exit code. Msg, when not empty, is printed on
// stderr as one "cronlock: …" line.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// exitf returns an ExitError with a formatted message.
func exitf(code int, format string, args ...any) *ExitError {
	return &ExitError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// usageError marks a mistake in the command line (exit 125); its message gets a pointer
// to the command's --help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// ExitFailed is the exit code of every failure of cronlock itself (a command-line
// mistake, a bad setting, an unreachable backend), in every command: run's own code
// for "cronlock failed", so that scripts have one code to test.
const ExitFailed = jobrun.ExitFailed

// Main runs cronlock with os.Args and returns the process exit code.
func Main() int {
	if child.IsGuard(os.Args) {
		return child.RunGuard()
	}
	return Execute(os.Args[1:], os.Stdout, os.Stderr)
}

// Execute runs the command line args and returns the exit code; messages go to stderr.
func Execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmdFor(commandOf(args), stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	format := errorFormat(root, args)
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			logline.Print(stderr, format, logline.Error, ee.Msg)
		}
		return ee.Code
	}
	// One line, the hint included: cron mails stderr, and scripts read its first line.
	var ue *usageError
	if errors.As(err, &ue) {
		name := strings.TrimSpace("cronlock " + commandName(root, args))
		logline.Print(stderr, format, logline.Error, fmt.Sprintf("%s (see '%s --help')", err, name))
	} else {
		logline.Print(stderr, format, logline.Error, err.Error())
	}
	return ExitFailed
}

// errorFormat is the --log-format of the final error line. When cobra fails before the
// command runs (an unknown command, a misspelled flag), neither the flag nor
// CRONLOCK_LOG_FORMAT has been resolved yet (resolveLogFormat): the flag is then looked
// for in args, then in the environment and the config file. A bad value, or a config
// file that cannot be read, leaves text.
func errorFormat(root *cobra.Command, args []string) string {
	f := root.PersistentFlags().Lookup("log-format")
	if f.Changed || f.Value.String() == logline.JSON {
		return f.Value.String()
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		v, ok := strings.CutPrefix(a, "--log-format=")
		if !ok && a == "--log-format" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			if v == logline.JSON {
				return v
			}
			return logline.Text
		}
	}
	// An unknown variable beside it must not turn the line that reports it into text.
	if s, _ := conf.LoadAll(os.Environ()); s != nil && s.Values["CRONLOCK_LOG_FORMAT"] == logline.JSON {
		return logline.JSON
	}
	return logline.Text
}

// commandName finds which subcommand args name, for the usage hint.
func commandName(root *cobra.Command, args []string) string {
	c, _, err := root.Find(args)
	if err != nil || c == root {
		return ""
	}
	return strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
}

// commands makes each of cronlock's commands, in the order of cronlock --help.
var commands = []struct {
	name string
	make func(stdout, stderr io.Writer) *cobra.Command
}{
	{"run", newRunCmd},
	{"history", newHistoryCmd},
	{"status", newStatusCmd},
	{"jobs", newJobsCmd},
	{"check", newCheckCmd},
	{"crontab", newCrontabCmd},
	{"unlock", newUnlockCmd},
	{"suspend", func(stdout, _ io.Writer) *cobra.Command { return newSuspendCmd(stdout) }},
	{"resume", func(stdout, _ io.Writer) *cobra.Command { return newResumeCmd(stdout) }},
	{"checkpoint", newCheckpointCmd},
	{"report", newReportCmd},
	{"config", newConfigCmd},
	{"schedule", func(stdout, _ io.Writer) *cobra.Command { return newScheduleCmd(stdout) }},
	{"version", func(stdout, _ io.Writer) *cobra.Command { return newVersionCmd(stdout) }},
}

// commandOf is the command args run when their first word names one of commands, else
// "" (no command, a global flag first, help, completion, or a typo: the whole tree is
// needed to answer those).
func commandOf(args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		for _, m := range commands {
			if m.name == a {
				return a
			}
		}
		return ""
	}
	return ""
}

// newRootCmd is cronlock's whole command tree.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command { return newRootCmdFor("", stdout, stderr) }

// newRootCmdFor is the command tree with only the command only under the root ("" = all):
// a cron run builds its own command's flags and not a dozen others' (0.6 ms of every run).
func newRootCmdFor(only string, stdout, stderr io.Writer) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "cronlock",
		Short: "Run cron jobs under a fleet-wide lock, with a history of every run",
		Long: `cronlock runs a command while holding a lock, so that the same crontab line on many
machines runs the job once at a time. Locks live in Redis (for a fleet) or in a kernel
file lock (one machine); every run is recorded in a local SQLite history.

  0 9 * * * /usr/local/bin/cronlock run --key daily-billing -- /opt/jobs/billing.sh`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(c *cobra.Command, args []string) error {
			return resolveLogFormat(c)
		},
		// Runnable so that Args is checked: an unknown command is a usage error with a
		// suggestion on one line, and --version has somewhere to be answered.
		Args: subcommandArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if showVersion {
				_, err := fmt.Fprintln(stdout, versionString())
				return err
			}
			return c.Help()
		},
	}
	var logFormat string
	addLogFormatFlag(root, &logFormat)
	// Not cobra's Version field: that would read the build info in every process, and
	// add -v, which is --verbose under run.
	root.Flags().BoolVar(&showVersion, "version", false, "print cronlock's version (as cronlock version)")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{plainNumberError(err)} })
	for _, m := range commands {
		if only == "" || m.name == only {
			root.AddCommand(m.make(stdout, stderr))
		}
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	setUpCompletion(root)
	addExamples(root)
	return root
}
