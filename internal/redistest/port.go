package redistest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// busOffset is how far above its port a Redis Cluster node listens for its peers.
const busOffset = 10000

// reservations is the file whose bytes stand for ports: a test process that holds an
// open-file-description lock on byte P has port P (and P+busOffset) for itself. The
// kernel drops such a lock when its descriptor is closed, also when the process dies.
// One file per user: another user's could not be opened for writing.
var reservations = filepath.Join(os.TempDir(), "cronlock-test-ports-"+strconv.Itoa(os.Getuid())+".lock")

// reservePort finds a port that is free now and that no other test holds, and holds it
// (and the port busOffset above it) until t ends. Without a reservations file it
// only checks that the ports are free (Start's retries cover the rest).
func reservePort(t testing.TB) (int, error) {
	lo, hi := candidates()
	f, err := os.OpenFile(reservations, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Logf("ports are not reserved: %v", err)
		f = nil
	}
	for range 1000 {
		port := lo + rand.IntN(hi-lo+1)
		if ephemeral(port) || ephemeral(port+busOffset) {
			continue
		}
		if f != nil && !lockByte(f, port) {
			continue
		}
		if f != nil && !lockByte(f, port+busOffset) {
			unlockByte(f, port)
			continue
		}
		if free(port) && free(port+busOffset) {
			if f != nil {
				t.Cleanup(func() { f.Close() })
			}
			return port, nil
		}
		if f != nil {
			unlockByte(f, port)
			unlockByte(f, port+busOffset)
		}
	}
	if f != nil {
		f.Close()
	}
	return 0, errors.New("no free, unreserved port found in 1000 tries")
}

// candidates is the range ports are drawn from: above the well-known ones, and low
// enough for a bus port.
func candidates() (lo, hi int) { return 10000, 65535 - busOffset }

// ephemeral reports whether the kernel may give port to an outgoing connection or a
// listener on port 0 (ip_local_port_range, 32768–60999 unless set otherwise). Where
// that range leaves no candidate and its bus port outside, it reports false for all:
// then only the retries of Start keep a race for a port from failing a test.
func ephemeral(port int) bool {
	elo, ehi := ephemeralRange()
	return avoidEphemeral() && elo <= port && port <= ehi
}

// avoidEphemeral reports whether some candidate port and its bus port are outside the
// ephemeral range.
var avoidEphemeral = sync.OnceValue(func() bool {
	elo, ehi := ephemeralRange()
	lo, hi := candidates()
	for p := lo; p <= hi; p++ {
		if (p < elo || p > ehi) && (p+busOffset < elo || p+busOffset > ehi) {
			return true
		}
	}
	return false
})

// ephemeralRange is ip_local_port_range, read once.
var ephemeralRange = sync.OnceValues(func() (int, int) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil {
				return lo, hi
			}
		}
	}
	return 32768, 60999
})

// lockByte takes the lock on byte off of f without waiting, and reports whether it did.
func lockByte(f *os.File, off int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(off), Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk) == nil
}

func unlockByte(f *os.File, off int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: int64(off), Len: 1}
	_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// free reports whether a listener could be opened on 127.0.0.1:port just now.
func free(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
