package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistoryOnFullDiskWarnsOncePerHour: a history on a full file system costs each run
// its row but never the job, and the warning comes once (cron would mail every run's
// stderr), although each run's error names its own run.
func TestHistoryOnFullDiskWarnsOncePerHour(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a small tmpfs to fill")
	}
	c := newCLI(t, "")
	mnt := filepath.Join(c.dir, "small")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	c.env = append(c.env, "CRONLOCK_HISTORY="+filepath.Join(mnt, "h.db"))
	if code, _, errs := c.run("run", "-k", "full", "--", "true"); code != 0 || errs != "" {
		t.Fatalf("first run: exit %d, stderr %q", code, errs)
	}
	fill(t, filepath.Join(mnt, "filler"))
	for i := range 3 {
		code, out, errs := c.run("run", "-k", "full", "--", "sh", "-c", "seq 1 5000 | tail -1")
		if code != 0 || out != "5000\n" {
			t.Fatalf("run %d on a full disk: exit %d, stdout %q: the job must run as usual", i+1, code, out)
		}
		switch {
		case i == 0 && (strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "cannot record this run") || !strings.Contains(errs, "full")):
			t.Fatalf("first run on a full disk: stderr %q, want one warning that the disk is full", errs)
		case i > 0 && errs != "":
			t.Fatalf("run %d on a full disk within the hour: stderr %q, want nothing", i+1, errs)
		}
	}
}

// fill writes path until its file system has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}
