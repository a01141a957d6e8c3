package cmd

import (
	"os"
	"path/filepath"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
)

// historyPath resolves the history file: --history, CRONLOCK_HISTORY (environment or
// config file), then the per-user default. "" with nil error means recording is off.
func historyPath(flag string) (string, error) {
	p := flag
	if p == "off" {
		return "", nil
	}
	if p == "" {
		return history.DefaultPath()
	}
	return p, nil
}

// openHistory opens the history store; a history that cannot be opened never stops the
// job: the run goes on unrecorded, and the user hears of it at most once an hour.
func (r *runner) openHistory() {
	if r.o.History == "off" {
		return
	}
	path, err := historyPath(r.o.History)
	if err == nil {
		r.store, err = history.Open(path)
	}
	if err != nil {
		r.historyFailed(err)
	}
}

func (r *runner) recordStart() {
	if r.store == nil {
		return
	}
	if err := r.store.Start(r.row); err != nil {
		r.historyFailed(err)
	}
}

func (r *runner) recordFinish() {
	if r.store == nil {
		return
	}
	r.row.FinishedAt = time.Now()
	if err := r.store.Finish(r.row); err != nil {
		r.historyFailed(err)
	}
}

// recordInsert writes a run that ended before its child started (skipped, error,
// interrupted) in one go.
func (r *runner) recordInsert() {
	if r.store == nil {
		return
	}
	r.row.FinishedAt = time.Now()
	if err := r.store.Insert(r.row); err != nil {
		r.historyFailed(err)
	}
}

// historyWarnEvery limits the "cannot write the history" warning: a full disk must not
// flood cron mail with one message per run.
const historyWarnEvery = time.Hour

// historyFailed stops recording for this run and warns, unless a warning was given on
// this host within the last hour (a stamp file in the user's private lock folder).
func (r *runner) historyFailed(err error) {
	if r.store != nil {
		r.store.Close()
		r.store = nil
	}
	dir := lockrun.DefaultLockDir()
	os.MkdirAll(dir, 0o700)
	stamp := filepath.Join(dir, ".history-warned")
	if fi, serr := os.Stat(stamp); serr == nil && time.Since(fi.ModTime()) < historyWarnEvery {
		return
	}
	if f, ferr := os.OpenFile(stamp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); ferr == nil {
		f.Close()
		now := time.Now()
		os.Chtimes(stamp, now, now)
	}
	r.errorf("cannot record this run in the history (%v); the job runs anyway. Fix the file or set CRONLOCK_HISTORY (off disables recording); this warning repeats at most once an hour", err)
}
