// Package procfs reads the few facts cronlock needs from Linux's /proc, and is the one
// place that knows the format of those files: a process's state, parent and start time
// (/proc/PID/stat), the children of a process (/proc/PID/task/PID/children), the id of
// the running boot (/proc/sys/kernel/random/boot_id), the flock(2) locks of /proc/locks,
// and the deleted files a process still has open (/proc/PID/fd).
package procfs

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Stat holds the fields of /proc/PID/stat that cronlock uses.
type Stat struct {
	Comm      string // field 2: the command name, without its parentheses
	State     byte   // field 3: 'R' running, 'S' sleeping, 'T' stopped, 'Z' zombie (exited, not yet reaped)…
	PPID      int    // field 4: the parent's pid
	PGRP      int    // field 5: the process group
	StartTime uint64 // field 22: when the process started, in clock ticks after boot
}

// ReadStat reads and parses /proc/PID/stat. With the boot id, StartTime names one
// process: a pid reused later has a later start.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat parses the content of a /proc/PID/stat file. The command name (field 2, in
// parentheses) may hold any byte, spaces, ")" and newlines included, but no later field
// can hold a ")": the fields are read after the last one. It fails on a line that ends
// before field 22 or whose parent pid, process group or start time is not a number.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("procfs: stat: no \")\" after the command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (starttime).
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("procfs: stat: %d fields after the command name, want at least 20", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: stat: parent pid: %w", err)
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: stat: process group: %w", err)
	}
	var comm string
	if j := bytes.IndexByte(b, '('); j >= 0 && j < i {
		comm = string(b[j+1 : i])
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: stat: start time: %w", err)
	}
	return Stat{Comm: comm, State: f[0][0], PPID: ppid, PGRP: pgrp, StartTime: start}, nil
}

// BootID returns the 16 bytes of this boot's id (/proc/sys/kernel/random/boot_id), or nil
// where there is none. It reads the file once per process; callers must not modify the
// bytes. A process recorded under another boot id is gone, whatever its pid.
func BootID() []byte { return bootID() }

var bootID = sync.OnceValue(func() []byte {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return nil
	}
	return parseBootID(b)
})

// parseBootID turns the boot_id file's text (a UUID and a newline) into its 16 bytes, or
// nil.
func parseBootID(b []byte) []byte {
	id, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err != nil || len(id) != 16 {
		return nil
	}
	return id
}
