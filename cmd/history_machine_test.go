package cmd

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/internal/proctest"
	"cronlock/jobrun"
	"cronlock/runstatus"
)

// killRun starts `cronlock run ARGS -- sh -c 'echo $$ >pidfile; exec sleep 30'`, lets its
// job start, waits after, and SIGKILLs cronlock: its row stays running (or, in its first
// second, only its claimed per-run file exists).
func killRun(t *testing.T, c *cli, after time.Duration, args ...string) {
	t.Helper()
	pidf := filepath.Join(c.dir, "job.pid")
	os.Remove(pidf)
	cmd := c.command(append(append([]string{"run"}, args...), "--", "sh", "-c", "echo $$ > "+pidf+"; exec sleep 30")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.ReadPID(t, pidf)
	time.Sleep(after)
	cmd.Process.Kill()
	cmd.Wait()
}

// TestAbandonedRunWithCustomNode: a run started with its own --node
// label and killed is found abandoned by the next run and by a reader on the machine,
// whatever label they use, not left running for ever, out of prune's reach.
func TestAbandonedRunWithCustomNode(t *testing.T) {
	for _, after := range []time.Duration{0, jobrun.StartRowDelay + 300*time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			c := newCLI(t, "") // CRONLOCK_NODE=clinode
			killRun(t, c, after, "-k", "kn", "--node", "custom")
			if code, _, errs := c.run("run", "-k", "other", "--", "true"); code != 0 {
				t.Fatalf("next run: exit %d, %s", code, errs)
			}
			// Read the file directly: `history` would reap by itself.
			st, err := history.Open(filepath.Join(c.dir, "history.db"))
			if err != nil {
				t.Fatal(err)
			}
			rows, err := st.List(history.Filter{Key: "kn"})
			st.Close()
			if err != nil || len(rows) != 1 || rows[0].Status != runstatus.Abandoned || rows[0].Node != "custom" {
				t.Fatalf("rows of kn after the next run: %+v, %v; want one abandoned run of node custom", rows, err)
			}

			// A reader under yet another label finds the next one.
			killRun(t, c, after, "-k", "kn2", "--node", "custom2")
			code, out, errs := c.run("history", "--node", "custom2")
			if code != 0 || !strings.Contains(out, "abandoned") || strings.Contains(out, "running") {
				t.Fatalf("history: exit %d, stdout %q, stderr %q; want the run of custom2 abandoned", code, out, errs)
			}
		})
	}
}

// TestReadOnlyHistory: a history the user can read but not write is
// still readable: history, --json, stats and show all work, on a read-only
// mount (even for root) and on a file of another user, with the rows a live writer keeps
// in the -wal and without a -wal. The dead run left by a killed cronlock shows abandoned
// where the reader can tell, without anything written.
func TestReadOnlyHistory(t *testing.T) {
	for _, wal := range []bool{true, false} {
		name := "without-wal"
		if wal {
			name = "with-wal"
		}
		t.Run(name, func(t *testing.T) {
			c := newCLI(t, "")
			// The folders of the file must be reachable by another user.
			for d := c.dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
				os.Chmod(d, 0o755)
			}
			c.run("run", "-k", "ok", "--", "true")
			c.run("run", "-k", "bad", "--", "sh", "-c", "echo out; exit 3")
			killRun(t, c, jobrun.StartRowDelay+300*time.Millisecond, "-k", "dead")
			hist := filepath.Join(c.dir, "history.db")
			if !wal {
				// A writer that closes the file (any history command) checkpoints the -wal
				// away; no reaping, so that the dead run stays running in the file.
				st, err := history.Open(hist)
				if err != nil {
					t.Fatal(err)
				}
				st.Close()
			}
			_, walErr := os.Stat(hist + "-wal")
			if wal != (walErr == nil) {
				t.Fatalf("-wal exists: %v, want %v", walErr == nil, wal)
			}
			id := func() string {
				st, _ := history.Open(hist)
				defer st.Close()
				rows, _ := st.List(history.Filter{Key: "bad"})
				return rows[0].ID
			}()
			// run the readers as wrap says and check what they print.
			check := func(t *testing.T, wrap func(args ...string) *exec.Cmd, seesDead bool) {
				for _, args := range [][]string{{"history"}, {"history", "--json"}, {"history", "stats"}, {"history", "show", id}} {
					cmd := wrap(append([]string{cronlockBin}, args...)...)
					cmd.Env, cmd.Dir = c.env, "/"
					out, err := cmd.CombinedOutput()
					if err != nil || strings.Contains(string(out), "readonly") || strings.Contains(string(out), "cannot") {
						t.Errorf("%v: %v\n%s", args, err, out)
						continue
					}
					if args[len(args)-1] == "history" && (!strings.Contains(string(out), "bad") || !strings.Contains(string(out), "ok")) {
						t.Errorf("%v lacks runs:\n%s", args, out)
					}
					if args[len(args)-1] == "history" && seesDead && !strings.Contains(string(out), "abandoned") {
						t.Errorf("%v: the dead run is not shown abandoned:\n%s", args, out)
					}
				}
			}
			t.Run("read-only-mount", func(t *testing.T) {
				flags := "-m"
				if os.Geteuid() != 0 {
					flags = "-rm" // a user namespace makes us root in it, for mount
				}
				if err := exec.Command("unshare", flags, "true").Run(); err != nil {
					t.Skipf("unshare %s does not work here (%v): no read-only mount to test", flags, err)
				}
				check(t, func(args ...string) *exec.Cmd {
					return exec.Command("unshare", append([]string{flags, "sh", "-c",
						`mount --bind -o ro "$0" "$0" && exec "$@"`, c.dir}, args...)...)
				}, true)
			})
			t.Run("file-of-another-user", func(t *testing.T) {
				files, _ := filepath.Glob(hist + "*")
				for _, f := range files {
					if fi, err := os.Stat(f); err == nil && !fi.IsDir() {
						os.Chmod(f, 0o444)
					}
				}
				if os.Geteuid() != 0 {
					// Permission bits stop this user: a file and folder it may only read.
					os.Chmod(c.dir, 0o555)
					t.Cleanup(func() { os.Chmod(c.dir, 0o755) })
					check(t, func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }, false)
					return
				}
				// Root ignores permission bits: read as nobody, with a copy of the binary
				// that nobody may run.
				nobody, err := user.Lookup("nobody")
				if err != nil {
					t.Skip("no user nobody:", err)
				}
				uid, _ := strconv.Atoi(nobody.Uid)
				gid, _ := strconv.Atoi(nobody.Gid)
				bin := filepath.Join(c.dir, "cronlock-bin")
				b, err := os.ReadFile(cronlockBin)
				if err != nil || os.WriteFile(bin, b, 0o755) != nil {
					t.Fatal(err)
				}
				check(t, func(args ...string) *exec.Cmd {
					cmd := exec.Command(bin, args[1:]...)
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
					return cmd
				}, false)
			})
		})
	}
}
