// Package crontabfile knows the crontab files of this machine for `cronlock crontab`:
// which ones cron reads in the system format, which commands cron's PATH finds, and how
// wrap --write replaces one: a backup of the old text first, then the new text through a
// temporary file renamed over the old one, so that a cron daemon reads either file
// whole, never half of one. It refuses files cron would not see (the spool belongs to
// crontab(1)) and backup folders cron would read. It does not read, parse or rewrite
// crontab text (package crontab does); its errors are written for the user, naming
// --write and --backup-dir.
package crontabfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// SpoolDir is where crontab(1) keeps users' crontabs; cron notices a change there only
// when crontab(1) made it.
const SpoolDir = "/var/spool/cron"

// inCronFolder reports whether p (absolute, clean) is a file or folder a cron daemon
// reads: /etc/crontab, /etc/cron.d, /etc/cron.hourly… (run-parts would run a backup
// there), and the spool.
func inCronFolder(p string) bool {
	return strings.HasPrefix(p, "/etc/cron") || p == SpoolDir || strings.HasPrefix(p, SpoolDir+"/")
}

// CheckTarget refuses a --write that cron would not see (a file in the spool) and
// a backup folder that cron would read.
func CheckTarget(file, backupDir string) error {
	if abs, err := filepath.Abs(file); err == nil && (abs == SpoolDir || strings.HasPrefix(abs, SpoolDir+"/")) {
		return fmt.Errorf("refusing --write on %s: cron only sees a user's crontab that crontab(1) installed; run crontab -l | cronlock crontab wrap - | crontab - as that user (or crontab -u USER)", file)
	}
	if !filepath.IsAbs(backupDir) {
		return fmt.Errorf("--backup-dir %q is not an absolute path; give one such as /var/backups/cronlock", backupDir)
	}
	if inCronFolder(filepath.Clean(backupDir)) {
		return fmt.Errorf("--backup-dir %s is a cron folder: a cron daemon would run the backup; give one outside /etc/cron* and %s", backupDir, SpoolDir)
	}
	return nil
}

// Replace replaces file, whose text was old, with text new: first a copy of old in
// backupDir (mode 0600), then a temporary file beside file with file's mode and owner,
// synced and renamed over it, so cron reads either the old file or the new one, never
// half of one. It returns the backup's path; its errors are ready for the user.
func Replace(file, backupDir, old, new string) (string, error) {
	if err := CheckTarget(file, backupDir); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(file)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("cannot resolve %s: %v", file, err)
	}
	// The file a symlink leads to counts too: a link into the spool is the spool.
	if err := CheckTarget(abs, backupDir); err != nil {
		return "", err
	}
	backupDir = filepath.Clean(backupDir)
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", file, err)
	}
	// Another editor may have changed the file since it was read: never undo their edit.
	if now, err := os.ReadFile(abs); err != nil || string(now) != old {
		return "", fmt.Errorf("%s changed while it was being wrapped; run the command again", file)
	}
	backup, err := writeBackup(abs, backupDir, old)
	if err != nil {
		return "", fmt.Errorf("cannot back up %s into %s (%v); give another folder with --backup-dir", file, backupDir, err)
	}
	if err := replaceFile(abs, st, new); err != nil {
		return "", fmt.Errorf("cannot write %s: %v (it is unchanged; the backup is %s)", file, err, backup)
	}
	return backup, nil
}

// writeBackup copies text into a new file of dir named after path and the time.
func writeBackup(path, dir, text string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	base := strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_") + "." + time.Now().UTC().Format("20060102T150405Z")
	for n := 1; ; n++ {
		name := filepath.Join(dir, base)
		if n > 1 {
			name = fmt.Sprintf("%s.%d", name, n)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && n < 100 {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := writeSync(f, text); err != nil {
			os.Remove(name)
			return "", err
		}
		return name, syncDir(dir)
	}
}

// replaceFile writes text to path through a temporary file in the same folder. The
// temporary name starts with a dot and holds dots: Debian's cron and cronie skip such
// names in /etc/cron.d, so neither runs a half-written file.
func replaceFile(path string, st fs.FileInfo, text string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".cronlock-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(st.Mode().Perm()); err != nil {
		return fail(err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		// A file that would change owner is not a replacement: cron refuses cron.d
		// files not owned by root.
		if err := f.Chown(int(sys.Uid), int(sys.Gid)); err != nil {
			return fail(err)
		}
	}
	if err := writeSync(f, text); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// writeSync writes text to f, syncs and closes it.
func writeSync(f *os.File, text string) error {
	_, err := f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// IsSystem reports whether path is a crontab in the system format, with a user field
// after the schedule, as cron reads /etc/crontab and /etc/cron.d/*. A path that cannot
// be made absolute is not.
func IsSystem(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	return abs == "/etc/crontab" || filepath.Dir(abs) == "/etc/cron.d"
}

// InCronPath reports whether name is an executable file in Debian cron's default
// PATH=/usr/bin:/bin, where a job's relative command is looked up.
func InCronPath(name string) bool {
	for _, d := range []string{"/usr/bin", "/bin"} {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
