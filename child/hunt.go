package child

import (
	"time"

	"golang.org/x/sys/unix"

	"cronlock/procfs"
)

// The leftover hunt: the job's processes outside its process group, found by walking
// every process below cronlock, stopped one by one, and told to the guard.

// hunting reports whether the hunt is on: the main child is gone, or a stop is under way.
func (s *supervisor) hunting() bool {
	return s.mainDone || !s.killAt.IsZero()
}

// hunt finds the job's processes outside its process group: those under the main child
// that left the group (setsid), and those reparented to cronlock. Each one found gets
// SIGTERM and SIGCONT at once, and SIGKILL when its grace (or lastCall) has passed; it is
// signalled alone, never its group, so that nothing gets the same signal twice (the hunt
// finds the members of such a group too).
func (s *supervisor) hunt() {
	if !s.hunting() {
		return
	}
	now := time.Now()
	seen := make(map[int]bool, len(s.others))
	for _, pid := range s.jobProcesses() {
		seen[pid] = true
		if _, known := s.others[pid]; known {
			continue
		}
		at := now.Add(max(s.job.Grace, 0))
		if !s.lastCall.IsZero() && s.lastCall.Before(at) {
			at = s.lastCall
		}
		s.others[pid] = at
		s.guardStale = true
		_ = unix.Kill(pid, unix.SIGTERM)
		_ = unix.Kill(pid, unix.SIGCONT)
	}
	for pid, at := range s.others {
		switch {
		case !seen[pid]:
			// Gone (or no longer below cronlock): its pid may be reused, never signal it.
			delete(s.others, pid)
			s.guardStale = true
		case !at.After(now):
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	if s.killed {
		// A process of the group may have forked after the first SIGKILL went out.
		_ = unix.Kill(-s.pgid, unix.SIGKILL)
	}
	s.armGuard(now)
}

// guardEvery spaces the guard's updates: its shell reads a line a byte at a time, and a
// fork loop changes the hunt's list at every look.
const guardEvery = 100 * time.Millisecond

// armGuard tells the guard the processes the hunt found outside the job's group, so that
// a cronlock killed while it waits for them to die (their grace) takes them with it: the
// guard alone kills only the group. A guard that could not take the list is told again at
// the next look.
func (s *supervisor) armGuard(now time.Time) {
	if !s.guardStale || now.Sub(s.guardAt) < guardEvery {
		return
	}
	pids := make([]int, 0, len(s.others))
	for pid := range s.others {
		pids = append(pids, pid)
	}
	s.guardAt = now
	s.guardStale = s.job.Guard.Arm(s.pgid, pids...) != nil
}

// jobProcesses lists the processes below cronlock that belong to the job and are outside
// its process group (the group's own get the group's signals): the main child's
// descendants, and cronlock's other children (reparented orphans) with theirs; never the
// guard.
func (s *supervisor) jobProcesses() []int {
	roots := procfs.Children(s.self)
	if !s.mainDone {
		roots = append(roots, s.res.PID)
	}
	guard := s.guardAmong(roots)
	var out []int
	for _, pid := range roots {
		if pid == guard || pid == s.res.PID {
			continue
		}
		if pg, err := unix.Getpgid(pid); err == nil && pg != s.pgid {
			out = append(out, pid)
		}
	}
	for _, pid := range procfs.Descendants(roots, func(pid int) bool { return pid == guard }) {
		if pg, err := unix.Getpgid(pid); err == nil && pg != s.pgid {
			out = append(out, pid)
		}
	}
	return out
}

// finished reports whether the run is over: the main child is reaped, its process group is
// empty, and the hunt finds nothing of the job left.
func (s *supervisor) finished() bool {
	if !s.mainDone {
		return false
	}
	if unix.Kill(-s.pgid, 0) == nil { // also true while zombies of the group wait for a reaper
		return false
	}
	s.hunt()
	return len(s.others) == 0
}

// guardAmong returns the guard's pid when children lists any child, else 0. Only then may
// the guard be among them, so only then is it worth waiting for the guard's fork and exec
// to finish (Guard.PID), which a short job otherwise ends before.
func (s *supervisor) guardAmong(children []int) int {
	if len(children) == 0 {
		return 0
	}
	return s.job.Guard.PID()
}
