package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Check says whether runs can record into the history file at path (cronlock config
// check). An existing file is opened as a run opens it, and closed; a missing one is not
// created: the nearest existing folder above it must let this user create it, and be on
// a local filesystem. what describes what was found.
func Check(path string) (what string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("history: %s: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		up := filepath.Dir(abs)
		for up != "/" {
			if _, err := os.Stat(up); err == nil {
				break
			}
			up = filepath.Dir(up)
		}
		if err := unix.Access(up, unix.W_OK|unix.X_OK); err != nil {
			return "", fmt.Errorf("history file %s does not exist and cannot be created in %s (%v); create its folder for the user that runs the jobs, or set CRONLOCK_HISTORY to a writable place", abs, up, err)
		}
		if err := checkLocalFS(up); err != nil {
			return "", err
		}
		return fmt.Sprintf("history file %s will be created by the first run", abs), nil
	}
	s, err := Open(abs)
	if err != nil {
		return "", err
	}
	s.Close()
	return fmt.Sprintf("history file %s opens and is writable", abs), nil
}
