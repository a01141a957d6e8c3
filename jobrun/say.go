package jobrun

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"cronlock/lockrun/local"
	"cronlock/logline"
	"cronlock/tty"
)

// say prints a message of this run with the run's attributes where they are known.
// withStatus adds the row's status: only the run's own goroutine may read it, so
// messages from the history recorder or the lease keeper go without it.
func (r *runner) say(level slog.Level, withStatus bool, msg string) {
	o := r.o
	if o.LogFormat != logline.JSON {
		logline.Print(o.Stderr, logline.Text, level, msg)
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	if r.runID != "" {
		attrs = append(attrs, slog.String("run_id", r.runID))
	}
	attrs = append(attrs, slog.String("key", o.Key), slog.String("node", o.Node))
	if withStatus && r.row != nil && r.row.Try > 1 {
		attrs = append(attrs, slog.Int("try", r.row.Try))
	}
	if withStatus && r.row != nil && r.row.Status != "" {
		attrs = append(attrs, slog.String("status", r.row.Status))
	}
	logline.Print(o.Stderr, logline.JSON, level, msg, attrs...)
}

func (r *runner) errorf(format string, args ...any) {
	r.say(logline.Error, true, fmt.Sprintf(format, args...))
}

func (r *runner) infof(format string, args ...any) {
	if !r.o.Quiet {
		r.say(logline.Warn, true, fmt.Sprintf(format, args...))
	}
}

func (r *runner) verbosef(format string, args ...any) {
	if r.o.Verbose {
		r.say(logline.Verbose, true, fmt.Sprintf(format, args...))
	}
}

// asyncErrorf is errorf for goroutines other than the run's own (the history recorder):
// the same line, without the row's status, which only the run's goroutine may read.
func (r *runner) asyncErrorf(format string, args ...any) {
	r.say(logline.Error, false, fmt.Sprintf(format, args...))
}

// asyncInfof is infof for goroutines other than the run's own (the guard's start).
func (r *runner) asyncInfof(format string, args ...any) {
	if !r.o.Quiet {
		r.say(logline.Warn, false, fmt.Sprintf(format, args...))
	}
}

// warnEvery limits a warning that every run would repeat (a full disk, a broken
// folder): cron mails each run's stderr, and one mail an hour says it as well as sixty.
const warnEvery = time.Hour

// shouldWarn reports whether to say now a warning about what ("history", "metrics") on
// subject (its file or folder) caused by err. On a terminal, always: a person is there to
// read it. Otherwise at most once per warnEvery on this host for each subject and cause,
// stamped by a file in the lock folder (the same for cron and a login shell), so that a
// new problem, or the same problem of another file, is said at once.
func (r *runner) shouldWarn(what, subject string, err error) bool {
	if tty.IsTerminal(r.o.Stderr) {
		return true
	}
	dir := r.o.StampDir
	if dir == "" {
		dir = local.DefaultDir()
	}
	os.MkdirAll(dir, 0o700)
	sum := sha256.Sum256([]byte(subject + "\x00" + causeOf(err)))
	stamp := filepath.Join(dir, "."+what+"-"+hex.EncodeToString(sum[:8])+"-warned")
	if fi, serr := os.Stat(stamp); serr == nil && time.Since(fi.ModTime()) < warnEvery {
		return false
	}
	if f, ferr := os.OpenFile(stamp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); ferr == nil {
		f.Close()
		now := time.Now()
		os.Chtimes(stamp, now, now)
	}
	return true
}

// causeOf names what went wrong, without the details that differ from run to run (a
// run id in a wrapping message): the Cause of an error in the chain that has one, else
// the innermost error's text.
func causeOf(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if c, ok := e.(interface{ Cause() string }); ok {
			return c.Cause()
		}
	}
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error()
		}
		err = inner
	}
}

// repeatNote ends a limited warning with what a reader of cron mail needs to know.
func (r *runner) repeatNote() string {
	if tty.IsTerminal(r.o.Stderr) {
		return ""
	}
	return "; this warning repeats at most once an hour"
}

// historyFailed warns that the run is not recorded in the history file path.
func (r *runner) historyFailed(path string, err error) {
	if !r.shouldWarn("history", path, err) {
		return
	}
	r.asyncErrorf("cannot record this run in the history (%v); the job runs anyway. Fix the file or set CRONLOCK_HISTORY (off disables recording)%s", err, r.repeatNote())
}
