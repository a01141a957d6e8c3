package etcdtest

import (
	"net"
	"testing"

	"cronlock/internal/redistest"
)

// takenAt makes the nth freePort (from 1) return a port that a listener of this test
// holds, and the others free ports; it returns that port.
func takenAt(t *testing.T, nth int) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	taken := l.Addr().(*net.TCPAddr).Port
	calls := 0
	freePort = func(t testing.TB) int {
		calls++
		if calls == nth {
			return taken
		}
		return redistest.FreePort(t)
	}
	t.Cleanup(func() { freePort = redistest.FreePort })
	return taken
}

// TestStartOnTakenPort: an etcd whose client or peer port was taken after FreePort is
// started on other ports, not a failed test.
func TestStartOnTakenPort(t *testing.T) {
	for _, nth := range []int{1, 2} { // the client port, the peer port
		taken := takenAt(t, nth)
		s := Start(t, Options{})
		if s.Port() == taken {
			t.Fatalf("started on the taken port %d", taken)
		}
		if _, err := s.Root().Put(t.Context(), "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClusterOnTakenPort: a cluster one of whose members lost a port starts again, all
// of it, on new ports.
func TestClusterOnTakenPort(t *testing.T) {
	taken := takenAt(t, 5) // the second member's client port
	cl := StartCluster(t, 3)
	for _, m := range cl.Members {
		if m.Port() == taken {
			t.Fatalf("member started on the taken port %d", taken)
		}
	}
	if cl.Leader() == nil {
		t.Fatal("no leader")
	}
}
