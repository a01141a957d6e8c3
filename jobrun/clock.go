package jobrun

import (
	"math/rand/v2"
	"time"
)

// wallNow is the wall clock of a run: its start, its tick, the clock it shows Redis for
// the skew check, its end. Only a test build moves it (testhooks_on.go); in every other
// build it is time.Now, whatever the environment says.
var wallNow = time.Now

// Now is cronlock's wall clock for the other commands that judge runs against it
// (check): the same clock a run uses, so that a test build moves both together.
func Now() time.Time { return wallNow() }

// randN is a uniformly random duration in [0, n) for n > 0: the --jitter sleep and the
// share of a --retry-delay taken. Only a test build replaces it (testhooks_on.go).
var randN = func(n time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(n))) }
