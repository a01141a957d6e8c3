//go:build cronlock_testclock

package jobrun

import (
	"os"
	"time"
)

// In a build with the cronlock_testclock tag (the tests' binary, never a release),
// CRONLOCK_TEST_CLOCK_OFFSET (a Go duration, e.g. 45s or -10m) moves the run's wall
// clock, so that tests of the clock skew, the start deadline and the next tick need
// neither a wrong system clock nor a minute's wait.
//
// CRONLOCK_TEST_RANDOM=max makes every random delay (--jitter, --retry-delay) its
// largest, so that a test knows how long a run waits.
func init() {
	if os.Getenv("CRONLOCK_TEST_RANDOM") == "max" {
		randN = func(n time.Duration) time.Duration { return n - 1 }
	}
	v := os.Getenv("CRONLOCK_TEST_CLOCK_OFFSET")
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic("CRONLOCK_TEST_CLOCK_OFFSET: " + err.Error())
	}
	wallNow = func() time.Time { return time.Now().Add(d) }
}
