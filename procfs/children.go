package procfs

import (
	"errors"
	"io/fs"
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

// Descendants lists the processes under the roots: their children, and those children's
// children, down to the leaves, the roots themselves left out. Unlike Children it lists the
// children of every thread (a job written in Go or Java forks from any thread). A process
// that forks while the walk runs may be missed; callers that must find every process walk
// again. skip, when not nil, prunes a process and everything under it.
func Descendants(roots []int, skip func(pid int) bool) []int {
	var out []int
	queue := append([]int(nil), roots...)
	var byParent map[int][]int // built once, without the children files
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		kids, ok := threadChildren(pid)
		if !ok {
			if byParent == nil {
				byParent = parents()
			}
			kids = byParent[pid]
		}
		for _, k := range kids {
			if skip != nil && skip(k) {
				continue
			}
			out = append(out, k)
			queue = append(queue, k)
		}
	}
	return out
}

// threadChildren lists the children of every thread of pid from the children files; ok is
// false when the kernel has no such files (pid's task folder exists but not the files).
func threadChildren(pid int) (kids []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, true // pid is gone: no children
	}
	buf := make([]byte, 4096)
	for _, t := range tasks {
		b, err := readSmall(dir+t.Name()+"/children", buf)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(dir + t.Name()); serr == nil {
				return nil, false
			}
			continue // the thread ended meanwhile
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids, true
}

// parents maps every process to its children by reading the stat of every process.
func parents() map[int][]int {
	m := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(n); err == nil {
			m[st.PPID] = append(m[st.PPID], n)
		}
	}
	return m
}
