package crontabfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplace: the new text replaces the file with its mode kept, the old text is in a
// private backup, and a file that changed since it was read is left alone.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	file, backups := filepath.Join(dir, "jobs"), filepath.Join(dir, "backups")
	if err := os.WriteFile(file, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	backup, err := Replace(file, backups, "old\n", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "new\n" {
		t.Fatalf("file holds %q", b)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Fatalf("file mode %v, want 0640", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(backup); string(b) != "old\n" || filepath.Dir(backup) != backups {
		t.Fatalf("backup %s holds %q", backup, b)
	}
	if fi, _ := os.Stat(backup); fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := Replace(file, backups, "old\n", "newer\n"); err == nil || !strings.Contains(err.Error(), "changed while it was being wrapped") {
		t.Fatalf("a file edited meanwhile: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "new\n" {
		t.Fatalf("a file edited meanwhile was overwritten: %q", b)
	}
}

// TestCheckTarget: a file in the spool and a backup folder that is relative or that cron
// reads are refused.
func TestCheckTarget(t *testing.T) {
	for _, c := range []struct{ file, backup, want string }{
		{"/var/spool/cron/crontabs/ann", "/var/backups/cronlock", "refusing --write"},
		{"/etc/cron.d/jobs", "backups", "not an absolute path"},
		{"/etc/cron.d/jobs", "/etc/cron.daily/", "is a cron folder"},
		{"/etc/cron.d/jobs", "/var/spool/cron", "is a cron folder"},
		{"/etc/cron.d/jobs", "/var/backups/cronlock", ""},
	} {
		err := CheckTarget(c.file, c.backup)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckTarget(%q, %q) = %v, want %q", c.file, c.backup, err, c.want)
		}
	}
}

// TestIsSystem: /etc/crontab and the files of /etc/cron.d have a user field, nothing else.
func TestIsSystem(t *testing.T) {
	for path, want := range map[string]bool{"/etc/crontab": true, "/etc/cron.d/jobs": true, "/etc/cron.d/../crontab": true,
		"/etc/cron.daily/jobs": false, "/etc/cron.d": false, "/home/ann/crontab": false, "crontab": false} {
		if got := IsSystem(path); got != want {
			t.Errorf("IsSystem(%q) = %v, want %v", path, got, want)
		}
	}
}
