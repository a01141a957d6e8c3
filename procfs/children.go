package procfs

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Children lists the children of process pid's main thread: for a child subreaper such
// as cronlock, the orphans reparented to it, which the kernel hands to the main thread
// (the first live thread of the group, and Go never ends its main thread), so
// /proc/<pid>/task/<pid>/children lists them all. Children that another thread of pid
// forked hang under that thread and are not listed; cronlock knows the ones it forked
// itself (the job, the guard) by pid and needs no listing for them. Reading only that
// one file matters: listing /proc/<pid>/task fills the dentry cache with an entry per
// thread, which the kernel walks when cronlock's parent reaps it, at the expense of
// every short run. Without the file (a kernel built without CONFIG_PROC_CHILDREN) it
// reads the stat of every process and lists those whose parent is pid. It returns nil
// when there are none.
func Children(pid int) []int {
	var pids []int
	me := strconv.Itoa(pid)
	if b, err := readSmall("/proc/"+me+"/task/"+me+"/children", make([]byte, 4096)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return pids
	}
	return childrenByStat(pid)
}

// childrenByStat is Children without the children file: every process whose parent is
// pid, whichever thread forked it.
func childrenByStat(pid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(n); err == nil && st.PPID == pid {
			pids = append(pids, n)
		}
	}
	return pids
}

// readSmall reads a small /proc file into buf with three plain system calls: os.ReadFile
// costs three times as many (poller registration, fcntl), and cronlock lists its
// children more than once per run.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	if n == len(buf) {
		// More than fits: fall back to reading it whole.
		return os.ReadFile(path)
	}
	return buf[:n], nil
}
