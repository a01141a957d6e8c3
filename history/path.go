package history

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"cronlock/userdb"
)

// DefaultPath returns where the history lives when neither --history nor
// CRONLOCK_HISTORY says otherwise: /var/lib/cronlock/history.db for root, else
// <home>/.local/state/cronlock/history.db. <home> comes from the password database, never
// from $HOME or $XDG_STATE_HOME, because cron gives jobs a different environment than a
// login shell and both must find the same file. It returns an error when the user has no
// password-database entry or no home directory.
func DefaultPath() (string, error) {
	uid := os.Geteuid()
	if uid == 0 {
		return "/var/lib/cronlock/history.db", nil
	}
	// userdb reads the password database (getpwuid_r, or /etc/passwd in the static
	// build, then getent for LDAP/SSSD users); unlike user.Current it never falls back
	// to $HOME.
	u, err := userdb.LookupID(uid)
	if err != nil {
		return "", fmt.Errorf("history: find the home folder of uid %d: %w; set CRONLOCK_HISTORY or --history", uid, err)
	}
	if u.HomeDir == "" || !filepath.IsAbs(u.HomeDir) {
		return "", fmt.Errorf("history: uid %d has no home folder in the password database; set CRONLOCK_HISTORY or --history", uid)
	}
	return filepath.Join(u.HomeDir, ".local", "state", "cronlock", "history.db"), nil
}

// Filesystem magic numbers (statfs f_type) of network filesystems on which SQLite's WAL
// mode cannot work: it needs shared memory and byte-range locks that are coherent between
// processes, which these do not provide across machines.
const (
	nfsMagic  = 0x6969
	smbMagic  = 0x517b
	cifsMagic = 0xff534d42
	smb2Magic = 0xfe534d42
)

// statfsType returns the filesystem type of dir; a variable so tests can pretend to be
// on NFS.
var statfsType = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}

// checkLocalFS refuses a folder on a network filesystem.
func checkLocalFS(dir string) error {
	t, err := statfsType(dir)
	if err != nil {
		return fmt.Errorf("history: statfs %s: %w", dir, err)
	}
	var name string
	switch uint32(t) {
	case nfsMagic:
		name = "NFS"
	case smbMagic, cifsMagic, smb2Magic:
		name = "CIFS/SMB"
	default:
		return nil
	}
	return fmt.Errorf("history: %s is on %s, where SQLite's WAL mode does not work; "+
		"set CRONLOCK_HISTORY (or --history) to a file on a local disk", dir, name)
}
