package tty

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Columns is how many columns a table printed on f should fit in, decided as ps decides
// it: the COLUMNS environment variable when it holds a number above 0 (whatever f is, so
// `COLUMNS=100 cronlock history | less` can ask for it), else the width of the terminal f
// is (TIOCGWINSZ), else 0: no limit, since a pipe or a file has no width and a script
// reading the table wants every character.
func Columns(f *os.File) int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	if !IsTerminal(f) {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0 // a terminal that does not know its size (a serial line)
	}
	return int(ws.Col)
}
