package child

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStartErrorFor: what execve says about a file lookCommand found decides between
// 126 (the command cannot be executed) and 125 (cronlock or the machine failed), as
// bash does, but for a missing #! interpreter (bash and dash: 127; cronlock: the file
// exists, 126) and the machine's own shortages, which a retry may cure.
func TestStartErrorFor(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind StartErrorKind
		msg  string
	}{
		{syscall.E2BIG, NotExecutable, "job: cannot execute: argument list too long: "},
		{syscall.EACCES, NotExecutable, "job: cannot execute: permission denied"},
		{syscall.EPERM, NotExecutable, "job: cannot execute: operation not permitted"},
		{syscall.EISDIR, NotExecutable, "job: cannot execute: is a directory"},
		{syscall.ENOEXEC, NotExecutable, "job: cannot execute: exec format error"},
		{syscall.ETXTBSY, NotExecutable, "job: cannot execute: text file busy"},
		{syscall.ELIBBAD, NotExecutable, "job: cannot execute: "},
		{syscall.EINVAL, NotExecutable, "job: cannot execute: invalid argument"},
		{syscall.ELOOP, NotExecutable, "job: cannot execute: too many levels of symbolic links"},
		{syscall.ENAMETOOLONG, NotExecutable, "job: cannot execute: file name too long"},
		{syscall.ENOENT, NotExecutable, "job: cannot execute: bad interpreter or loader: no such file or directory"},
		{syscall.ENOTDIR, NotExecutable, "job: cannot execute: bad interpreter or loader"},
		{syscall.ENOMEM, StartFailed, "job: cannot start: cannot allocate memory"},
		{syscall.EAGAIN, StartFailed, "job: cannot start: resource temporarily unavailable"},
		{syscall.EMFILE, StartFailed, "job: cannot start: too many open files"},
		{syscall.ENFILE, StartFailed, "job: cannot start: too many open files in system"},
		{syscall.EIO, StartFailed, "job: cannot start: input/output error"},
		{errors.New("no errno"), StartFailed, "job: cannot start: no errno"},
	} {
		// syscall.ForkExec returns the bare errno.
		se := startErrorFor([]string{"job", "arg"}, []string{"A=1"}, "/bin/job", c.err)
		if se.Kind != c.kind || !strings.HasPrefix(se.Error(), c.msg) {
			t.Errorf("%v: kind %d, %q; want kind %d, %q...", c.err, se.Kind, se.Error(), c.kind, c.msg)
		}
	}
}

// TestLookCommand: a path that names no file is not found (127), even when the reason
// is a symbolic link loop or a name too long for a path, as dash says; one that names a
// file that cannot be run is 126.
func TestLookCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("plain", 0o644)
	write("ok", 0o755)
	if err := os.Symlink("loop2", filepath.Join(dir, "loop1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1", filepath.Join(dir, "loop2")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name, path string
		kind       StartErrorKind // 0: found
		msg        string
	}{
		{"./ok", "", 0, ""},
		{"ok", dir, 0, ""},
		{"./missing", "", NotFound, "./missing: no such file or directory"},
		{"./ok/x", "", NotFound, "./ok/x: no such file or directory"},
		{"missing", dir, NotFound, "missing: command not found"},
		{"./loop1", "", NotFound, "./loop1: not found: too many levels of symbolic links"},
		{"loop1", dir, NotFound, "loop1: command not found"},
		{"./" + long, "", NotFound, "./" + long + ": not found: file name too long"},
		{long, dir, NotFound, long + ": command not found"},
		{"./plain", "", NotExecutable, "./plain: cannot execute: permission denied (not executable; chmod +x it)"},
		{"plain", dir, NotExecutable, "plain: cannot execute: permission denied (not executable; chmod +x it)"},
		{".", "", NotExecutable, ".: cannot execute: is a directory"},
		// The loop earlier in PATH is passed over, as a missing file is.
		{"ok", dir + "/loop1:" + dir, 0, ""},
		{"./a b", "", NotFound, "'./a b': no such file or directory"},
		{"./\x1b[2J", "", NotFound, `'./'$'\x1b''[2J': no such file or directory`},
	} {
		var env []string
		if c.path != "" {
			env = []string{"PATH=" + c.path}
		}
		wd := dir
		_, se := lookCommand(c.name, env, wd)
		switch {
		case c.kind == 0 && se != nil:
			t.Errorf("%s in %q: %v, want found", c.name, c.path, se)
		case c.kind != 0 && se == nil:
			t.Errorf("%s in %q: found, want kind %d", c.name, c.path, c.kind)
		case c.kind != 0 && (se.Kind != c.kind || se.Error() != c.msg):
			t.Errorf("%s in %q: kind %d, %q; want kind %d, %q", c.name, c.path, se.Kind, se.Error(), c.kind, c.msg)
		}
	}
}

// TestLookCommandWithoutPath: with no PATH anywhere (env -i), a command is searched for
// where execvp(3) searches, not nowhere.
func TestLookCommandWithoutPath(t *testing.T) {
	old, had := os.LookupEnv("PATH")
	os.Unsetenv("PATH")
	defer func() {
		if had {
			os.Setenv("PATH", old)
		}
	}()
	if p, se := lookCommand("sh", []string{"A=1"}, t.TempDir()); se != nil || (p != "/bin/sh" && p != "/usr/bin/sh") {
		t.Fatalf("sh without PATH: %q, %v; want /bin/sh", p, se)
	}
	if _, se := lookCommand("sh", []string{"PATH="}, t.TempDir()); se == nil || se.Kind != NotFound {
		t.Fatalf("sh with an empty PATH: %v; want not found (an empty PATH is the current folder)", se)
	}
}

// TestTooLong: the E2BIG message says which limit the command line passed.
func TestTooLong(t *testing.T) {
	one := 32 * os.Getpagesize()
	big := strings.Repeat("a", one)
	if got, want := tooLong([]string{"echo", big}, nil).Error(),
		fmt.Sprintf("argument list too long: one argument or environment variable is %s, over the %s Linux takes in one; pass large data in a file or on stdin",
			byteSize(one+1), byteSize(one)); got != want {
		t.Errorf("one long argument: %q, want %q", got, want)
	}
	many := make([]string, 40)
	for i := range many {
		many[i] = big[:100_000]
	}
	err := tooLong(many, []string{"A=1"})
	if !errors.Is(err, syscall.E2BIG) || !strings.Contains(err.Error(), "argument list too long: 3.8 MiB of arguments and environment, over the ") {
		t.Errorf("many arguments: %v", err)
	}
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 bytes"}, {1023, "1023 bytes"}, {1024, "1 KiB"}, {131072, "128 KiB"}, {131073, "128.0 KiB"},
		{3 << 20, "3 MiB"}, {3<<20 + 200_000, "3.2 MiB"}} {
		if got := byteSize(c.n); got != c.want {
			t.Errorf("byteSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
