package child

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

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
		switch {
		case e.Path == "":
			return fmt.Sprintf("%s: command not found", name)
		case e.Err == nil || errors.Is(e.Err, fs.ErrNotExist):
			return fmt.Sprintf("%s: no such file or directory", name)
		}
		return fmt.Sprintf("%s: not found: %v", name, e.Err)
	case NotExecutable:
		return fmt.Sprintf("%s: cannot execute: %v", name, e.Err)
	}
	return fmt.Sprintf("%s: cannot start: %v", name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// defaultPath is the search path of a process without PATH, as glibc's execvp has it.
const defaultPath = "/bin:/usr/bin"

// lookCommand resolves name like a shell would, telling "not found" from "found but
// not executable" (126) before anything is forked.
func lookCommand(name string, env []string, dir string) (string, *StartError) {
	if strings.Contains(name, "/") {
		p := name
		if dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			if missing(err) {
				return "", &StartError{Kind: NotFound, Name: name, Path: name, Err: err}
			}
			return "", &StartError{Kind: NotExecutable, Name: name, Path: name, Err: err}
		}
		return name, nil
	}
	pathEnv, ok := envLookup(env, "PATH")
	if !ok {
		pathEnv, ok = os.LookupEnv("PATH")
	}
	if !ok {
		// No PATH at all (env -i): search where execvp(3) and the shells do, so that
		// `env -i cronlock run -- true` runs what `env -i sh -c true` runs.
		pathEnv = defaultPath
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
		if !missing(err) && firstBad == nil {
			firstBad = &StartError{Kind: NotExecutable, Name: name, Path: p, Err: err}
		}
	}
	if firstBad != nil {
		return "", firstBad
	}
	return "", &StartError{Kind: NotFound, Name: name, Err: fs.ErrNotExist}
}

// missing reports whether checkExecutable's err means that the path names no file: it
// does not exist, a folder on the way is a file, a symbolic link loops, or the name is
// longer than a path can be. Such a command is not found (127), as dash says for all
// four; a PATH search goes on past them, as both bash and dash do.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENAMETOOLONG)
}

// checkExecutable returns nil when p is a file this process may execute. An error that
// missing accepts is fs.ErrNotExist or the bare errno (ELOOP, ENAMETOOLONG), so that a
// message can say it without the stat call around it.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		var en syscall.Errno
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			return fs.ErrNotExist
		case errors.As(err, &en) && (en == syscall.ELOOP || en == syscall.ENAMETOOLONG):
			return en
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

// startErrorFor classifies a failure to start argv, with environment env, from the file
// path that lookCommand found, the way bash does: whatever execve refuses for the file
// or the command line is 126, "exists but cannot be executed" (README, exit codes) — a retry would
// fail the same way. The machine's failures (ENOMEM, EAGAIN, EMFILE, ENFILE, EIO: a
// retry may work) are 125, as cronlock's own are (start.go: a pipe it could not make);
// bash says 126 for an ENOMEM or EIO from execve too.
//
// syscall.ForkExec reports the errno of any step in the child before execve too
// (setpgid, the terminal hand-over, chdir to Job.Dir), so an EPERM or ENOENT there
// would be taken for the command's: cronlock sets no Dir, and start.go retries a failed
// terminal hand-over without it.
func startErrorFor(argv, env []string, path string, err error) *StartError {
	name := argv[0]
	var en syscall.Errno
	if errors.As(err, &en) {
		switch en {
		case syscall.ENOENT, syscall.ENOTDIR:
			// The file was there a moment ago: a missing interpreter (#!) or loader, as
			// a shell says with "bad interpreter". bash and dash exit 127 here; the
			// command was found, so it is 126, "exists but cannot be executed".
			return &StartError{Kind: NotExecutable, Name: name, Path: path,
				Err: errors.New("bad interpreter or loader: no such file or directory")}
		case syscall.E2BIG:
			return &StartError{Kind: NotExecutable, Name: name, Path: path, Err: tooLong(argv, env)}
		case syscall.EACCES, syscall.EPERM, syscall.EISDIR, syscall.ENOEXEC, syscall.ETXTBSY,
			syscall.ELIBBAD, syscall.EINVAL, syscall.ELOOP, syscall.ENAMETOOLONG:
			// EINVAL: an ELF file with two interpreters; ELOOP: #! interpreters nested
			// too deep (dash says 127, bash 126: the file is there).
			return &StartError{Kind: NotExecutable, Name: name, Path: path, Err: err}
		}
	}
	return &StartError{Kind: StartFailed, Name: name, Path: path, Err: err}
}

// argTooLongError is E2BIG from execve, with the sizes that explain it.
type argTooLongError struct{ detail string }

func (e *argTooLongError) Error() string {
	return "argument list too long: " + e.detail + "; pass large data in a file or on stdin"
}

func (e *argTooLongError) Unwrap() error { return syscall.E2BIG }

// tooLong explains an E2BIG the way Linux counts (fs/exec.c): every argument and
// environment string with its NUL and a pointer to it, against a quarter of the stack
// limit (between 128 KiB and 6 MiB; the child inherits cronlock's), and each string
// alone against 32 pages.
func tooLong(argv, env []string) error {
	const ptr = int(unsafe.Sizeof(uintptr(0)))
	total, longest := 0, 0
	for _, list := range [][]string{argv, env} {
		for _, s := range list {
			total += len(s) + 1 + ptr
			longest = max(longest, len(s)+1)
		}
	}
	if one := 32 * os.Getpagesize(); longest > one {
		return &argTooLongError{fmt.Sprintf("one argument or environment variable is %s, over the %s Linux takes in one",
			byteSize(longest), byteSize(one))}
	}
	detail := byteSize(total) + " of arguments and environment"
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_STACK, &lim) == nil {
		limit := uint64(6 << 20)
		if lim.Cur != unix.RLIM_INFINITY {
			limit = min(limit, lim.Cur/4)
		}
		limit = max(limit, 128<<10)
		detail += fmt.Sprintf(", over the %s Linux takes here (a quarter of ulimit -s)", byteSize(int(limit)))
	}
	return &argTooLongError{detail}
}

// byteSize: "512 bytes", "128 KiB", "3.1 MiB".
func byteSize(n int) string {
	unit, div := "MiB", 1<<20
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		unit, div = "KiB", 1<<10
	}
	if n%div == 0 {
		return fmt.Sprintf("%d %s", n/div, unit)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(div), unit)
}

func envLookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}
