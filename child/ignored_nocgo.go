//go:build !cgo

package child

import (
	"os/signal"
	"syscall"
)

// ignoredAtExec reports whether sig was ignored when cronlock was started. Without cgo
// there is no constructor that sees the dispositions before the Go runtime replaces them,
// so only SIGHUP and SIGINT (which the runtime leaves ignored) are known.
func ignoredAtExec(sig syscall.Signal) bool { return signal.Ignored(sig) }
