package history

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"time"
)

// Keys this host has claimed, per backend: one empty file per (backend, key) in the
// folder <history>-keys, named by a hash of both. A run asks KnowsKey before it takes its
// lock, with one stat (no SQLite open on the lock's path): a backend that then shows no
// trace of the key (Redis's fencing counter gone) has lost its data, and the run says so.
// The folder lives beside the history, which survives reboots (unlike /run).

// keyStamp is the stamp file of ident (the backend and key, as the caller names them).
func keyStamp(path, ident string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	sum := sha256.Sum256([]byte(ident))
	return filepath.Join(abs+"-keys", hex.EncodeToString(sum[:16]))
}

// KnowsKey reports whether RememberKey was called for ident with the history file path,
// and when it was last noted after a boot (the stamp's time; see RememberKey).
func KnowsKey(path, ident string) (known bool, noted time.Time) {
	st, err := os.Lstat(keyStamp(path, ident))
	if err != nil {
		return false, time.Time{}
	}
	return true, st.ModTime()
}

// RememberKey notes that this host claimed ident: a stamp is made once, and its time is
// moved to now when it is older than boot, so that a caller can tell a key known since
// this boot (the local backend's lock folder, /run, is emptied at every boot, which is
// no data loss). Errors are ignored: a host that cannot note a key only loses the
// data-loss check.
func RememberKey(path, ident string, boot time.Time) {
	name := keyStamp(path, ident)
	if st, err := os.Lstat(name); err == nil {
		if st.ModTime().Before(boot) {
			now := time.Now()
			os.Chtimes(name, now, now)
		}
		return
	}
	if os.MkdirAll(filepath.Dir(name), 0o700) != nil {
		return
	}
	if f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600); err == nil {
		f.Close()
	}
}
