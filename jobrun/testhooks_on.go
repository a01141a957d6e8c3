//go:build cronlock_testclock

package jobrun

import (
	"os"
	"time"
)

// The test hooks of the tests' build (the cronlock_testclock tag, never a release), all
// set from the environment when the program starts:
//
//   - CRONLOCK_TEST_CLOCK_OFFSET (a Go duration, e.g. 45s or -10m) moves the run's wall
//     clock, so that tests of the clock skew, the start deadline and the next tick need
//     neither a wrong system clock nor a minute's wait;
//   - CRONLOCK_TEST_RANDOM=max makes every random delay (--jitter, --retry-delay) its
//     largest, so that a test knows how long a run waits;
//   - CRONLOCK_TEST_PING_DEADLINE shortens the deadline of a run's pings, so that a test
//     of a server that never answers need not wait the real 5 s for each run.
func init() {
	if os.Getenv("CRONLOCK_TEST_RANDOM") == "max" {
		randN = func(n time.Duration) time.Duration { return n - 1 }
	}
	if v := os.Getenv("CRONLOCK_TEST_CLOCK_OFFSET"); v != "" {
		d := testDuration("CRONLOCK_TEST_CLOCK_OFFSET", v)
		wallNow = func() time.Time { return time.Now().Add(d) }
	}
	if v := os.Getenv("CRONLOCK_TEST_PING_DEADLINE"); v != "" {
		pingDeadline = testDuration("CRONLOCK_TEST_PING_DEADLINE", v)
	}
}

// testDuration reads a hook's duration; a test that sets a bad one is a broken test.
func testDuration(name, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(name + ": " + err.Error())
	}
	return d
}
