package cmd

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
	"cronlock/procfs"
	"cronlock/runstatus"
)

// escapee is a shell line that leaves the job's process group late: after delay, a
// TERM-ignoring subshell double-forks a setsid process that ignores SIGTERM too, writes
// its pid to pidf and sleeps for a minute. By then the main child may be gone and the
// first sweep over.
func escapee(delay, pidf string) string {
	return `(trap "" TERM; (sleep ` + delay + `; setsid sh -c 'echo $$ > ` + pidf + `; exec sleep 60' &) & sleep 60) &`
}

// TestLateEscapeeStopped: a process that calls setsid after the main child ended and the
// first sweep ran gets SIGTERM and, ignoring it, SIGKILL after the grace; the run ends.
func TestLateEscapeeStopped(t *testing.T) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "escapee.pid")
	code, _, stderr := c.runWithin(20*time.Second, "run", "-k", "late", "--grace", "1s", "--",
		"sh", "-c", escapee("0.5", pidf)+` sleep 0.1; exit 0`)
	if code != 0 {
		t.Fatalf("exit %d, want the job's 0 (stderr %q)", code, stderr)
	}
	if pid := proctest.ReadPID(t, pidf); !proctest.Dead(pid) {
		t.Fatalf("the late escapee %d outlived the run", pid)
	}
	if rows := c.history("late"); len(rows) != 1 || rows[0].Status != runstatus.Succeeded {
		t.Fatalf("history %+v, want one succeeded run", rows)
	}

	// The first case: with --grace 0 the setsid sleep, found after the group's
	// SIGKILL, is stopped at once.
	code, _, stderr = c.runWithin(15*time.Second, "run", "-k", "late0", "--grace", "0", "--",
		"sh", "-c", `(setsid sh -c 'echo $$ > `+pidf+`0; exec sleep 60' & sleep 60) & sleep 0.3; exit 0`)
	if code != 0 {
		t.Fatalf("--grace 0: exit %d (stderr %q)", code, stderr)
	}
	if pid := proctest.ReadPID(t, pidf+"0"); !proctest.Dead(pid) {
		t.Fatalf("--grace 0: the escapee %d outlived the run", pid)
	}
}

// TestEscapeeStoppedOnTimeout: on a timeout, the setsid process of a TERM-ignoring
// subshell is found while its parent still lives and stopped with the rest, and a job whose
// every process dies on SIGTERM does not wait out the grace.
func TestEscapeeStoppedOnTimeout(t *testing.T) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "escapee.pid")
	code, _, stderr := c.runWithin(20*time.Second, "run", "-k", "esc", "--timeout", "1s", "--grace", "1s", "--",
		"sh", "-c", escapee("0", pidf)+` wait`)
	if code != 124 {
		t.Fatalf("exit %d, want 124 (stderr %q)", code, stderr)
	}
	if pid := proctest.ReadPID(t, pidf); !proctest.Dead(pid) {
		t.Fatalf("the escapee %d outlived the run", pid)
	}
	// Everything dies on SIGTERM: the run ends long before the grace of a minute.
	code, _, stderr = c.runWithin(20*time.Second, "run", "-k", "esc2", "--timeout", "500ms", "--grace", "60s", "--",
		"sh", "-c", `setsid sh -c 'echo $$ > `+pidf+`2; exec sleep 60' & sleep 60 & wait`)
	if code != 124 {
		t.Fatalf("all die on TERM: exit %d (stderr %q)", code, stderr)
	}
	if pid := proctest.ReadPID(t, pidf+"2"); !proctest.Dead(pid) {
		t.Fatalf("all die on TERM: the escapee %d outlived the run", pid)
	}
}

