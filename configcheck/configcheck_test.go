package configcheck

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFiles: a private password file is fine, one every user can read is a problem, and
// so is one a run cannot read (with the run's own message); a URL password in a config
// file every user can read is a problem, in a private one it is not.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	private, open := filepath.Join(dir, "private"), filepath.Join(dir, "open")
	os.WriteFile(private, []byte("pw\n"), 0o600)
	os.WriteFile(open, []byte("pw\n"), 0o644)
	var out bytes.Buffer
	c := &Checker{Out: &out}
	read := func() error { return nil }
	c.PasswordFile(private, "CRONLOCK_REDIS_PASSWORD_FILE", read)
	c.PasswordFile(open, "CRONLOCK_ETCD_PASSWORD_FILE", read)
	c.PasswordFile(private, "CRONLOCK_REDIS_PASSWORD_FILE", func() error { return errors.New("read the Redis password file: no") })
	c.URLPasswordInFile(private, "file:"+private+":1")
	c.URLPasswordInFile(open, "file:"+open+":3")
	c.History("", true)
	if want := "ok: password file " + private + " (CRONLOCK_REDIS_PASSWORD_FILE) is readable and private\n" +
		"ok: history is off (CRONLOCK_HISTORY=off): runs are not recorded\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	want := []string{"the password file " + open + " (CRONLOCK_ETCD_PASSWORD_FILE) can be read by every user",
		"read the Redis password file: no", "file:" + open + ":3: CRONLOCK_REDIS_URL holds a password in a file every user can read"}
	if len(c.Problems) != len(want) {
		t.Fatalf("problems %q, want %d", c.Problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(c.Problems[i], w) {
			t.Errorf("problem %d %q, want it to start %q", i, c.Problems[i], w)
		}
	}
}
