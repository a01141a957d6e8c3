package lockrun

import (
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// restoreForeground gives the terminal back to cronlock's process group. cronlock is in
// a background group at that moment, so tcsetpgrp would raise SIGTTOU; blocking it on this
// thread makes the kernel allow the call without stopping cronlock.
func (s *supervisor) restoreForeground() {
	if s.fg < 0 {
		return
	}
	fd := s.fg
	s.fg = -1
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

func sigaddset(set *unix.Sigset_t, sg unix.Signal) {
	n := uint(sg) - 1
	const bits = 64 // Sigset_t.Val is []uint64 on linux
	set.Val[n/bits] |= 1 << (n % bits)
}
