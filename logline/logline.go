// Package logline prints cronlock's own messages on stderr: "cronlock: MSG" lines, as
// cron mails them, or, with --log-format json, one JSON object per line (time, level,
// msg, then attributes) for log shippers. It decides neither what is said nor when.
package logline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// The formats of --log-format / CRONLOCK_LOG_FORMAT.
const (
	Text = "text" // "cronlock: MSG" lines
	JSON = "json" // one JSON object per line
)

// The levels of cronlock's messages in JSON: errors, warnings and notices that --quiet
// hides, and what --verbose adds.
const (
	Error   = slog.LevelError
	Warn    = slog.LevelWarn
	Verbose = slog.LevelInfo
)

// Print writes msg to w as one line in format (Text for anything but JSON). The JSON
// handler writes each record with one Write, so lines from several goroutines do not
// interleave. Callers never put a secret in msg or attrs.
func Print(w io.Writer, format string, level slog.Level, msg string, attrs ...slog.Attr) {
	if format != JSON {
		fmt.Fprintf(w, "cronlock: %s\n", msg)
		return
	}
	slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).
		LogAttrs(context.Background(), level, msg, attrs...)
}
