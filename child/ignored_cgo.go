//go:build cgo

package child

/*
#include <signal.h>
#include <string.h>

// cronlock_ignored_at_exec holds bit N-1 for each signal N that was SIG_IGN when the
// process was exec'd. It is filled by a constructor, which runs before the Go runtime
// installs its own handlers: after that, sigaction no longer shows what was inherited.
unsigned long long cronlock_ignored_at_exec;

__attribute__((constructor)) static void cronlock_snap_ignored(void) {
	for (int s = 1; s < 64; s++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			cronlock_ignored_at_exec |= 1ULL << (s - 1);
	}
}
*/
import "C"

import "syscall"

// ignoredAtExec reports whether sig was ignored (SIG_IGN) when cronlock was started.
//
// Go's runtime keeps an inherited SIG_IGN only for SIGHUP and SIGINT (signal.Ignored
// knows those); it installs its own handler for SIGQUIT, SIGTERM, SIGUSR1, SIGPIPE and
// others at start-up, and forgets that they were ignored. A C constructor runs before the
// runtime does, so it still sees the dispositions cronlock's parent left (nohup, a shell's
// `cmd &`, cron).
func ignoredAtExec(sig syscall.Signal) bool {
	return sig > 0 && sig < 64 && uint64(C.cronlock_ignored_at_exec)&(1<<(uint(sig)-1)) != 0
}
