//go:build etcd

package cmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cronlock/internal/etcdtest"
)

// TestEtcdNemesisLedger: two hosts run a short job in a loop on one key of a 3-member
// etcd cluster while a nemesis breaks the cluster for a few seconds: the leader killed
// (then restarted), the leader frozen (SIGSTOP, then SIGCONT), or two members killed (the
// quorum lost, then both restarted). A release, and the retry of its completion, that
// meet the fault keep the completion in the host's history; the host's next run of the
// key completes it in its own release's transaction. Afterwards every run that claimed is
// completed in the fleet's record (settleLedger), and a referee (a kernel flock that each
// job holds) sees no two jobs at once.
func TestEtcdNemesisLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("breaks an etcd cluster under running jobs")
	}
	for _, nemesis := range []string{"leader-kill", "member-stop", "quorum-loss"} {
		t.Run(nemesis, func(t *testing.T) { etcdNemesis(t, nemesis) })
	}
}

func etcdNemesis(t *testing.T, nemesis string) {
	cl := etcdtest.StartCluster(t, 3)
	var hosts []*cli
	for h := range 2 {
		c := newCLI(t, "")
		c.env = append(c.env, "CRONLOCK_BACKEND=etcd", "CRONLOCK_ETCD_ENDPOINTS="+cl.Endpoints(), fmt.Sprintf("CRONLOCK_NODE=host%d", h))
		hosts = append(hosts, c)
	}
	referee, overlaps := filepath.Join(hosts[0].dir, "referee"), filepath.Join(hosts[0].dir, "overlaps")
	job := []string{"sh", "-c", "exec 9>>" + referee + "; flock -n 9 || echo overlap >>" + overlaps + "; sleep 0.2"}
	var healed atomic.Bool
	var after, ran atomic.Int32 // runs that succeeded after the cluster healed; in all
	var mu sync.Mutex
	var bad []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmd := h.command(append([]string{"run", "-k", "nem", "--ttl", "3s", "--redis-timeout", "500ms", "--grace", "300ms",
					"--conflict-exit-code", "99", "--"}, job...)...)
				var errb strings.Builder
				cmd.Stderr = &errb
				// Not h.exitCode: it may end the test, which only the test's goroutine can.
				code := 0
				if err := cmd.Run(); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						code = -1
					} else {
						code = ee.ExitCode()
					}
				}
				switch {
				case code == 0:
					ran.Add(1)
					if healed.Load() {
						after.Add(1)
					}
				case code == 99, code == 125: // skipped; no quorum to take the lock, or lost
				default:
					mu.Lock()
					bad = append(bad, fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(errb.String())))
					mu.Unlock()
				}
				time.Sleep(30 * time.Millisecond)
			}
		}()
	}
	waitUntil(t, 20*time.Second, "runs before the fault", func() bool { return ran.Load() >= 3 })
	// A run of a key of its own whose job ends as the fault begins: its release meets the
	// fault for certain (with the quorum lost it cannot be written).
	holder, herr, release := hosts[0].startHolding([]string{"run", "-k", "nemhold", "--ttl", "9s", "--redis-timeout", "500ms"})
	leader := cl.Leader()
	defer release()
	switch nemesis {
	case "leader-kill":
		leader.Kill()
		release()
		time.Sleep(3 * time.Second) // the fault's length, not a wait for a state
		leader.Restart()
	case "member-stop":
		leader.Stop()
		release()
		time.Sleep(3 * time.Second)
		leader.Cont()
	case "quorum-loss":
		var down []*etcdtest.Server
		for _, m := range cl.Members {
			if m != leader && len(down) < 1 {
				down = append(down, m)
			}
		}
		down = append(down, leader)
		for _, m := range down {
			m.Kill()
		}
		release()
		time.Sleep(3 * time.Second)
		for _, m := range down {
			m.Restart()
		}
	}
	if err := holder.Wait(); err != nil {
		t.Errorf("the run whose release met the fault: %v (%s); want exit 0, whatever became of its completion", err, herr.String())
	}
	kept := keptCompletions(t, hosts[0], "nemhold")
	if nemesis == "quorum-loss" && kept != 1 {
		t.Errorf("%d completions kept after a release without a quorum; want that run's", kept)
	}
	healed.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for after.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if after.Load() < 3 {
		t.Errorf("only %d runs succeeded in the 30s after the cluster healed", after.Load())
	}
	if len(bad) > 0 {
		t.Errorf("%d runs ended otherwise than 0, 99 or 125, e.g.:\n%s", len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
	if b, err := os.ReadFile(overlaps); err == nil {
		t.Errorf("the referee saw %d overlaps", strings.Count(string(b), "overlap"))
	}
	t.Logf("%s: %d runs succeeded, %d after the cluster healed; the run whose release met the fault kept %d completion", nemesis, ran.Load(), after.Load(), kept)
	m := newCLI(t, "")
	m.env = append(m.env, "CRONLOCK_BACKEND=etcd", "CRONLOCK_ETCD_ENDPOINTS="+cl.Endpoints(), "CRONLOCK_HISTORY=off", prefixOf(hosts[0]))
	settleLedger(t, hosts, m, []string{"nem", "nemhold"}, ledgerExpect{settle: []string{"--redis-timeout", "2s"}})
}
