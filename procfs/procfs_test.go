package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// statLine is a /proc/PID/stat line as the kernel writes it (52 fields), with the given
// command name, state, parent pid and start time.
func statLine(comm string, state byte, ppid int, start uint64) string {
	return fmt.Sprintf("962 (%s) %c %d 960 22816 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 %d 3133440 411 "+
		"18446744073709551615 94824800235520 94824800255401 140728009794528 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 "+
		"94824800271408 94824800273024 94825403777024 140728009800191 140728009800211 140728009800211 "+
		"140728009801707 0\n", comm, state, ppid, start)
}

// st is a Stat, in the order of its fields in the file.
func st(comm string, state byte, ppid, pgrp int, start uint64) Stat {
	return Stat{Comm: comm, State: state, PPID: ppid, PGRP: pgrp, StartTime: start}
}

func TestParseStat(t *testing.T) {
	// Fields 3 to 22 only: the shortest line ParseStat takes.
	short := "1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 7"
	tests := []struct {
		name string
		in   string
		want Stat
		ok   bool
	}{
		{"plain", statLine("cat", 'R', 960, 78046), st("cat", 'R', 960, 960, 78046), true},
		{"no trailing newline", strings.TrimSuffix(statLine("cat", 'S', 1, 5), "\n"), st("cat", 'S', 1, 960, 5), true},
		{"fields 3 to 22 only", short, st("init", 'S', 0, 1, 7), true},
		{"space in the name", statLine("my job", 'S', 42, 100), st("my job", 'S', 42, 960, 100), true},
		{"parenthesis in the name", statLine("a) R 7 8 (b", 'S', 42, 100), st("a) R 7 8 (b", 'S', 42, 960, 100), true},
		{"name of closing parentheses", statLine(")))", 'Z', 3, 9), st(")))", 'Z', 3, 960, 9), true},
		{"newline in the name", statLine("a\nb) S 9\n", 'D', 42, 100), st("a\nb) S 9\n", 'D', 42, 960, 100), true},
		{"empty name", statLine("", 'T', 42, 100), st("", 'T', 42, 960, 100), true},
		{"largest start time", statLine("x", 'S', 1, 1<<64-1), st("x", 'S', 1, 960, 1<<64-1), true},
		{"tabs between fields", strings.ReplaceAll(short, " ", "\t"), st("init", 'S', 0, 1, 7), true},

		{"empty", "", Stat{}, false},
		{"no closing parenthesis", "1 (init S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 7", Stat{}, false},
		{"nothing after the name", "1 (init)", Stat{}, false},
		{"ends before field 22", strings.TrimSuffix(short, " 7"), Stat{}, false},
		{"cut in the middle", statLine("cat", 'R', 960, 78046)[:40], Stat{}, false},
		{"parent pid not a number", strings.Replace(short, "S 0 ", "S x ", 1), Stat{}, false},
		{"process group not a number", strings.Replace(short, "S 0 1 ", "S 0 y ", 1), Stat{}, false},
		{"start time not a number", short[:len(short)-1] + "-7", Stat{}, false},
		{"start time too large", strings.Replace(short, " 7", " 18446744073709551616", 1), Stat{}, false},
		{"last parenthesis after the fields", short + " (x)", Stat{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseStat(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestReadStatSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// The state is the main thread's, which need not be the one reading.
	if st.PPID != os.Getppid() || st.StartTime == 0 || !strings.ContainsRune("RSD", rune(st.State)) {
		t.Errorf("ReadStat(self) = %+v; want state R, S or D, parent %d and a start time", st, os.Getppid())
	}
	// A process started later has a start at least as late.
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	child, err := ReadStat(cmd.Process.Pid)
	if err != nil || child.PPID != os.Getpid() || child.StartTime < st.StartTime {
		t.Errorf("ReadStat(child) = %+v, %v; want parent %d and a start of at least %d", child, err, os.Getpid(), st.StartTime)
	}
}

func TestReadStatMissing(t *testing.T) {
	if st, err := ReadStat(-1); err == nil {
		t.Errorf("ReadStat(-1) = %+v, nil; want an error", st)
	}
}

func TestParseBootID(t *testing.T) {
	want := []byte{0x83, 0xbf, 0xbe, 0xe0, 0x7f, 0xe0, 0x42, 0xe2, 0xaf, 0x12, 0x49, 0x48, 0x9b, 0x74, 0x58, 0xf3}
	tests := []struct {
		in   string
		want []byte
	}{
		{"83bfbee0-7fe0-42e2-af12-49489b7458f3\n", want},
		{"83bfbee0-7fe0-42e2-af12-49489b7458f3", want},
		{"83BFBEE0-7FE0-42E2-AF12-49489B7458F3\n", want},
		{"", nil},
		{"\n", nil},
		{"83bfbee0-7fe0-42e2-af12-49489b7458\n", nil},     // short
		{"83bfbee0-7fe0-42e2-af12-49489b7458f3aa\n", nil}, // long
		{"83bfbee0-7fe0-42e2-af12-49489b7458fz\n", nil},   // not hex
	}
	for _, tt := range tests {
		if got := parseBootID([]byte(tt.in)); !bytes.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("parseBootID(%q) = %x; want %x", tt.in, got, tt.want)
		}
	}
}

func TestBootID(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		if BootID() != nil {
			t.Errorf("BootID() = %x without a boot_id file", BootID())
		}
		t.Skipf("no boot id: %v", err)
	}
	id := BootID()
	if len(id) != 16 || !bytes.Equal(id, parseBootID(b)) || !bytes.Equal(BootID(), id) {
		t.Errorf("BootID() = %x; want the 16 bytes of %q", id, b)
	}
}

// TestChildren lists the children of a shell that started one background process: the
// shell has one thread, so its main thread's children file lists it.
func TestChildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	sleepPID, aerr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || aerr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no pid from the shell: %q, %v, %v", line, err, aerr)
	}
	defer func() {
		_ = exec.Command("kill", strconv.Itoa(sleepPID)).Run()
		cmd.Wait()
	}()
	sh := cmd.Process.Pid
	want := []int{sleepPID}
	if got := Children(sh); !slices.Equal(got, want) {
		t.Errorf("Children(shell) = %v; want %v", got, want)
	}
	if got := childrenByStat(sh); !slices.Equal(got, want) {
		t.Errorf("childrenByStat(shell) = %v; want %v", got, want)
	}
	if got := Children(sleepPID); got != nil {
		t.Errorf("Children(sleep) = %v; want none", got)
	}
	if got := Children(-1); got != nil {
		t.Errorf("Children(-1) = %v; want none", got)
	}
}

