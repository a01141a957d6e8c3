package cmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"cronlock/internal/redistest"
)

// raceEnabled is set by race_test.go: the binary under test is then built with -race too.
var raceEnabled bool

// TestScripts runs the txtar scripts in testdata/script against the built binary and the
// shared test Redis. Each script gets its own history file, lock folder, Redis prefix
// and an empty config file, so scripts do not see each other or the machine's settings.
func TestScripts(t *testing.T) {
	addr := redistest.Addr(t)
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(cronlockBin)+":"+os.Getenv("PATH"))
			env.Setenv("REDIS_ADDR", addr)
			env.Setenv("REDIS_URL", "redis://"+addr+"/0")
			env.Setenv("CRONLOCK_HISTORY", filepath.Join(env.WorkDir, "history.db"))
			env.Setenv("CRONLOCK_LOCK_DIR", filepath.Join(env.WorkDir, "locks"))
			env.Setenv("CRONLOCK_CONFIG", filepath.Join(env.WorkDir, "no-such.conf"))
			env.Setenv("CRONLOCK_PREFIX", "t"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(env.WorkDir)+":")
			env.Setenv("CRONLOCK_NODE", "testnode")
			env.Setenv("NO_COLOR", "1")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":    cmdExits,
			"redis":    cmdRedis,
			"waitfile": cmdWaitfile,
			"sleep":    cmdSleep,
		},
	})
}

// cmdExits runs a program and checks its exit code: `exits 125 cronlock run ...`.
// Its stdout and stderr are kept for the stdout/stderr commands that follow.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not an exit code", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}

// cmdRedis sends one command to the test Redis: `redis DEL key`. `redis GET key`
// leaves the reply on stdout for a following `stdout` check.
func cmdRedis(ts *testscript.TestScript, neg bool, args []string) {
	reply, err := redistest.Do(ts.Getenv("REDIS_ADDR"), args...)
	if err != nil && !neg {
		ts.Fatalf("redis %s: %v", strings.Join(args, " "), err)
	}
	if err == nil && neg {
		ts.Fatalf("redis %s: unexpected success", strings.Join(args, " "))
	}
	ts.Logf("redis: %s", reply)
}

// cmdWaitfile waits up to 20 s for a file to exist: `waitfile started`.
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	path := ts.MkAbs(args[0])
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	ts.Fatalf("waitfile: %s did not appear within 20s", args[0])
}

// cmdSleep pauses the script: `sleep 1100ms`.
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("sleep: %v", err)
	}
	time.Sleep(d)
}
