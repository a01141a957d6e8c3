package etcdtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// listening reports whether process pid holds a listening TCP socket on port: that the
// server answering there is the one a test started, not another process that took the
// port first. Where /proc cannot tell, it reports true.
func listening(pid, port int) bool {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return true
	}
	mine := make(map[string]bool, len(fds))
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if inode, ok := strings.CutPrefix(link, "socket:["); ok {
				mine[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hex, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hex, 16, 32); err == nil && int(p) == port && mine[f[9]] {
				return true
			}
		}
	}
	return false
}
