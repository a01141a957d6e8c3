package lockrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"cronlock/tty"
)

// StartErrorKind tells why a child could not be started.
type StartErrorKind int

const (
	// NotFound: no such command.
	NotFound StartErrorKind = iota + 1
	// NotExecutable: the command exists but cannot be executed.
	NotExecutable
	// StartFailed: cronlock could not start the child for another reason: no more
	// processes, a bad Dir, a pipe that could not be made.
	StartFailed
)

// StartError reports a child that could not be started. Its message has no "cronlock: "
// prefix; the caller adds it.
type StartError struct {
	Kind StartErrorKind
	Name string // the command as given
	Path string // the file found, "" when none
	Err  error
}

func (e *StartError) Error() string {
	name := tty.Command([]string{e.Name})
	switch e.Kind {
	case NotFound:
		if e.Path != "" {
			return fmt.Sprintf("%s: no such file or directory", name)
		}
		return fmt.Sprintf("%s: command not found", name)
	case NotExecutable:
		return fmt.Sprintf("%s: cannot execute: %v", name, e.Err)
	}
	return fmt.Sprintf("%s: cannot start: %v", name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// lookCommand resolves name like a shell would, telling "not found" from "found but
// not executable" (126) before anything is forked.
func lookCommand(name string, env []string, dir string) (string, *StartError) {
	if strings.Contains(name, "/") {
		p := name
		if dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", &StartError{Kind: NotFound, Name: name, Path: name, Err: err}
			}
			return "", &StartError{Kind: NotExecutable, Name: name, Path: name, Err: err}
		}
		return name, nil
	}
	pathEnv, ok := envLookup(env, "PATH")
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	var firstBad *StartError
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "." // POSIX: an empty PATH entry is the current directory
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && firstBad == nil {
			firstBad = &StartError{Kind: NotExecutable, Name: name, Path: p, Err: err}
		}
	}
	if firstBad != nil {
		return "", firstBad
	}
	return "", &StartError{Kind: NotFound, Name: name, Err: fs.ErrNotExist}
}

// checkExecutable returns nil when p is a file this process may execute.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return fs.ErrNotExist
		}
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("permission denied (not executable; chmod +x it)")
	}
	if err := unix.Access(p, unix.X_OK); err != nil {
		return fmt.Errorf("permission denied: %w", err)
	}
	return nil
}

// startErrorFor classifies an exec failure of a file that lookCommand found.
func startErrorFor(name, path string, err error) *StartError {
	var en syscall.Errno
	if errors.As(err, &en) {
		switch en {
		case syscall.ENOENT:
			// The file was there a moment ago: a missing interpreter (#!) or loader, as
			// a shell says with "bad interpreter".
			return &StartError{Kind: NotExecutable, Name: name, Path: path,
				Err: errors.New("bad interpreter or loader: no such file or directory")}
		case syscall.EACCES, syscall.EPERM, syscall.EISDIR, syscall.ENOEXEC, syscall.ETXTBSY, syscall.ELIBBAD:
			return &StartError{Kind: NotExecutable, Name: name, Path: path, Err: err}
		}
	}
	return &StartError{Kind: StartFailed, Name: name, Path: path, Err: err}
}

func envLookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}
