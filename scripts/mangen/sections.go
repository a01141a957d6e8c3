package main

import (
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cronlock/settings"
)

// runExit is run's exit statuses: the table a crontab's MAILTO reader and a wrapper
// script rely on.
const runExit = `.SH EXIT STATUS
.TP
\fIthe job's own code\fR
the job exited by itself.
.TP
\fB128+N\fR
the job died from signal N that cronlock did not send for a time-out or a lost lock.
.TP
\fB0\fR (\fB\-\-conflict\-exit\-code\fR)
the lock is held elsewhere (or \fB\-\-wait\fR ran out), the tick was already run, the run
missed its start deadline, a standby ended without taking over, or the key is suspended.
.TP
\fB124\fR
cronlock stopped the job because \fB\-\-timeout\fR passed.
.TP
\fB125\fR
cronlock itself failed: bad usage or configuration, the backend unreachable, the lock lost
while the job ran. One line on standard error says what happened and what to do.
.TP
\fB126\fR
the command exists but cannot be executed.
.TP
\fB127\fR
the command was not found.
`

// otherExit is every other command's: success, or cronlock's one failure code.
const otherExit = `.SH EXIT STATUS
.TP
\fB0\fR
success.
.TP
\fB125\fR
failure: bad usage or configuration, an unreachable backend or history. One line on
standard error says what happened and what to do.
`

// checkExit is check's: the monitoring plugin convention.
const checkExit = `.SH EXIT STATUS
.TP
\fB0\fR OK, \fB1\fR WARNING, \fB2\fR CRITICAL, \fB3\fR UNKNOWN
as monitoring plugins (Nagios, Icinga, Sensu) read them; \fB\-V\fR also exits 3.
`

// files is the FILES section of cronlock(1) and run's page.
const files = `.SH FILES
.TP
\fI/etc/cronlock/cronlock.conf\fR
settings for every run on this machine (\fBCRONLOCK_CONFIG\fR names another file); see
\fBcronlock.conf\fR(5).
.TP
\fI/var/lib/cronlock/history.db\fR
the run history of root (SQLite); other users' is
\fI~/.local/state/cronlock/history.db\fR, the home folder taken from the password
database (also through \fBgetent\fR(1) for LDAP and SSSD users), never from \fB$HOME\fR.
.TP
\fI/run/cronlock/\fR
root's local lock files; other users' are in \fI/tmp/cronlock\-UID/\fR (0700).
`

// jobVars says what each name cronlock gives its job means. A name settings declares
// that is missing here stops the generator: the page must not lag the code.
var jobVars = map[string]string{
	settings.JobKey:              "the lock key of the run (\\fB\\-\\-key\\fR).",
	settings.JobRunID:            "the run's id in the history (a UUIDv7).",
	settings.JobNode:             "this machine's name in locks and history.",
	settings.JobTry:              "the try number with \\fB\\-\\-retries\\fR, from 1.",
	settings.JobFencingToken:     "a number that rises with every acquisition of the lock: a job that stamps its writes with it lets the store refuse a stale holder.",
	settings.JobTokenBackend:     "the backend that issued the fencing token (tokens of two backends do not compare).",
	settings.JobScheduledFor:     "with \\fB\\-\\-schedule\\fR: the tick the run is for (RFC 3339, UTC).",
	settings.JobTickAttempt:      "with \\fB\\-\\-schedule\\fR: 1, or 2 and more for a takeover of the tick.",
	settings.JobTakeoverOf:       "with a takeover: the run id of the lost run whose tick this run took.",
	settings.JobCheckpointSocket: "the run's private socket through which \\fBcronlock checkpoint\\fR reaches it.",
}

// flagless says what the settings without a flag of their own mean.
var flagless = map[string]string{
	"CRONLOCK_HISTORY_RETENTION":            "run deletes finished runs older than this (default 90d) at most once a day; 0 or off keeps every run.",
	"CRONLOCK_FLEET_KEEP":                   "entries of the fleet's record kept per key on the backend (default 200).",
	"CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE": "a file whose first line is the Sentinels' own password.",
}

// sectionsFor is the roff text added to the page of the command at path.
func sectionsFor(path string) string {
	switch path {
	case "cronlock", "cronlock run":
		return runExit + environment() + files
	case "cronlock check":
		return checkExit
	}
	return otherExit
}

// environment is the ENVIRONMENT section: every setting with the flag it stands in for,
// then what the job gets.
func environment() string {
	var b strings.Builder
	b.WriteString(".SH ENVIRONMENT\nEach setting is read from the config file, then the environment, then the flag; later\nwins. A \\fBCRONLOCK_\\fR variable that is none of these is refused (exit 125), so a typo\ncannot drop the fleet's Redis URL. The etcd settings work only in \\fBcronlock\\-etcd\\fR.\n")
	root := command()
	for _, s := range settings.Table {
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n%s\n", s.Name, roff(describe(root, s)))
	}
	b.WriteString(".TP\n\\fBCRONLOCK_CONFIG\\fR\nthe config file to read instead of \\fI/etc/cronlock/cronlock.conf\\fR; it must exist.\n")
	b.WriteString(".TP\n\\fBNO_COLOR\\fR\nno colours in tables, even on a terminal.\n")
	b.WriteString(".PP\nThe job gets its environment from cronlock, plus:\n")
	for _, name := range settings.JobNames {
		d, ok := jobVars[name]
		if !ok {
			panic("mangen: no description of " + name + " (add it to jobVars)")
		}
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n%s\n", name, d)
	}
	return b.String()
}

// describe is one setting's line: its flag and the flag's own help.
func describe(root *cobra.Command, s settings.Setting) string {
	if s.Flag == "" {
		d, ok := flagless[s.Name]
		if !ok {
			panic("mangen: no description of " + s.Name + " (add it to flagless)")
		}
		return d
	}
	for _, path := range [][]string{{"run"}, {"check"}, {"history"}, {"status"}} {
		c, _, err := root.Find(path)
		if err != nil {
			continue
		}
		if f := c.Flags().Lookup(s.Flag); f != nil {
			return "--" + s.Flag + ": " + f.Usage
		}
		if f := c.InheritedFlags().Lookup(s.Flag); f != nil {
			return "--" + s.Flag + ": " + f.Usage
		}
	}
	panic("mangen: no command has the flag --" + s.Flag + " of " + s.Name)
}

// roff escapes text for a roff paragraph: backslashes, and a leading dot or quote that
// would read as a request.
func roff(text string) string {
	text = strings.ReplaceAll(text, `\`, `\e`)
	text = strings.ReplaceAll(text, "-", `\-`)
	if strings.HasPrefix(text, ".") || strings.HasPrefix(text, "'") {
		text = `\&` + text
	}
	return text
}

//go:embed cronlock.conf.5.in
var confTemplate string

// confPage is cronlock.conf(5): the hand-written grammar with the header's date and
// source, and the settings filled in from the settings package.
func confPage(day time.Time, source string) string {
	var list strings.Builder
	root := command()
	for _, s := range settings.Table {
		fmt.Fprintf(&list, ".TP\n\\fB%s\\fR\n%s\n", s.Name, roff(describe(root, s)))
	}
	page := strings.ReplaceAll(confTemplate, "@DATE@", day.Format("2006-01-02"))
	page = strings.ReplaceAll(page, "@SOURCE@", source)
	return strings.ReplaceAll(page, "@SETTINGS@\n", list.String())
}
