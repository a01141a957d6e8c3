package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
)

// ckptRow is the part of a `history --json` line the checkpoint tests read.
type ckptRow struct {
	ID                 string  `json:"id"`
	Status             string  `json:"status"`
	Checkpoint         *string `json:"checkpoint"`
	CheckpointEncoding *string `json:"checkpoint_encoding"`
	CheckpointAt       *string `json:"checkpoint_at"`
}

// ckptRows is `history --json --key key`, newest first, and the raw lines.
func ckptRows(t *testing.T, c *cli, key string) ([]ckptRow, string) {
	t.Helper()
	code, out, errs := c.run("history", "--json", "--limit", "0", "--key", key)
	if code != 0 {
		t.Fatalf("history --json: exit %d, %s", code, errs)
	}
	var rows []ckptRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r ckptRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("history --json line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows, out
}

// showOf is `history show ID`'s output.
func showOf(t *testing.T, c *cli, id string) string {
	t.Helper()
	code, out, errs := c.run("history", "show", id)
	if code != 0 {
		t.Fatalf("history show %s: exit %d, %s", id, code, errs)
	}
	return out
}

// checkpointLine is the "checkpoint:" line of a history show output.
func checkpointLine(t *testing.T, show string) string {
	t.Helper()
	for _, l := range strings.Split(show, "\n") {
		if strings.HasPrefix(l, "checkpoint:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "checkpoint:"))
		}
	}
	t.Fatalf("history show has no checkpoint line:\n%s", show)
	return ""
}

// A run's last checkpoint is in its history: history show has its size and value,
// --json the value and its encoding; a run that saved none shows none (and nulls).
func TestHistoryShowsLastCheckpoint(t *testing.T) {
	for _, backend := range ckptBackends {
		t.Run(backend, func(t *testing.T) {
			c, _ := ckptCLI(t, backend)
			code, _, errs := c.run("run", "-k", "hk", "--", "sh", "-c",
				`"$CL" checkpoint save batch-1 && "$CL" checkpoint save batch-3`)
			if code != 0 {
				t.Fatalf("run: exit %d, %s", code, errs)
			}
			if code, _, errs := c.run("run", "-k", "hk", "--", "true"); code != 0 {
				t.Fatalf("run without checkpoints: exit %d, %s", code, errs)
			}
			rows, raw := ckptRows(t, c, "hk")
			if len(rows) != 2 {
				t.Fatalf("%d rows, want 2:\n%s", len(rows), raw)
			}
			none, saved := rows[0], rows[1]
			if value(saved.Checkpoint) != "batch-3" || value(saved.CheckpointEncoding) != "utf-8" || saved.CheckpointAt == nil {
				t.Errorf("--json of the run that saved: checkpoint %s (%s) at %v; want batch-3 (utf-8) with a time:\n%s",
					value(saved.Checkpoint), value(saved.CheckpointEncoding), saved.CheckpointAt, raw)
			}
			if none.Checkpoint != nil || none.CheckpointEncoding != nil || none.CheckpointAt != nil ||
				!strings.Contains(raw, `"checkpoint":null`) {
				t.Errorf("--json of the run without checkpoints: want checkpoint null:\n%s", raw)
			}
			if l := checkpointLine(t, showOf(t, c, saved.ID)); !strings.HasPrefix(l, "7 bytes, saved ") || !strings.HasSuffix(l, ": batch-3") {
				t.Errorf("history show of the run that saved: checkpoint line %q; want its size, time and batch-3", l)
			}
			if l := checkpointLine(t, showOf(t, c, none.ID)); l != "none" {
				t.Errorf("history show of the run without checkpoints: checkpoint line %q, want none", l)
			}
		})
	}
}

// A checkpoint's control bytes never reach the terminal: history show escapes them as it
// escapes output; --json escapes them in the string. A value that is not UTF-8 is base64
// in --json, marked so by checkpoint_encoding.
func TestHistoryCheckpointEscaped(t *testing.T) {
	c, _ := ckptCLI(t, "local")
	code, _, errs := c.run("run", "-k", "esc", "--", "sh", "-c",
		`printf 'a\033]0;owned\007\033[2Jb\302\233c' | "$CL" checkpoint save -`)
	if code != 0 {
		t.Fatalf("run: exit %d, %s", code, errs)
	}
	code, _, errs = c.run("run", "-k", "esc", "--", "sh", "-c", `printf '\377\000x' | "$CL" checkpoint save -`)
	if code != 0 {
		t.Fatalf("run: exit %d, %s", code, errs)
	}
	rows, raw := ckptRows(t, c, "esc")
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(rows), raw)
	}
	if strings.ContainsAny(raw, "\x1b\x07\u009b") {
		t.Errorf("history --json printed raw control bytes: %q", raw)
	}
	if v := value(rows[1].Checkpoint); v != "a\x1b]0;owned\x07\x1b[2Jb\u009bc" || value(rows[1].CheckpointEncoding) != "utf-8" {
		t.Errorf("--json checkpoint %q (%s); want the value as saved, utf-8", v, value(rows[1].CheckpointEncoding))
	}
	if v := value(rows[0].Checkpoint); v != "/wB4" || value(rows[0].CheckpointEncoding) != "base64" {
		t.Errorf("--json checkpoint of a binary value %q (%s); want /wB4 (base64)", v, value(rows[0].CheckpointEncoding))
	}
	show := showOf(t, c, rows[1].ID)
	if strings.ContainsAny(show, "\x1b\x07\u009b") {
		t.Errorf("history show printed raw control bytes: %q", show)
	}
	if l := checkpointLine(t, show); !strings.HasSuffix(l, `: a\x1b]0;owned\a\x1b[2Jb\u009bc`) {
		t.Errorf("history show checkpoint line %q; want the value escaped", l)
	}
	if l := checkpointLine(t, showOf(t, c, rows[0].ID)); !strings.HasPrefix(l, "3 bytes, saved ") || !strings.HasSuffix(l, `: \xff\x00x`) {
		t.Errorf("history show checkpoint line %q; want 3 bytes, escaped", l)
	}
}

