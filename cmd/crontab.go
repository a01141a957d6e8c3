package cmd

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"cronlock/crontab"
	"cronlock/crontabfile"
	"cronlock/jobrun"
	"cronlock/logline"
	"cronlock/schedule"
	"cronlock/tty"
	"cronlock/userdb"
)

// crontabOptions are the settings of `cronlock crontab wrap` and `lint`.
type crontabOptions struct {
	File       string // "-" = stdin
	Format     string // auto, user, system
	CronDaemon string // debian, cronie; "" = the one installed
	Cronlock   string // "" = this executable
	Write      bool
	Fleet      bool
	Local      bool
	User       string
	BackupDir  string
	LogFormat  string
	Stdin      io.Reader
	Stdout     io.Writer
	Stderr     io.Writer
}

func newCrontabCmd(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "crontab wrap|lint [FILE|-]",
		Short: "Put cronlock in front of an existing crontab, or check one",
		Args:  subcommandArgs,
		RunE:  func(c *cobra.Command, args []string) error { return c.Help() },
	}
	c.AddCommand(newCrontabWrapCmd(stdout, stderr), newCrontabLintCmd(stdout, stderr))
	return c
}

func (o *crontabOptions) addCommonFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.Format, "format", "auto", "auto (system for /etc/crontab and /etc/cron.d/*, else user), user, or system (a user field after the schedule)")
	c.Flags().StringVar(&o.CronDaemon, "cron-daemon", "", "debian (ignores CRON_TZ) or cronie (honours it); default: cronie when /usr/sbin/crond exists, else debian")
}

func newCrontabWrapCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &crontabOptions{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr}
	c := &cobra.Command{
		Use:   "wrap [FILE|-] [--write] [--fleet|--local] [--backup-dir DIR]",
		Short: "Rewrite a crontab's job lines to run under cronlock",
		Long: `Rewrite each job line of a crontab to
  /abs/path/cronlock run --key K --schedule 'S' -- SHELL -c 'LINE'
and print a unified diff (for FILE) or the whole new crontab (for -, standard input).
System crontabs (/etc/crontab, /etc/cron.d/*) get --backend local unless --fleet.
Comments, blank lines, NAME=value lines, @reboot, run-parts lines and lines already
under cronlock are left as they are. Left alone and reported: an unescaped %, a line
that starts a service or leaves work in the background (cronlock would stop it when
the line's shell exits), a line whose wrapped command would pass the 998 bytes
Debian's cron takes, and a line Debian's cron refuses (it then ignores the whole file).
--write replaces FILE atomically after a backup in --backup-dir.

A user's crontab lives in the cron spool, which only crontab(1) may write:
  crontab -l | cronlock crontab wrap - | crontab -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.load(c, args); err != nil {
				return err
			}
			return crontabWrap(o)
		},
	}
	o.addCommonFlags(c)
	c.Flags().BoolVar(&o.Write, "write", false, "replace FILE (atomically, after a backup) instead of printing a diff")
	c.Flags().BoolVar(&o.Fleet, "fleet", false, "system crontab: use the configured backend (Redis for a fleet) instead of --backend local")
	c.Flags().BoolVar(&o.Local, "local", false, "user crontab: add --backend local (this machine's lock only)")
	c.Flags().StringVar(&o.BackupDir, "backup-dir", "/var/backups/cronlock", "folder of --write's backups (never a cron folder)")
	c.Flags().StringVar(&o.Cronlock, "cronlock", "", "path of cronlock written in each line (default: this executable)")
	c.Flags().StringVar(&o.User, "user", "", "owner of a user crontab, part of each key (default: the user running wrap; give it with crontab -u USER -l)")
	c.MarkFlagsMutuallyExclusive("fleet", "local")
	return c
}

func newCrontabLintCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &crontabOptions{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr}
	c := &cobra.Command{
		Use:   "lint [FILE|-]",
		Short: "Report a crontab's pitfalls; exit 1 when there are any",
		Long: `Report on standard output, one FILE:LINE: line each: each line Debian's cron
refuses (it then ignores the whole file: MAILTO= with nothing after it, text after a
closing quote, an unclosed quote, a bad field, a command over 998 bytes, no newline at the
end), unescaped %, a relative command with no PATH= line (inside a wrapped line too), a
6-field line, a line that starts a service or leaves work in the background, a wrapped
line whose --schedule is not its crontab schedule, CRON_TZ= where the daemon ignores it,
and each line that wrap would change. Exit 1 when there are any, 0 when there are none,
125 when the file cannot be read.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.load(c, args); err != nil {
				return err
			}
			return crontabLint(o)
		},
	}
	o.addCommonFlags(c)
	return c
}

