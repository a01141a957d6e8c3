package cmd

import (
	"fmt"

	"github.com/spf13/pflag"

	"cronlock/tty"
)

// Output modes of --output.
const (
	outputAlways    = "always"
	outputOnFailure = "on-failure"
)

// maxOutputMax bounds --output-max: the spool is on disk, but a limit of more than a
// terabyte is a typo, not a plan.
const maxOutputMax = 1 << 40

// outputValue is --output: always or on-failure.
type outputValue struct{ s *string }

func (v outputValue) String() string { return *v.s }
func (v outputValue) Type() string   { return "mode" }
func (v outputValue) Set(s string) error {
	switch s {
	case outputAlways, outputOnFailure:
		*v.s = s
		return nil
	}
	return fmt.Errorf("%q is not an output mode; use always (print as it comes) or on-failure (print only when the run does not succeed)", s)
}

// addOutputFlags adds --output and --output-max to run's flags.
func (o *runOptions) addOutputFlags(f *pflag.FlagSet) {
	o.Output = outputAlways
	o.job.OutputMax = 1 << 30
	f.Var(outputValue{&o.Output}, "output", "always: print the job's output as it comes; on-failure: hold it on disk and print it only when the run does not succeed, as chronic does (env CRONLOCK_OUTPUT)")
	f.Var(sizeValue{n: &o.job.OutputMax, limit: maxOutputMax, positive: true}, "output-max", "with --output on-failure, bytes of each stream held in full; beyond that the first and last halves are kept")
}

// resolveOutput decides whether the run holds its output: on-failure from the environment
// or the config file is for cron, and a person at a terminal sees the job's output as it
// comes; given on the command line it holds there too (to try a crontab line by hand).
func (o *runOptions) resolveOutput(f *pflag.FlagSet) {
	j := &o.job
	j.OutputOnFailure = o.Output == outputOnFailure && (f.Changed("output") || !tty.IsTerminal(j.Stdout))
}
