//go:build cronlock_testclock

package jobrun

import (
	"os"
	"time"
)

// In the tests' build (never a release), CRONLOCK_TEST_PING_DEADLINE shortens the
// deadline of a run's pings, so that a test of a server that never answers need not
// wait the real 5 s for each run.
func init() {
	if v := os.Getenv("CRONLOCK_TEST_PING_DEADLINE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			panic("CRONLOCK_TEST_PING_DEADLINE: " + err.Error())
		}
		pingDeadline = d
	}
}
