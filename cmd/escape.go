package cmd

import "cronlock/tty"

// escape is tty.Escape: every string from a job or another machine goes through it
// before it reaches a reader's terminal.
func escape(s string) string { return tty.Escape(s) }
