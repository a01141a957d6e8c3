// Package tty is what cronlock knows of terminals: whether a file is one (colours,
// notices of skipped runs and the default --capture are decided by it), whether cronlock
// is in a terminal's foreground process group (only then may a job take the terminal
// over), how wide a table printed on one may be (Columns) and how many columns text takes
// there (Width, Truncate), and how to make text from a job or another host safe to print
// on one (Escape, and Command for an argv, shell-quoted). It changes no terminal setting
// itself.
package tty

import (
	"os"

	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"
)

// IsTerminal reports whether f is a terminal; false for nil.
func IsTerminal(f *os.File) bool {
	return f != nil && isatty.IsTerminal(f.Fd())
}

// InForeground reports whether f is a terminal whose foreground process group is this
// process's group: a cronlock started in the background with & is not, and must not
// take the terminal from the shell.
func InForeground(f *os.File) bool {
	if f == nil {
		return false
	}
	pg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}