// TestEscapeeStoppedOnLockLoss: the lock is deleted under a job with a TERM-ignoring
// setsid process; cronlock stops the whole job, the escapee included, before it exits
// (which it does before the lease would have ended), and another host then runs.
func TestEscapeeStoppedOnLockLoss(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr+"/0")
	pidf := filepath.Join(c.dir, "escapee.pid")
	holder := c.command("run", "-k", "lost", "--ttl", "2s", "--grace", "1s", "--",
		"sh", "-c", escapee("0", pidf)+` wait`)
	var errb bytes.Buffer
	holder.Stderr = &errb
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, pidf)
	if n, err := redistest.Do(addr, "DEL", envOf(c.env, "CRONLOCK_PREFIX")+"{lost}:lock"); err != nil || n != "1" {
		t.Fatalf("deleting the lock: %q, %v", n, err)
	}
	err := holder.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("holder ended with %v, want 125 (stderr %q)", err, errb.String())
	}
	if !proctest.Dead(pid) {
		t.Fatalf("the escapee %d outlived the holder that lost its lock", pid)
	}
	code, out, stderr := c.run("run", "--node", "hostB", "-k", "lost", "--", "echo", "hostB runs")
	if code != 0 || out != "hostB runs\n" {
		t.Fatalf("hostB: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestStopSignalContinuesAStoppedJob: SIGTERM forwarded to a job someone stopped with
// SIGSTOP is followed by SIGCONT, so its cleanup runs instead of waiting for SIGKILL.
func TestStopSignalContinuesAStoppedJob(t *testing.T) {
	c := newCLI(t, "")
	pidf := filepath.Join(c.dir, "job.pid")
	cmd := c.command("run", "-k", "stopped", "--grace", "10s", "--", "sh", "-c",
		`trap "echo cleanup-ran; exit 0" TERM; echo $$ > `+pidf+`; sleep 100 & wait`)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := proctest.ReadPID(t, pidf)
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, err := procfs.ReadStat(pid); err == nil && st.State == 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job %d did not stop on SIGSTOP", pid)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+15 {
		t.Fatalf("cronlock ended with %v, want 143", err)
	}
	if out.String() != "cleanup-ran\n" {
		t.Fatalf("stdout %q: the stopped job never ran its SIGTERM trap", out.String())
	}
	if rows := c.history("stopped"); len(rows) != 1 || rows[0].Signal != nil || rows[0].ExitCode == nil || *rows[0].ExitCode != 0 {
		t.Fatalf("history %+v, want the job's own exit 0 after its cleanup", rows)
	}
}

// TestCtrlZSuspendsAndFgResumes drives an interactive bash on a pseudo-terminal: Ctrl-Z
// on a job that reads the terminal gives the prompt back with cronlock stopped, `fg`
// resumes both and the job reads its line; a job started with & that reads the terminal
// stops, and `fg` brings it back the same way.
func TestCtrlZSuspendsAndFgResumes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to drive job control: %v", err)
	}
	c := newCLI(t, "")
	m, pts := proctest.OpenPTY(t)
	sh := exec.Command(bash, "--norc", "--noprofile", "-i")
	sh.Env = append(c.env, "PS1=PROMPT$ ", "PATH="+filepath.Dir(cronlockBin)+":"+os.Getenv("PATH"))
	sh.Dir = c.dir
	sh.Stdin, sh.Stdout, sh.Stderr = pts, pts, pts
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	defer func() { sh.Process.Kill(); sh.Wait() }()
	term := &ptyReader{t: t, m: m}
	term.waitFor("PROMPT$ ", "the first prompt")

	term.send("cronlock run -k cz -- sh -c 'read x; echo got-$x'\n")
	time.Sleep(300 * time.Millisecond) // the job is reading by now
	term.send("\x1a")
	term.waitFor("Stopped", "bash reporting the job stopped after Ctrl-Z")
	term.waitFor("PROMPT$ ", "the prompt after Ctrl-Z")
	term.send("fg\n")
	time.Sleep(300 * time.Millisecond)
	term.send("hello\n")
	term.waitFor("got-hello", "the job reading its line after fg")
	term.send("echo rc=$?\n")
	term.waitFor("rc=0", "cronlock's exit after fg")

	term.send("cronlock run -k bg -- sh -c 'read x; echo got-$x' &\n")
	term.waitFor("PROMPT$ ", "the prompt after &")
	time.Sleep(300 * time.Millisecond)
	// The job stops once it reads the terminal, which on a loaded machine may take a while.
	for i := 0; ; i++ {
		term.send("jobs\n")
		seen := term.waitFor("PROMPT$ ", "the prompt after jobs")
		if strings.Contains(seen, "Stopped") {
			break
		}
		if i == 300 { // a minute: the whole suite under -race loads two cores for minutes
			ps, _ := exec.Command("ps", "-o", "pid,ppid,pgid,stat,wchan:20,args", "-s", strconv.Itoa(sh.Process.Pid)).CombinedOutput()
			t.Fatalf("the background job that reads the terminal never stopped: jobs shows %q; its session:\n%s", seen, ps)
		}
	}
	term.send("fg\n")
	time.Sleep(300 * time.Millisecond)
	term.send("again\n")
	term.waitFor("got-again", "the job reading its line after fg")
	term.send("echo rc=$?\n")
	term.waitFor("rc=0", "cronlock's exit after fg")

	for _, key := range []string{"cz", "bg"} {
		if rows := c.history(key); len(rows) != 1 || rows[0].Status != runstatus.Succeeded {
			t.Fatalf("history of %s: %+v, want one succeeded run", key, rows)
		}
	}
}

// ptyReader reads what a pseudo-terminal shows, from the point the last wait matched.
type ptyReader struct {
	t   *testing.T
	m   *os.File
	buf []byte
}

// send types s. A pause before it lets bash settle at its prompt first: input typed
// while readline sets the terminal up can be lost, as it can for a person.
func (p *ptyReader) send(s string) {
	time.Sleep(200 * time.Millisecond)
	if _, err := p.m.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor reads until the terminal shows want, and returns and forgets what came before it.
func (p *ptyReader) waitFor(want, what string) string {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	b := make([]byte, 4096)
	for time.Now().Before(deadline) {
		if i := bytes.Index(p.buf, []byte(want)); i >= 0 {
			before := string(p.buf[:i])
			p.buf = p.buf[i+len(want):]
			return before
		}
		p.m.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, _ := p.m.Read(b)
		p.buf = append(p.buf, b[:n]...)
	}
	p.t.Fatalf("waiting for %s: the terminal shows %q", what, p.buf)
	return ""
}
