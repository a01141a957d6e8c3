package lockrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// DefaultTimeout is the deadline of one operation on a lock server (Redis, etcd) when
// the backend's Options.Timeout is 0 (--redis-timeout).
const DefaultTimeout = 2 * time.Second

// DefaultPrefix is the namespace of every key a backend writes when its Options.Prefix
// is empty (--prefix).
const DefaultPrefix = "cronlock:"

// ServerDefaults fills in and checks what a lock server's options share: the time-out
// of one operation and the prefix of every key.
func ServerDefaults(timeout *time.Duration, prefix *string) error {
	if *timeout < 0 {
		return fmt.Errorf("the operation time-out %s is negative; give --redis-timeout a duration such as 2s", *timeout)
	}
	if *timeout == 0 {
		*timeout = DefaultTimeout
	}
	if *prefix == "" {
		*prefix = DefaultPrefix
	}
	return validPrefix(*prefix)
}

// validPrefix allows the key charset only: no "{" or "}" (they would break the hash tag)
// and no glob characters (List matches keys with SCAN MATCH).
func validPrefix(p string) error {
	if len(p) > MaxKeyLen {
		return fmt.Errorf("the key prefix is %d characters long; the limit is %d (--prefix / CRONLOCK_PREFIX)", len(p), MaxKeyLen)
	}
	for i := 0; i < len(p); i++ {
		if !keyByte(p[i]) {
			return fmt.Errorf("the key prefix has %q at position %d; use only A-Z a-z 0-9 . _ - : / @ (--prefix / CRONLOCK_PREFIX)", p[i], i+1)
		}
	}
	return nil
}

// IsTimeout reports whether err is a deadline that ran out: the context's, or a network
// time-out.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