// The history has a running run's checkpoint while it runs, not only once it ends: a
// cronlock killed mid-run leaves its last checkpoint in its (abandoned) row.
func TestHistoryCheckpointWhileRunning(t *testing.T) {
	c, _ := ckptCLI(t, "local")
	stop, next := filepath.Join(c.dir, "stop"), filepath.Join(c.dir, "next")
	cmd := c.command("run", "-k", "live", "--", "sh", "-c", `"$CL" checkpoint save batch-1 &&
while [ ! -e "$NEXT" ]; do sleep 0.05; done; "$CL" checkpoint save batch-2 &&
while [ ! -e "$STOP" ]; do sleep 0.05; done`)
	cmd.Env = append(cmd.Env, "STOP="+stop, "NEXT="+next)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(stop, nil, 0o600)
		cmd.Wait()
	}()
	var rows []ckptRow
	waitUntil(t, 30*time.Second, "the running row with its checkpoint", func() bool {
		rows, _ = ckptRows(t, c, "live")
		return len(rows) == 1 && rows[0].Status == "running" && value(rows[0].Checkpoint) == "batch-1"
	})
	// A save once the row is there is written at once, not at the run's end.
	os.WriteFile(next, nil, 0o600)
	waitUntil(t, 30*time.Second, "the running row with the next checkpoint", func() bool {
		rows, _ = ckptRows(t, c, "live")
		return len(rows) == 1 && rows[0].Status == "running" && value(rows[0].Checkpoint) == "batch-2"
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	os.WriteFile(stop, nil, 0o600)
	rows, raw := ckptRows(t, c, "live")
	if len(rows) != 1 || rows[0].Status != "abandoned" || value(rows[0].Checkpoint) != "batch-2" {
		t.Fatalf("after cronlock was killed: %s; want the abandoned run with batch-2", raw)
	}
}

// The fleet's ledger has the first 96 bytes of each run's last checkpoint, carried by the
// release at no round trip of its own (the run's turns on the wire are those of the same
// run on main: acquire, the saves, the succeeded mark, the release); a run without
// checkpoints has none.
func TestFleetEntryHasCheckpointStart(t *testing.T) {
	srv := redistest.Start(t)
	p, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := newCLI(t, "redis://"+p.Addr+"/0")
	c.env = append(c.env, "CL="+cronlockBin)
	long := strings.Repeat("0123456789abcdef", 10) // 160 bytes
	for i, key := range []string{"warm", "fk"} {
		before := len(p.Turns())
		cmd := c.command("run", "-k", key, "--", "sh", "-c", `"$CL" checkpoint save first && "$CL" checkpoint save "$LONG"`)
		cmd.Env = append(cmd.Env, "LONG="+long)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run: %v, %s", err, out)
		}
		got := strings.Join(turnCommands(t, p.Turns()[before:]), " | ")
		if want := "EVALSHA | EVALSHA | EVALSHA | EVALSHA | EVALSHA"; i == 1 && got != want {
			t.Errorf("a run that saved twice sent the turns %q, want %q", got, want)
		}
	}
	if code, _, errs := c.run("run", "-k", "fk", "--", "true"); code != 0 {
		t.Fatalf("run without checkpoints: exit %d, %s", code, errs)
	}
	code, out, errs := c.run("history", "--fleet", "--json", "--limit", "0", "--key", "fk")
	if code != 0 {
		t.Fatalf("history --fleet --json: exit %d, %s", code, errs)
	}
	var got []ckptRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r ckptRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, r)
	}
	if len(got) != 2 {
		t.Fatalf("%d ledger entries, want 2:\n%s", len(got), out)
	}
	// Newest first: the run without checkpoints, then the one that saved.
	if got[0].Checkpoint != nil {
		t.Errorf("entry of the run without checkpoints has checkpoint %q:\n%s", value(got[0].Checkpoint), out)
	}
	if v := value(got[1].Checkpoint); v != long[:96] || value(got[1].CheckpointEncoding) != "utf-8" {
		t.Errorf("entry checkpoint %q (%s); want the first 96 bytes %q:\n%s", v, value(got[1].CheckpointEncoding), long[:96], out)
	}
	code, out, errs = c.run("history", "--fleet", "--key", "fk")
	if code != 0 || !strings.Contains(out, `checkpoint "0123456789`) {
		t.Errorf("history --fleet: exit %d, %s%s; want the checkpoint in the note", code, out, errs)
	}
}
