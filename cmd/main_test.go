package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// cronlockBin is the cronlock binary built once for the black-box tests of this package.
var cronlockBin string

func TestMain(m *testing.M) {
	// The binary is built with -race when the tests are: without this, each of the
	// hundreds of cronlock processes the tests start would linger 1 s at exit.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cronlock-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cronlockBin = filepath.Join(dir, "cronlock")
	// The test clock (CRONLOCK_TEST_CLOCK_OFFSET) exists only with this tag: a release
	// build has no setting that moves its clock (TestTestClockOnlyInTestBuilds).
	args := []string{"build", "-tags", "cronlock_testclock" + etcdBuildTag, "-o", cronlockBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "..")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build cronlock for the tests: %v\n", err)
		return 1
	}
	return m.Run()
}

// skipIfShort skips a slow test under `go test -short`, the quick check while editing.
// Only the tests that take long because they load the machine go (the torture's fault
// injection, a hundred cronlocks writing one history file, cronlocks killed in the middle
// of their writes, 200 MB of output), not those that are slow because of what they wait
// for. scripts/test.sh, and so CI, never passes -short: there every test runs.
func skipIfShort(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s; scripts/test.sh runs it", why)
	}
}
