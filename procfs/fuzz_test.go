package procfs

import "testing"

// FuzzParseStat feeds ParseStat any bytes. It must not panic, and what follows the last
// ")" alone decides the result: bytes before it (another process's name, say) change
// nothing.
func FuzzParseStat(f *testing.F) {
	for _, seed := range []string{
		statLine("cat", 'R', 960, 78046),
		statLine("a) R 7 8 (b", 'S', 42, 100),
		statLine("a\nb", 'Z', 1, 1<<64-1),
		"1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 7",
		"1 (init) S 0 1 1",
		"1 (init",
		"",
		")",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseStat(b)
		if err != nil {
			if got != (Stat{}) {
				t.Errorf("ParseStat(%q) = %+v with error %v; want the zero Stat", b, got, err)
			}
			return
		}
		// Only the command name, read from the first "(", takes in the prefix.
		again, err := ParseStat(append([]byte("7 (x) R 1 (y) "), b...))
		again.Comm, got.Comm = "", ""
		if err != nil || again != got {
			t.Errorf("with a prefix: %+v, %v; want %+v", again, err, got)
		}
	})
}

// FuzzStatName puts any command name into a stat line as the kernel writes it:
// spaces, ")", newlines and all, the fields must come back.
func FuzzStatName(f *testing.F) {
	f.Add([]byte("cat"), 960, uint64(78046))
	f.Add([]byte("my job"), 1, uint64(0))
	f.Add([]byte(") S 5 6 7 ("), 0, uint64(1<<64-1))
	f.Add([]byte("a\n)\n"), -1, uint64(12))
	f.Add([]byte{}, 42, uint64(100))
	f.Fuzz(func(t *testing.T, comm []byte, ppid int, start uint64) {
		line := statLine(string(comm), 'S', ppid, start)
		got, err := ParseStat([]byte(line))
		if want := (Stat{Comm: string(comm), State: 'S', PPID: ppid, PGRP: 960, StartTime: start}); err != nil || got != want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	})
}
