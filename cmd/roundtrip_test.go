package cmd

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"cronlock/internal/faultproxy"
	"cronlock/internal/redistest"
)

// TestShortRunRoundTrips counts, on the wire, the request turns a short run sends Redis
// (acquire with a tick, job `true`, release with the fleet's record): at most three,
// handshake included. go-redis's own HELLO is never sent; AUTH and SELECT, when needed,
// share one turn; the scripts go by SHA1. The first run on a server whose script cache
// is empty (a new or restarted one) pays one more turn per script (NOSCRIPT, then EVAL).
// status and unlock go through the same handshake and still work.
func TestShortRunRoundTrips(t *testing.T) {
	const pw = "rt-pass-5521"
	cases := []struct {
		name, db, password string
		hs                 string // the handshake turn, "" = none
	}{
		{"no password", "0", "", ""},
		{"db 3", "3", "", "SELECT"},
		{"password", "0", pw, "AUTH"},
		{"password db 3", "3", pw, "AUTH SELECT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var srv *redistest.Server
			if tc.password != "" {
				srv = redistest.Start(t, "--requirepass", tc.password)
			} else {
				srv = redistest.Start(t)
			}
			p, err := faultproxy.Start(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c := newCLI(t, "redis://"+p.Addr+"/"+tc.db)
			if tc.password != "" {
				f := filepath.Join(c.dir, "pw")
				os.WriteFile(f, []byte(tc.password+"\n"), 0o600)
				c.env = append(c.env, "CRONLOCK_REDIS_PASSWORD_FILE="+f)
			}
			with := func(turns ...string) string {
				if tc.hs != "" {
					turns = append([]string{tc.hs}, turns...)
				}
				return strings.Join(turns, " | ")
			}
			for i, want := range []string{
				with("EVALSHA", "EVAL", "EVALSHA", "EVAL"), // a new server: an empty script cache
				with("EVALSHA", "EVALSHA"),
			} {
				before := len(p.Turns())
				if code, _, stderr := c.run("run", "-k", "rt"+strconv.Itoa(i), "--schedule", "* * * * *", "--", "true"); code != 0 {
					t.Fatalf("run exited %d: %s", code, stderr)
				}
				got := strings.Join(turnCommands(t, p.Turns()[before:]), " | ")
				if got != want {
					t.Fatalf("run %d sent the turns %q, want %q", i+1, got, want)
				}
			}
			if n := len(strings.Split(with("EVALSHA", "EVALSHA"), " | ")); n > 3 {
				t.Fatalf("a short run costs %d round trips, more than 3", n)
			}

			// The lock was released and the run recorded in the fleet's record, in that db.
			if code, out, stderr := c.run("status"); code != 0 || !strings.Contains(out, "no locks are held") {
				t.Fatalf("status: exit %d, stdout %q, stderr %q", code, out, stderr)
			}
			if code, out, stderr := c.run("history", "--fleet", "--key", "rt1", "--json"); code != 0 || !strings.Contains(out, `"status":"succeeded"`) {
				t.Fatalf("history --fleet: exit %d, stdout %q, stderr %q", code, out, stderr)
			}
			if code, _, stderr := c.run("unlock", "-k", "rt1"); code != 0 && !strings.Contains(stderr, "not held") {
				t.Fatalf("unlock of a free lock: exit %d, stderr %q", code, stderr)
			}
		})
	}
}

// TestHandshakeErrors: a wrong password and a database the server does not have end the
// run with 125 and one line naming the cause, never the password, and nothing is locked.
func TestHandshakeErrors(t *testing.T) {
	const pw = "hs-pass-8812"
	locked := redistest.Start(t, "--requirepass", pw)
	few := redistest.Start(t, "--databases", "4")
	for _, tc := range []struct{ name, url, want string }{
		{"wrong password", "redis://:Wr0ng-" + pw + "@" + locked.Addr + "/0", "WRONGPASS"},
		{"no password", "redis://" + locked.Addr + "/0", "requires a password"},
		{"database out of range", "redis://" + few.Addr + "/9", "DB index is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, tc.url)
			code, _, stderr := c.run("run", "-k", "hs", "--", "true")
			if code != 125 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want 125 and one line with %q", code, stderr, tc.want)
			}
			if strings.Contains(stderr, pw) {
				t.Fatalf("the password is in stderr: %q", stderr)
			}
		})
	}
	// The run refused for its database took no lock in database 0 instead.
	if n, err := few.Do("DBSIZE"); err != nil || n != "0" {
		t.Fatalf("database 0 holds %s keys (%v), want none", n, err)
	}
}

// readRESPCommand reads one command (an array of bulk strings) from r.
func readRESPCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil || len(line) < 3 || line[0] != '*' {
		return nil, os.ErrInvalid
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, os.ErrInvalid
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil || line[0] != '$' {
			return nil, os.ErrInvalid
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, os.ErrInvalid
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}
