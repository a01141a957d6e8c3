package cmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"

	"cronlock/internal/redistest"
)

// raceEnabled is set by race_test.go: the binary under test is then built with -race too.
var raceEnabled bool

// TestScripts runs the txtar scripts in testdata/script against the built binary. Each
// script gets its own history file, lock folder, Redis prefix and an empty config file,
// so scripts do not see each other or the machine's settings. Every script runs without
// Redis too; one that needs the shared test Redis starts with needredis, and only then
// finds its address in REDIS_ADDR and REDIS_URL.
func TestScripts(t *testing.T) {
	addr, noRedis := redistest.Lookup()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(cronlockBin)+":"+os.Getenv("PATH"))
			if noRedis == nil {
				env.Setenv("REDIS_ADDR", addr)
				env.Setenv("REDIS_URL", "redis://"+addr+"/0")
			}
			env.Setenv("CRONLOCK_HISTORY", filepath.Join(env.WorkDir, "history.db"))
			env.Setenv("CRONLOCK_LOCK_DIR", filepath.Join(env.WorkDir, "locks"))
			// An empty config file: a CRONLOCK_CONFIG naming none is an error.
			env.Setenv("CRONLOCK_CONFIG", os.DevNull)
			env.Setenv("CRONLOCK_PREFIX", "t"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(env.WorkDir)+":")
			env.Setenv("CRONLOCK_NODE", "testnode")
			env.Setenv("NO_COLOR", "1")
			env.Values[scriptT{}] = env.T()
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": cmdExits,
			"needredis": func(ts *testscript.TestScript, neg bool, args []string) {
				cmdNeedRedis(ts, neg, args, noRedis)
			},
			"redis":    cmdRedis,
			"waitfile": cmdWaitfile,
			"sleep":    cmdSleep,
		},
	})
}

// scriptT is the key of a script's testscript.T in its Env.Values: a custom command has
// no other way to skip its script.
type scriptT struct{}

// cmdNeedRedis is the first command of a script that needs the shared test Redis:
// `needredis`. noRedis says why there is none (nil: there is one, and the script goes
// on). Without it the script fails under CI=true, where Redis tests never skip, and is
// skipped elsewhere, as redistest.Addr does for Go tests.
func cmdNeedRedis(ts *testscript.TestScript, neg bool, args []string, noRedis error) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: needredis")
	}
	if noRedis == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		ts.Fatalf("redis needed but %v (CI=true: Redis tests never skip here); run scripts/test.sh", noRedis)
	}
	ts.Value(scriptT{}).(testscript.T).Skip(fmt.Sprintf("redis needed but %v; run scripts/test.sh", noRedis))
}

// TestScriptsNeedRedis checks that every script that uses Redis says so with needredis
// as its first command: without it, a script run without Redis would find REDIS_URL
// empty and could pass on the local backend, testing nothing.
func TestScriptsNeedRedis(t *testing.T) {
	paths, err := filepath.Glob("testdata/script/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	// The shared Redis is reached through $REDIS_URL, $REDIS_ADDR or the redis command.
	usesRedis := regexp.MustCompile(`\$\{?REDIS_(URL|ADDR)\b|(?m)^\s*!?\s*redis\s`)
	for _, path := range paths {
		ar, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		first := ""
		for _, line := range strings.Split(string(ar.Comment), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				first = line
				break
			}
		}
		if uses := usesRedis.Match(ar.Comment); uses != (first == "needredis") {
			t.Errorf("%s: uses Redis %v, but its first command is %q; a script that uses Redis, and only such a script, starts with needredis", path, uses, first)
		}
	}
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
