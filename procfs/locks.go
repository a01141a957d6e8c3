package procfs

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Flock is an exclusive flock(2) lock listed in /proc/locks.
type Flock struct {
	PID int    // the process that took it
	Ino uint64 // the locked file's inode
}

// Flocks lists the exclusive flock(2) locks held (not waited for) on files of device dev
// (a stat's st_dev).
func Flocks(dev uint64) ([]Flock, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	return ParseFlocks(b, dev), nil
}

// ParseFlocks reads the content of /proc/locks, whose lines are
//
//	1: FLOCK  ADVISORY  WRITE 18340 fe:00:9978410 0 EOF
//	1: -> FLOCK  ADVISORY  WRITE 18351 fe:00:9978410 0 EOF
//
// (id, "->" for a waiter, class, mode, pid, major:minor in hex and the inode, range),
// and keeps the held WRITE flocks on dev. Lines it cannot read are left out.
func ParseFlocks(b []byte, dev uint64) []Flock {
	var out []Flock
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" {
			continue // a waiter ("->"), another kind of lock, or a shared one
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(id[0], 16, 32)
		minor, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || unix.Mkdev(uint32(major), uint32(minor)) != dev {
			continue
		}
		out = append(out, Flock{PID: pid, Ino: ino})
	}
	return out
}

// OpenDeleted opens (read-only) the file that process pid has open as inode ino and that
// was at path until it was deleted: /proc/PID/fd names such a file "PATH (deleted)". It
// returns -1 when pid has no such file open or its descriptors cannot be read (another
// user's process, without root).
func OpenDeleted(pid int, path string, ino uint64) int {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	want := path + " (deleted)"
	for _, e := range ents {
		if target, err := os.Readlink(dir + e.Name()); err != nil || target != want {
			continue
		}
		fd, err := unix.Open(dir+e.Name(), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		// A live file may be named "x.lock (deleted)" too: only an unlinked inode counts.
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Ino == ino && st.Nlink == 0 {
			return fd
		}
		unix.Close(fd)
	}
	return -1
}
