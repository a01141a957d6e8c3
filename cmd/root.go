// Package cmd is cronlock's command line: each command turns its flags into an options
// struct and calls one plain function. Main owns the mapping from errors to exit codes.
//
// The package knows flags, configuration and output; locks and children live in lockrun,
// the run history in history.
package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
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

// ExitUsage is the exit code of a command-line mistake: 125 for run (README, "Exit codes
// and statuses"), and every other command uses the same so scripts have one code to test.
const ExitUsage = 125

// Main runs cronlock with os.Args and returns the process exit code.
func Main() int {
	return Execute(os.Args[1:], os.Stdout, os.Stderr)
}

// Execute runs the command line args and returns the exit code; messages go to stderr.
func Execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	format := root.PersistentFlags().Lookup("log-format").Value.String()
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			say(stderr, format, levelError, ee.Msg)
		}
		return ee.Code
	}
	// One line, the hint included: cron mails stderr, and scripts read its first line.
	var ue *usageError
	if errors.As(err, &ue) {
		name := strings.TrimSpace("cronlock " + commandName(root, args))
		say(stderr, format, levelError, fmt.Sprintf("%s (see '%s --help')", err, name))
	} else {
		say(stderr, format, levelError, err.Error())
	}
	return ExitUsage
}

// commandName finds which subcommand args name, for the usage hint.
func commandName(root *cobra.Command, args []string) string {
	c, _, err := root.Find(args)
	if err != nil || c == root {
		return ""
	}
	return strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
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
	}
	var logFormat string
	addLogFormatFlag(root, &logFormat)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		newRunCmd(stdout, stderr),
		newHistoryCmd(stdout, stderr),
		newStatusCmd(stdout, stderr),
		newUnlockCmd(stdout, stderr),
		newVersionCmd(stdout),
	)
	root.CompletionOptions.HiddenDefaultCmd = false
	return root
}
