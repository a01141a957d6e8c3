package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
)

// Values of --log-format / CRONLOCK_LOG_FORMAT.
const (
	logText = "text" // "cronlock: MSG" lines, as cron mails them
	logJSON = "json" // one JSON object per line, for log shippers
)

// Levels of cronlock's messages in json mode: errorf, infof (warnings and notices that
// --quiet hides) and verbosef (what --verbose adds).
const (
	levelError   = slog.LevelError
	levelWarn    = slog.LevelWarn
	levelVerbose = slog.LevelInfo
)

// logFormatValue is the --log-format flag: text or json, refused otherwise.
type logFormatValue struct{ s *string }

func (v logFormatValue) String() string {
	if v.s == nil || *v.s == "" {
		return logText
	}
	return *v.s
}
func (v logFormatValue) Type() string { return "format" }
func (v logFormatValue) Set(s string) error {
	switch s {
	case logText, logJSON:
		*v.s = s
		return nil
	}
	return fmt.Errorf("use text or json")
}

// logFormatTwin maps --log-format to its environment/config name.
var logFormatTwin = map[string]string{"log-format": "CRONLOCK_LOG_FORMAT"}

// addLogFormatFlag adds --log-format to root for every command; value receives it.
func addLogFormatFlag(root *cobra.Command, value *string) {
	*value = logText
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
		return exitf(ExitUsage, "%v", err)
	}
	return nil
}

// say prints one of cronlock's own messages on w: "cronlock: MSG" in text mode, or one
// JSON object (time, level, msg, then attrs) in json mode. The JSON handler writes each
// record with one Write, so lines from several goroutines do not interleave.
// Callers never put a secret in msg or attrs (Redis URLs are redacted before they get here).
func say(w io.Writer, format string, level slog.Level, msg string, attrs ...slog.Attr) {
	if format != logJSON {
		fmt.Fprintf(w, "cronlock: %s\n", msg)
		return
	}
	slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).
		LogAttrs(context.Background(), level, msg, attrs...)
}

// say prints a message of this run with the run's attributes where they are known.
// withStatus adds the row's status: only the run's own goroutine may read it, so
// messages from the history recorder or the lease keeper go without it.
func (r *runner) say(level slog.Level, withStatus bool, msg string) {
	o := r.o
	if o.LogFormat != logJSON {
		say(o.Stderr, logText, level, msg)
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	if r.runID != "" {
		attrs = append(attrs, slog.String("run_id", r.runID))
	}
	attrs = append(attrs, slog.String("key", o.Key), slog.String("node", o.Node))
	if withStatus && r.row != nil && r.row.Status != "" {
		attrs = append(attrs, slog.String("status", r.row.Status))
	}
	say(o.Stderr, logJSON, level, msg, attrs...)
}

// logFormatOf returns the --log-format that applies to command c.
func logFormatOf(c *cobra.Command) string {
	if f := c.Flags().Lookup("log-format"); f != nil {
		return f.Value.String()
	}
	return logText
}

// asyncErrorf is errorf for goroutines other than the run's own (the history recorder):
// the same line, without the row's status, which only the run's goroutine may read.
func (r *runner) asyncErrorf(format string, args ...any) {
	r.say(levelError, false, fmt.Sprintf(format, args...))
}