// load checks the flags and arguments of c.
func (o *crontabOptions) load(c *cobra.Command, args []string) error {
	o.LogFormat = logFormatOf(c)
	o.File = "-"
	if len(args) == 1 {
		o.File = args[0]
	} else if f, ok := o.Stdin.(*os.File); ok && tty.IsTerminal(f) {
		// Waiting for a crontab typed on the terminal would look like a hang.
		return &usageError{fmt.Errorf("give a crontab FILE, or - to read one from standard input (crontab -l | cronlock %s -)", c.CommandPath()[len("cronlock "):])}
	}
	switch o.Format {
	case "auto", "user", "system":
	default:
		return &usageError{fmt.Errorf("--format %q: use auto, user or system", o.Format)}
	}
	switch o.CronDaemon {
	case "":
		o.CronDaemon = "debian"
		if _, err := os.Stat("/usr/sbin/crond"); err == nil {
			o.CronDaemon = "cronie"
		}
	case "debian", "cronie":
	default:
		return &usageError{fmt.Errorf("--cron-daemon %q: use debian or cronie", o.CronDaemon)}
	}
	if o.Write && o.File == "-" {
		return &usageError{fmt.Errorf("--write needs a FILE: standard input cannot be written back; for a user's crontab run crontab -l | cronlock crontab wrap - | crontab -")}
	}
	if o.Write {
		if err := crontabfile.CheckTarget(o.File, o.BackupDir); err != nil {
			return exitf(ExitFailed, "%v", err)
		}
	}
	if o.User == "" {
		if u, err := userdb.LookupID(os.Getuid()); err == nil {
			o.User = u.Username
		}
	}
	if o.Cronlock == "" {
		exe, err := os.Executable()
		if err != nil {
			return exitf(ExitFailed, "cannot find cronlock's own path (%v): give it with --cronlock /usr/local/bin/cronlock", err)
		}
		o.Cronlock = exe
	}
	return nil
}

// system reports whether the file is in the system format.
func (o *crontabOptions) system() bool {
	switch o.Format {
	case "user":
		return false
	case "system":
		return true
	}
	return o.File != "-" && crontabfile.IsSystem(o.File)
}

func (o *crontabOptions) wrapOptions() crontab.Options {
	sys := o.system()
	co := crontab.Options{
		Cronlock:   o.Cronlock,
		System:     sys,
		Local:      sys && !o.Fleet || !sys && o.Local,
		CronTZ:     o.CronDaemon == "cronie",
		User:       o.User,
		InCronPath: crontabfile.InCronPath,
	}
	co.DaemonZone, co.RunZone, co.RunZoneFrom = lintZones()
	return co
}

// lintZones are the zones lint compares a wrapped line's --schedule in: the one the cron
// daemon fires in (/etc/localtime's, as schedule.Parse reads it), and CRONLOCK_TZ when
// the settings give one, with where from. What cannot be read stays "" (lint then says
// less, it does not fail: the zones are not what the user asked lint about).
func lintZones() (daemon, run, runFrom string) {
	if s, err := schedule.Parse("* * * * *", ""); err == nil {
		daemon = s.Zone()
	}
	if st, err := loadSettings(); err == nil && st.vals["CRONLOCK_TZ"] != "" {
		run, runFrom = st.vals["CRONLOCK_TZ"], "CRONLOCK_TZ, "+st.source["CRONLOCK_TZ"]
	}
	return daemon, run, runFrom
}

// read returns the crontab's text.
func (o *crontabOptions) read() (string, error) {
	var b []byte
	var err error
	if o.File == "-" {
		b, err = io.ReadAll(o.Stdin)
	} else {
		b, err = os.ReadFile(o.File)
	}
	if err != nil {
		return "", exitf(ExitFailed, "cannot read the crontab %s: %v", o.name(), err)
	}
	return string(b), nil
}

// name is the file as messages show it.
func (o *crontabOptions) name() string {
	if o.File == "-" {
		return "(stdin)"
	}
	return o.File
}

func crontabWrap(o *crontabOptions) error {
	wo := o.wrapOptions()
	if err := wo.Check(); err != nil {
		return exitf(ExitFailed, "%v; give another with --cronlock", err)
	}
	text, err := o.read()
	if err != nil {
		return err
	}
	rw := crontab.WrapText(text, wo)
	for _, n := range rw.Notes {
		logline.Print(o.Stderr, o.LogFormat, logline.Warn, fmt.Sprintf("%s:%d: %s", o.name(), n.Line, n.Msg))
	}
	switch {
	case o.File == "-":
		_, err = io.WriteString(o.Stdout, rw.Text)
		return err
	case !o.Write:
		_, err = io.WriteString(o.Stdout, rw.Diff(o.File))
		return err
	case rw.Text == text:
		_, err = fmt.Fprintf(o.Stdout, "%s: nothing to wrap; left as it is\n", o.File)
		return err
	}
	backup, err := crontabfile.Replace(o.File, o.BackupDir, text, rw.Text)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	_, err = fmt.Fprintf(o.Stdout, "%s: wrapped; the original is in %s\n", o.File, backup)
	return err
}

func crontabLint(o *crontabOptions) error {
	wo := o.wrapOptions()
	// Debian's cron refuses a system file whose user field names no user here. Only
	// lint asks: wrap may be preparing a file for another machine.
	wo.UserExists = func(name string) bool {
		_, err := userdb.Lookup(name)
		return err == nil
	}
	text, err := o.read()
	if err != nil {
		return err
	}
	all, problems := crontab.LintText(text, wo, jobrun.Now())
	for _, f := range all {
		if _, err := fmt.Fprintf(o.Stdout, "%s:%d: %s\n", o.name(), f.Line, f.Msg); err != nil {
			return err
		}
	}
	if problems > 0 {
		return &ExitError{Code: 1}
	}
	return nil
}
