package history

import (
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
)

// BootID returns the 16 bytes of this boot's id (/proc/sys/kernel/random/boot_id), or nil
// where there is none. A running row from another boot is dead whatever its pid.
var BootID = sync.OnceValue(func() []byte {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return nil
	}
	id, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err != nil || len(id) != 16 {
		return nil
	}
	return id
})

// selfStart is ProcStart of this process, read once.
var selfStart = sync.OnceValue(func() uint64 { return ProcStart(os.Getpid()) })

// ProcStart returns when process pid started, in clock ticks after boot (field 22 of
// /proc/PID/stat), or 0 when it cannot be read. With the boot id it names one process:
// a pid reused later has a later start.
func ProcStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and ')': fields after the last ')' are plain.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
