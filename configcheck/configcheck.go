// Package configcheck is `cronlock config check`'s look at what the settings in force
// point at on this machine: the password files and the config file that may hold one,
// the backend, the history file and the lock folder. It writes nothing and takes no
// lock; what is fine goes out as an "ok: " line, and each problem is kept as one line
// that says how to fix it. It does not read or resolve the settings (the command does,
// and hands it the values) and does not decide the exit code.
package configcheck

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/lockrun/local"
)

// A Checker runs the checks one after another, in the order the command calls them.
type Checker struct {
	// Out gets one "ok: …" line for each thing found fine.
	Out io.Writer
	// Problems are what was found wrong, one line each, in the order found.
	Problems []string
}

// OK says what was found fine.
func (c *Checker) OK(what string) { fmt.Fprintln(c.Out, "ok: "+what) }

func (c *Checker) problem(msg string) { c.Problems = append(c.Problems, msg) }

// worldReadable reports whether path exists and every user may read it.
func worldReadable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Perm()&0o004 != 0
}

// URLPasswordInFile is a problem when the config file, from which a URL with a
// password came (source says where, as "file:PATH:LINE"), can be read by every user.
func (c *Checker) URLPasswordInFile(file, source string) {
	if worldReadable(file) {
		c.problem(fmt.Sprintf("%s: CRONLOCK_REDIS_URL holds a password in a file every user can read; put the password in the file named by CRONLOCK_REDIS_PASSWORD_FILE (mode 0600) and drop it from the URL", source))
	}
}

// PasswordFile checks the password file at path, set by the setting name: read is how a
// run reads it (its error is the problem, as a run would say it), and every user must
// not be able to read it.
func (c *Checker) PasswordFile(path, name string, read func() error) {
	if err := read(); err != nil {
		c.problem(err.Error())
	} else if worldReadable(path) {
		c.problem(fmt.Sprintf("the password file %s (%s) can be read by every user; run chmod 0600 %s (or 0640 with a group of the users that run cronlock)", path, name, path))
	} else {
		c.OK(fmt.Sprintf("password file %s (%s) is readable and private", path, name))
	}
}

// Backend asks l what it can tell without a lock, within timeout: a backend that
// diagnoses itself (lockrun.Diagnoser) reports its facts and problems, judged against
// maxSkew and the clock now; any other must answer an Inspect.
func (c *Checker) Backend(l lockrun.Locker, timeout, maxSkew time.Duration, now func() time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if d, is := l.(lockrun.Diagnoser); is {
		diag := d.Diagnose(ctx, lockrun.DiagnoseOptions{MaxSkew: maxSkew, Now: now})
		for _, f := range diag.Facts {
			c.OK(f)
		}
		c.Problems = append(c.Problems, diag.Problems...)
		return
	}
	if _, err := l.Inspect(ctx, "cronlock-config-check"); err != nil {
		c.problem(err.Error())
		return
	}
	c.OK(l.Describe() + " answers")
}

// History checks that runs can record into the history file at path (history.Check):
// "" is the per-user default; off says recording is off, which is fine.
func (c *Checker) History(path string, off bool) {
	if off {
		c.OK("history is off (CRONLOCK_HISTORY=off): runs are not recorded")
		return
	}
	if path == "" {
		var err error
		if path, err = history.DefaultPath(); err != nil {
			c.problem(err.Error())
			return
		}
	}
	c.result(history.Check(path))
}

// LockDir checks the local lock folder dir ("" = the default) as local.New would take it.
func (c *Checker) LockDir(dir string) { c.result(local.Check(dir)) }

func (c *Checker) result(what string, err error) {
	if err != nil {
		c.problem(err.Error())
		return
	}
	c.OK(what)
}