func TestReadSmall(t *testing.T) {
	path := t.TempDir() + "/f"
	content := bytes.Repeat([]byte("12345 "), 1000)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 100, len(content), len(content) + 1, 8192} {
		got, err := readSmall(path, make([]byte, size))
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("readSmall with a %d-byte buffer = %d bytes, %v; want the %d bytes", size, len(got), err, len(content))
		}
	}
	if _, err := readSmall(path+".missing", make([]byte, 10)); err == nil {
		t.Error("readSmall of a missing file: no error")
	}
}

// TestDescendants walks a shell's tree: a background sleep, and a subshell with a sleep of
// its own; a skipped process takes its subtree with it.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sleep 30 & echo $!; (sleep 31 & echo $!; wait) & echo $!; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = exec.Command("pkill", "-KILL", "-s", "0", "-P", strconv.Itoa(cmd.Process.Pid)).Run()
		_ = cmd.Process.Kill()
		cmd.Wait()
	}()
	r := bufio.NewReader(out)
	var pids []int
	for range 3 {
		line, err := r.ReadString('\n')
		n, aerr := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || aerr != nil {
			t.Fatalf("no pid from the shell: %q, %v, %v", line, err, aerr)
		}
		pids = append(pids, n)
	}
	defer exec.Command("kill", strconv.Itoa(pids[0]), strconv.Itoa(pids[1]), strconv.Itoa(pids[2])).Run()
	sh := cmd.Process.Pid
	// The subshell is the one of the three whose parent is the shell and that has a child.
	var sub int
	for _, p := range pids {
		if st, err := ReadStat(p); err == nil && st.PPID == sh && len(Children(p)) > 0 {
			sub = p
		}
	}
	if sub == 0 {
		t.Fatalf("no subshell among %v", pids)
	}
	sorted := func(s []int) []int { s = slices.Clone(s); slices.Sort(s); return s }
	if got, want := sorted(Descendants([]int{sh}, nil)), sorted(pids); !slices.Equal(got, want) {
		t.Errorf("Descendants(shell) = %v; want %v", got, want)
	}
	var below []int
	for _, p := range pids {
		if st, err := ReadStat(p); err == nil && st.PPID == sh && p != sub {
			below = append(below, p)
		}
	}
	got := Descendants([]int{sh}, func(pid int) bool { return pid == sub })
	if !slices.Equal(sorted(got), sorted(below)) {
		t.Errorf("Descendants(shell) without the subshell = %v; want %v", got, below)
	}
	if got := sorted(parents()[sh]); !slices.Equal(got, sorted(append(below, sub))) {
		t.Errorf("parents()[shell] = %v; want %v", got, append(below, sub))
	}
	if got := Descendants([]int{-1}, nil); got != nil {
		t.Errorf("Descendants(-1) = %v; want none", got)
	}
}
