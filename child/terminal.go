package child

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"cronlock/procfs"
	"cronlock/tty"
)

// restoreForeground gives the terminal back to cronlock's process group, if the job's
// group still has it (after a `bg` the shell has it, and keeps it). cronlock is in a
// background group at that moment, so tcsetpgrp would raise SIGTTOU; blocking it on this
// thread makes the kernel allow the call without stopping cronlock.
func (s *supervisor) restoreForeground() {
	if s.fg < 0 {
		return
	}
	fd := s.fg
	s.fg = -1
	if pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil || pg != s.pgid {
		signal.Reset(syscall.SIGTTOU)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	sigaddset(&set, unix.SIGTTOU)
	if unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old) != nil {
		return
	}
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	signal.Reset(syscall.SIGTTOU)
}

// suspend follows the main child when it stops while cronlock's stdin is a terminal
// (Ctrl-Z; a read from the terminal in the background): cronlock stops its own process
// group the same way, so that the shell, whose job cronlock is, gets its prompt back. When
// the shell resumes cronlock (fg or bg), cronlock resumes the job, handing it the terminal
// if cronlock is now in the foreground. Meanwhile nothing renews the lease: a suspension
// longer than the lease is a lost lock, seen once cronlock runs again.
//
// Without a terminal (under cron) a stop is somebody's deliberate kill -STOP: cronlock
// keeps waiting, and a stop signal it forwards or a timeout continues the job.
func (s *supervisor) suspend() {
	if s.job.Stdin == nil || !tty.IsTerminal(s.job.Stdin) {
		return
	}
	fd := int(s.job.Stdin.Fd())
	if !inJobControl() {
		// Nobody would resume a stopped cronlock (ssh -t, setsid): the kernel discards a
		// terminal's stop signals in such a group, so without cronlock Ctrl-Z would have
		// done nothing. Do the same.
		_ = unix.Kill(-s.pgid, unix.SIGCONT)
		return
	}
	if s.fg >= 0 {
		s.restoreForeground() // ignores SIGTTOU again below when it hands the terminal over
	}
	// SIGSTOP, not the job's own stop signal: the kernel discards SIGTSTP, SIGTTIN and
	// SIGTTOU sent to an orphaned process group (cronlock started under setsid), and
	// cronlock ignores SIGTTOU. kill returns before every thread has stopped, so cronlock
	// waits for the SIGCONT of fg or bg: acting earlier would hand the terminal back to
	// the job behind the shell's back.
	// The guard's fork may still be under way (it starts as the job does): until it
	// execs, that child is in cronlock's group, and stopped there it never execs, so the
	// forking thread never returns and cronlock's stop never completes (the shell is not
	// told; seen as a job bash listed as Running, every process stopped).
	s.job.Guard.PID()
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	_ = unix.Kill(0, unix.SIGSTOP)
	<-cont
	signal.Stop(cont)
	if tty.InForeground(s.job.Stdin) {
		signal.Ignore(syscall.SIGTTOU) // as startChild does: cronlock writes from the background
		if unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, s.pgid) == nil {
			s.fg = fd
		}
	}
	_ = unix.Kill(-s.pgid, unix.SIGCONT)
}

// inJobControl reports whether cronlock's process group is under a job-control shell: it
// is not orphaned (POSIX), the first ancestor outside the group being in the same session.
// (Only the ancestors are asked, not every member's parent: the members of a pipeline
// share the shell as parent.)
func inJobControl() bool {
	pg := unix.Getpgrp()
	mySid, err := unix.Getsid(0)
	if err != nil {
		return false
	}
	pid := os.Getppid()
	for range 64 {
		if pid <= 1 {
			return false
		}
		p, err := unix.Getpgid(pid)
		if err != nil {
			return false
		}
		if p != pg {
			s, err := unix.Getsid(pid)
			return err == nil && s == mySid
		}
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return false
		}
		pid = st.PPID
	}
	return false
}

func sigaddset(set *unix.Sigset_t, sg unix.Signal) {
	n := uint(sg) - 1
	const bits = 64 // Sigset_t.Val is []uint64 on linux
	set.Val[n/bits] |= 1 << (n % bits)
}
