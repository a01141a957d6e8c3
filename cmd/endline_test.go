package cmd

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestOutputEndLine: a run that does not succeed ends its output with one cronlock line
// (status, exit code or signal, tries, duration), in cron's mail (one pipe for stdout and
// stderr) and at the end of the failure ping's body; after output that ended mid-line it
// starts a line of its own. With --output on-failure every such run gets it, the job's
// own failure included; with --output always the lines of the outcomes that had one get
// the same facts, and a job's own failure (whose output went out as it came) gets none.
func TestOutputEndLine(t *testing.T) {
	c := newCLI(t, "")
	const dur = `[0-9.]+(ms|s)`
	for _, tc := range []struct {
		name   string
		output string
		args   []string
		job    string
		code   int
		want   string // a regexp of all that the pipe carried
	}{
		{"exit", "on-failure", nil, "echo out; printf partial; exit 3", 3,
			`^out\npartial\ncronlock: endl-exit: failed, exit 3, 1 try, ` + dur + `\n$`},
		{"exit-newline", "on-failure", nil, "echo whole; exit 4", 4,
			`^whole\ncronlock: endl-exit-newline: failed, exit 4, 1 try, ` + dur + `\n$`},
		{"silent", "on-failure", nil, "exit 5", 5,
			`^cronlock: endl-silent: failed, exit 5, 1 try, ` + dur + `\n$`},
		// No tail captured: the spool, which holds all of the output, knows how it ended.
		{"capture0", "on-failure", []string{"--capture", "0"}, "echo out; printf partial; exit 3", 3,
			`^out\npartial\ncronlock: endl-capture0: failed, exit 3, 1 try, ` + dur + `\n$`},
		{"signal", "on-failure", nil, "printf dying; kill -KILL $$", 137,
			`^dying\ncronlock: endl-signal: failed, signal SIGKILL, 1 try, ` + dur + `\n$`},
		{"timeout", "on-failure", []string{"--timeout", "1s"}, "printf partial; exec sleep 30", 124,
			`^partial\ncronlock: endl-timeout: the job ran longer than --timeout 1s; stopped it \(timeout, signal SIGTERM, 1 try, ` + dur + `\)\n$`},
		{"retries", "on-failure", []string{"--retries", "1", "--retry-delay", "10ms"}, "echo try $CRONLOCK_TRY; exit 6", 6,
			`^try 1\n(cronlock: endl-retries: try 1 of 2 failed[^\n]*\n)?try 2\ncronlock: endl-retries: failed, exit 6, 2 tries, ` + dur + `\n$`},
		{"always-timeout", "always", []string{"--timeout", "1s"}, "printf partial; exec sleep 30", 124,
			`^partial\ncronlock: endl-always-timeout: the job ran longer than --timeout 1s; stopped it \(timeout, signal SIGTERM, 1 try, ` + dur + `\)\n$`},
		{"always-exit", "always", nil, "printf partial; exit 3", 3, `^partial$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := newHC(t)
			key := "endl-" + tc.name
			args := append([]string{"run", "-k", key, "--output", tc.output, "--ping", hc.url()}, tc.args...)
			code, got := runShared(t, c, append(args, "--", "sh", "-c", tc.job)...)
			if code != tc.code || !regexp.MustCompile(tc.want).Match(got) {
				t.Fatalf("exit %d, the pipe carried %q; want %d and %s", code, got, tc.code, tc.want)
			}
			pings := hc.got()
			if len(pings) != 2 {
				t.Fatalf("pings %+v; want start and end", pings)
			}
			body := pings[1].Body
			line := regexp.MustCompile(`(^|\n)cronlock: ` + key + `: [^\n]*\(?(failed|timeout), (exit|signal) [^\n]*, ` + dur + `\)?\n$`)
			if !line.MatchString(body) || strings.Count(body, "cronlock: ") != 1 {
				t.Errorf("ping body %q; want the output, then one cronlock line on a line of its own", body)
			}
		})
	}
}

// cutEndLine splits the last line, cronlock's, off what a run printed.
func cutEndLine(b []byte) (rest []byte, line string) {
	i := bytes.LastIndex(b[:max(len(b)-1, 0)], []byte("\n")) + 1
	return b[:i], string(b[i:])
}
