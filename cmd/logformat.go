package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"cronlock/logline"
)

// logFormatValue is the --log-format flag: text or json, refused otherwise.
type logFormatValue struct{ s *string }

func (v logFormatValue) String() string {
	if v.s == nil || *v.s == "" {
		return logline.Text
	}
	return *v.s
}
func (v logFormatValue) Type() string { return "format" }
func (v logFormatValue) Set(s string) error {
	switch s {
	case logline.Text, logline.JSON:
		*v.s = s
		return nil
	}
	return fmt.Errorf("use text or json")
}

// logFormatTwin maps --log-format to its environment/config name.
var logFormatTwin = twins("log")

// addLogFormatFlag adds --log-format to root for every command; value receives it.
func addLogFormatFlag(root *cobra.Command, value *string) {
	*value = logline.Text
	root.PersistentFlags().Var(logFormatValue{value}, "log-format",
		"cronlock's own messages on stderr: text (cronlock: … lines) or json (one object per line) (env CRONLOCK_LOG_FORMAT)")
}

// resolveLogFormat fills --log-format from the environment or the config file when the
// flag was not given. A bad value is a usage error. A config file that cannot be read is
// left for the command itself to report, with its other settings.
// run resolves it with the rest of its settings (runTwins), so it is skipped here: the
// config file is then read once per run.
func resolveLogFormat(c *cobra.Command) error {
	if c.Name() == "run" {
		return nil
	}
	f := c.Flags().Lookup("log-format")
	if f == nil || f.Changed {
		return nil
	}
	s, err := loadSettings()
	if err != nil {
		return nil
	}
	if err := s.apply(c.Flags(), logFormatTwin); err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	return nil
}

// logFormatOf returns the --log-format that applies to command c.
func logFormatOf(c *cobra.Command) string {
	if f := c.Flags().Lookup("log-format"); f != nil {
		return f.Value.String()
	}
	return logline.Text
}
