package history

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/mattn/go-sqlite3"
)

// TestDescribeKeepsTheCause: every described SQLite error still wraps the SQLite error,
// so that two runs failing for one reason have one innermost cause, whatever run id
// the message around it names (the hourly warning limit is per cause).
func TestDescribeKeepsTheCause(t *testing.T) {
	for _, code := range []sqlite3.ErrNo{sqlite3.ErrFull, sqlite3.ErrCorrupt, sqlite3.ErrNotADB,
		sqlite3.ErrBusy, sqlite3.ErrLocked, sqlite3.ErrReadonly, sqlite3.ErrIoErr, sqlite3.ErrMisuse} {
		cause := sqlite3.Error{Code: code}
		a := describe("/h.db", fmt.Errorf("record run 0193: %w", cause))
		b := describe("/h.db", fmt.Errorf("record run 0194: %w", cause))
		var se sqlite3.Error
		if !errors.As(a, &se) || se.Code != code {
			t.Errorf("%v: the described error %q no longer wraps the SQLite error", code, a)
		}
		if innermost(a).Error() != innermost(b).Error() {
			t.Errorf("%v: two runs' causes differ: %q and %q", code, innermost(a), innermost(b))
		}
	}
}

func innermost(err error) error {
	for errors.Unwrap(err) != nil {
		err = errors.Unwrap(err)
	}
	return err
}

// TestDescribeFullDisk: a write the file system refused for want of space is a full disk,
// whether SQLite calls it "database or disk is full" or an I/O error with ENOSPC; the
// advice is never to check permissions.
func TestDescribeFullDisk(t *testing.T) {
	causes := map[string]bool{}
	for _, se := range []sqlite3.Error{
		{Code: sqlite3.ErrFull},
		{Code: sqlite3.ErrIoErr, SystemErrno: syscall.ENOSPC},
		{Code: sqlite3.ErrIoErr, SystemErrno: syscall.EDQUOT},
	} {
		err := describe("/h.db", fmt.Errorf("record run 0193: %w", se))
		if msg := err.Error(); !strings.Contains(msg, "the disk is full") || strings.Contains(msg, "permissions") {
			t.Errorf("%v (errno %v): %q, want a full disk", se.Code, se.SystemErrno, msg)
		}
		if c, ok := err.(interface{ Cause() string }); ok {
			causes[c.Cause()] = true
		}
	}
	// One cause, so that a run that meets the full disk at another step is not warned
	// about again within the hour.
	if len(causes) != 1 {
		t.Errorf("the full disks have the causes %v, want one", causes)
	}
	if msg := describe("/h.db", sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.EACCES}).Error(); !strings.Contains(msg, "permissions") {
		t.Errorf("an I/O error from EACCES: %q, want the permissions advice", msg)
	}
}
