package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Cluster is a private etcd cluster of several members (plain: no TLS, no users), for
// tests of leader elections.
type Cluster struct {
	Members []*Server
}

// StartCluster launches n members on free loopback ports and waits until each answers;
// they are stopped when the test ends. When a member could not have one of its ports
// (another process took it after FreePort), the whole cluster starts again on new ports:
// every member knows every peer's address from the start.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary(t)
	cl := &Cluster{}
	for range n {
		s := &Server{bin: bin, Dir: t.TempDir(), opts: Options{Prefix: "cronlock:"}, t: t}
		s.log = filepath.Join(s.Dir, "etcd.log")
		t.Cleanup(s.Kill)
		cl.Members = append(cl.Members, s)
	}
	for try := 1; ; try++ {
		var initial []string
		peers := make([]string, n)
		for i := range n {
			peers[i] = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
			initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i]))
		}
		for i, s := range cl.Members {
			s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
			s.args = []string{"--name", fmt.Sprintf("m%d", i), "--data-dir", filepath.Join(s.Dir, "data"),
				"--listen-client-urls", s.Endpoint, "--advertise-client-urls", s.Endpoint,
				"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
				"--logger", "zap", "--log-outputs", s.log}
			s.launch()
		}
		var err error
		for _, s := range cl.Members {
			if err = s.waitReady(cl.Members...); err != nil {
				break
			}
		}
		if err == nil {
			return cl
		}
		if !errors.Is(err, errPortTaken) || try == startTries {
			t.Fatal(err)
		}
		t.Logf("%v; trying other ports", err)
		for _, s := range cl.Members {
			s.fresh()
		}
	}
}

// Endpoints is every member's client URL, comma-separated (CRONLOCK_ETCD_ENDPOINTS).
func (cl *Cluster) Endpoints() string {
	var eps []string
	for _, s := range cl.Members {
		eps = append(eps, s.Endpoint)
	}
	return strings.Join(eps, ",")
}

// Leader is the member that leads now, as its members see it; it fails the test when
// none does within 15s.
func (cl *Cluster) Leader() *Server {
	t := cl.Members[0].t
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range cl.Members {
			if s.cmd == nil {
				continue
			}
			c, err := s.Client(false, "", "")
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.Status(ctx, s.Endpoint)
			cancel()
			c.Close()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no etcd member leads the cluster")
	return nil
}
