// Package proctest has the small process and file probes that cronlock's tests share:
// waiting for a file a job writes, reading a pid from it, telling whether a process
// is still alive, and which process a loopback connection belongs to. It is for tests
// only.
package proctest

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/procfs"

	"golang.org/x/sys/unix"
)

// WaitFile waits up to 20 s for path to exist.
func WaitFile(t testing.TB, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within 20s", path)
}

// ReadPID waits for path and returns the pid written in it (the write may be in progress).
func ReadPID(t testing.TB, path string) int {
	t.Helper()
	WaitFile(t, path)
	for i := 0; i < 400; i++ {
		b, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// Dead reports whether pid is gone or a zombie (exited, not yet reaped).
func Dead(pid int) bool {
	st, err := procfs.ReadStat(pid)
	var perr *fs.PathError
	if errors.As(err, &perr) {
		return true // no /proc entry: gone, and reaped
	}
	return err == nil && st.State == 'Z'
}

// WaitDead waits up to within for pid to be Dead and fails the test otherwise.
func WaitDead(t testing.TB, pid int, within time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if Dead(pid) {
			return
		}
	}
	t.Fatalf("%s (pid %d) still alive after %v", what, pid, within)
}

// OpenPTY opens a new pseudo-terminal: master (non-blocking, so that read deadlines work)
// and pts, its terminal side, neither of them this process's controlling terminal. Both
// are closed when the test ends. The test is skipped where there are no pseudo-terminals.
func OpenPTY(t testing.TB) (master, pts *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return master, pts
}

// SocketOwnedBy reports whether the TCP socket whose own address is addr (a client's end
// of a loopback connection, as a proxy sees it) is open in one of pids: how a test tells
// which process a connection it proxies belongs to (faultproxy.SetPartition).
func SocketOwnedBy(addr *net.TCPAddr, pids ...int) bool {
	inode := tcpInode(addr)
	if inode == "" {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && l == want {
				return true
			}
		}
	}
	return false
}

// tcpInode is the inode of the open TCP socket whose local address is addr, from
// /proc/net/tcp (IPv4) or tcp6; "" when there is none.
func tcpInode(addr *net.TCPAddr) string {
	file, local := "/proc/net/tcp", ""
	if ip4 := addr.IP.To4(); ip4 != nil {
		local = fmt.Sprintf("%02X%02X%02X%02X:%04X", ip4[3], ip4[2], ip4[1], ip4[0], addr.Port)
	} else {
		file = "/proc/net/tcp6"
		var b strings.Builder
		for i := 0; i < 16; i += 4 {
			fmt.Fprintf(&b, "%02X%02X%02X%02X", addr.IP[i+3], addr.IP[i+2], addr.IP[i+1], addr.IP[i])
		}
		local = fmt.Sprintf("%s:%04X", b.String(), addr.Port)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st queues timer retrnsmt uid timeout inode
		if len(f) >= 10 && f[1] == local && f[9] != "0" {
			return f[9]
		}
	}
	return ""
}
