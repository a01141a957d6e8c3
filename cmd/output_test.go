package cmd

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

// interleaved is a job that writes n lines to stdout and to stderr in turn, then a long
// run of stdout (about 6 MB), and exits with code; want is what it prints when both
// streams go to one file, in order.
func interleaved(n, code int) (job []string, want []byte) {
	script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo out$i; echo err$i >&2; i=$((i+1)); done; seq 1 800000; exit %d`, n, code)
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "out%d\nerr%d\n", i, i)
	}
	for i := 1; i <= 800000; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	return []string{"sh", "-c", script}, b.Bytes()
}

// runShared runs cronlock with its stdout and stderr on one pipe, as under cron, and
// returns the exit code and everything the pipe carried.
func runShared(t *testing.T, c *cli, args ...string) (int, []byte) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.command(args...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, _ := io.ReadAll(r)
	r.Close()
	return c.exitCode(cmd.Wait()), got
}

func sum(b []byte) string { return fmt.Sprintf("%x (%d bytes)", sha256.Sum256(b), len(b)) }

// TestOutputOnFailureSucceedingJobPrintsNothing: a job that prints 50 MB and succeeds
// leaves cron nothing to mail, and the history still has the tail of its output.
func TestOutputOnFailureSucceedingJobPrintsNothing(t *testing.T) {
	c := newCLI(t, "")
	code, out, stderr := c.run("run", "-k", "quiet", "--output", "on-failure", "--",
		"sh", "-c", "head -c 50000000 /dev/zero; echo 'to stderr' >&2; echo 'the end'")
	if code != 0 || out != "" || stderr != "" {
		t.Fatalf("exit %d, %d bytes on stdout, stderr %q; want 0 and nothing printed", code, len(out), stderr)
	}
	rows := c.history("quiet")
	if len(rows) != 1 || rows[0].Status != "succeeded" {
		t.Fatalf("history: %+v", rows)
	}
	code, show, _ := c.run("history", "show", rows[0].ID)
	if code != 0 || !strings.Contains(show, "the end") || !strings.Contains(show, "to stderr") {
		t.Fatalf("history show: exit %d, %q; want the output tail", code, show)
	}
}

// TestOutputOnFailureFailingJobPrintsEveryByte: a failing job's output comes out whole and
// in order when stdout and stderr share a pipe; to two places, each stream whole. The
// same run with the environment's CRONLOCK_OUTPUT behaves the same.
func TestOutputOnFailureFailingJobPrintsEveryByte(t *testing.T) {
	c := newCLI(t, "")
	job, want := interleaved(3000, 3)
	code, got := runShared(t, c, append([]string{"run", "-k", "loud", "--output", "on-failure", "--"}, job...)...)
	// Then cronlock's line about the run (TestOutputEndLine).
	got, line := cutEndLine(got)
	if code != 3 || !bytes.Equal(got, want) || !strings.HasPrefix(line, "cronlock: loud: failed, exit 3, 1 try, ") {
		t.Fatalf("shared pipe: exit %d, got %s, want %s, then cronlock's line (got %q)", code, sum(got), sum(want), line)
	}

	c.env = append(c.env, "CRONLOCK_OUTPUT=on-failure")
	cmd := c.command(append([]string{"run", "-k", "loud", "--"}, job...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code = c.exitCode(cmd.Run())
	var wantOut, wantErr bytes.Buffer
	for _, line := range strings.SplitAfter(string(want), "\n") {
		if strings.HasPrefix(line, "err") {
			wantErr.WriteString(line)
		} else {
			wantOut.WriteString(line)
		}
	}
	gotErr, line := cutEndLine(errb.Bytes())
	if code != 3 || !bytes.Equal(out.Bytes(), wantOut.Bytes()) || !bytes.Equal(gotErr, wantErr.Bytes()) || line == "" {
		t.Fatalf("two pipes: exit %d, stdout %s (want %s), stderr %s (want %s)", code,
			sum(out.Bytes()), sum(wantOut.Bytes()), sum(gotErr), sum(wantErr.Bytes()))
	}
}

// TestOutputOnFailureTimeoutPrints: a job stopped by --timeout has failed; its output is
// printed, then cronlock's line.
func TestOutputOnFailureTimeoutPrints(t *testing.T) {
	c := newCLI(t, "")
	code, got := runShared(t, c, "run", "-k", "slow", "--output", "on-failure", "--timeout", "1s", "--",
		"sh", "-c", "echo before the timeout; exec sleep 30")
	if code != 124 || !strings.HasPrefix(string(got), "before the timeout\n") || !strings.Contains(string(got), "--timeout") {
		t.Fatalf("exit %d, output %q; want 124, the job's line, then cronlock's", code, got)
	}
}

// TestOutputOnFailureLockLostPrints: a job whose Redis lock is deleted under it is stopped,
// and what it printed comes out.
func TestOutputOnFailureLockLostPrints(t *testing.T) {
	addr := redistest.Addr(t)
	c := newCLI(t, "redis://"+addr+"/0")
	mark := filepath.Join(c.dir, "started")
	cmd := c.command("run", "-k", "lostout", "--ttl", "2s", "--grace", "1s", "--output", "on-failure", "--",
		"sh", "-c", "echo printed before the loss; touch "+mark+"; exec sleep 30")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, mark)
	if n, err := redistest.Do(addr, "DEL", envOf(c.env, "CRONLOCK_PREFIX")+"{lostout}:lock"); err != nil || n != "1" {
		t.Fatalf("deleting the lock: %q, %v", n, err)
	}
	code := c.exitCode(cmd.Wait())
	if code != 125 || out.String() != "printed before the loss\n" || !strings.Contains(errb.String(), "lock was lost") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 125 and the job's line", code, out.String(), errb.String())
	}
}

// spoolFiles lists what cronlock's descriptors point at inside dir.
func spoolFiles(t *testing.T, pid int, dir string) []string {
	t.Helper()
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var out []string
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, dir+"/") {
			out = append(out, l)
		}
	}
	return out
}

// TestOutputOnFailureLeavesNoFile: the spool in $TMPDIR has no name while the run goes on
// (the folder stays empty, cronlock's descriptor points at a deleted file), and nothing is
// left after a normal end or after cronlock is SIGKILLed in the middle of the run.
func TestOutputOnFailureLeavesNoFile(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			c := newCLI(t, "")
			tmp := t.TempDir()
			c.env = append(c.env, "TMPDIR="+tmp)
			mark := filepath.Join(c.dir, "started")
			cmd := c.command("run", "-k", "nofile", "--output", "on-failure", "--",
				"sh", "-c", "seq 1 1000; touch "+mark+"; sleep 2; exit 1")
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			proctest.WaitFile(t, mark)
			files := spoolFiles(t, cmd.Process.Pid, tmp)
			// One spool per destination: stdout is a pipe, stderr the null device.
			for _, f := range files {
				if !strings.HasSuffix(f, " (deleted)") {
					t.Errorf("cronlock's descriptor of %q: want an unnamed file", f)
				}
			}
			if len(files) != 2 {
				t.Errorf("cronlock's descriptors in $TMPDIR: %q; want two spools", files)
			}
			if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
				t.Errorf("$TMPDIR holds %d entries during the run; want none", len(ents))
			}
			if kill {
				cmd.Process.Kill()
			}
			code := c.exitCode(cmd.Wait())
			if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
				t.Errorf("$TMPDIR holds %d entries after the run; want none", len(ents))
			}
			if !kill && (code != 1 || !strings.HasPrefix(out.String(), "1\n2\n")) {
				t.Errorf("exit %d, stdout %q…; want 1 and the job's output", code, out.String()[:min(20, out.Len())])
			}
		})
	}
}

// TestOutputOnFailureMax: beyond --output-max the first and last halves come out with one
// line between them that says how much was dropped.
func TestOutputOnFailureMax(t *testing.T) {
	c := newCLI(t, "")
	var all bytes.Buffer
	for i := 0; all.Len() < 10000; i++ {
		fmt.Fprintf(&all, "line %05d\n", i)
	}
	src := filepath.Join(c.dir, "data")
	if err := os.WriteFile(src, all.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := c.run("run", "-k", "max", "--output", "on-failure", "--output-max", "1000", "--",
		"sh", "-c", "cat "+src+"; exit 2")
	b := all.Bytes()
	want := string(b[:500]) + fmt.Sprintf("cronlock: --output-max 1000: dropped %.1f kB (%d bytes) of the job's output here, between the first 500 and the last 500 bytes\n", float64(len(b)-1000)/1000, len(b)-1000) +
		string(b[len(b)-500:])
	if b[499] != '\n' {
		want = string(b[:500]) + "\n" + want[500:]
	}
	if code != 2 || out != want || !strings.HasPrefix(stderr, "cronlock: max: failed, exit 2, 1 try, ") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, out, want)
	}
}

// TestOutputBadValues: one line and 125.
func TestOutputBadValues(t *testing.T) {
	c := newCLI(t, "")
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"--output", "sometimes"}, want: `"sometimes" is not an output mode`},
		{args: []string{"--output-max", "-1"}, want: `"-1" is not a size`},
		{args: []string{"--output-max", "0"}, want: `keeps nothing`},
		{args: []string{"--output-max", "2TiB"}, want: `not a size`},
		{env: "CRONLOCK_OUTPUT=never", want: `CRONLOCK_OUTPUT`},
	} {
		cmd := c.command(append(append([]string{"run", "-k", "bad"}, tc.args...), "--", "true")...)
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		code := c.exitCode(cmd.Run())
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		if code != 125 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v %s: exit %d, stderr %q; want 125 and one line with %q", tc.args, tc.env, code, errb.String(), tc.want)
		}
	}
}

// TestOutputOnFailureNoSpoolFallsBack: a $TMPDIR where no file can be made: the output is
// printed as it comes, after one warning.
func TestOutputOnFailureNoSpoolFallsBack(t *testing.T) {
	c := newCLI(t, "")
	notDir := filepath.Join(c.dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, "TMPDIR="+notDir)
	code, out, stderr := c.run("run", "-k", "fallback", "--output", "on-failure", "--", "echo", "printed anyway")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 0 || out != "printed anyway\n" || len(lines) != 1 || !strings.Contains(stderr, "warning") || !strings.Contains(stderr, "TMPDIR") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0, the output, one warning", code, out, stderr)
	}
}

// TestOutputOnFailureTerminal: on a terminal, CRONLOCK_OUTPUT=on-failure (meant for cron)
// gives way: the person sees the output; --output on-failure on the command line holds.
func TestOutputOnFailureTerminal(t *testing.T) {
	c := newCLI(t, "")
	for _, tc := range []struct {
		args, env []string
		want      bool
	}{
		{env: []string{"CRONLOCK_OUTPUT=on-failure"}, want: true},
		{args: []string{"--output", "on-failure"}, want: false},
	} {
		m, pts := proctest.OpenPTY(t)
		cmd := c.command(append(append([]string{"run", "-k", "tty"}, tc.args...), "--", "echo", "seen on the terminal")...)
		cmd.Env = append(cmd.Env, tc.env...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		m.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		var got bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if seen := strings.Contains(got.String(), "seen on the terminal"); seen != tc.want {
			t.Errorf("%v %v: terminal got %q; want the output shown: %v", tc.args, tc.env, got.String(), tc.want)
		}
	}
}
