package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"cronlock/configcheck"
	"cronlock/history"
	"cronlock/jobrun"
	"cronlock/lockrun"
	"cronlock/lockrun/local"
	"cronlock/lockrun/redis"
	"cronlock/logline"
	conf "cronlock/settings"
)

// Exit codes of `cronlock config` and `config check`: 0 all fine, exitProblems when a
// problem was found (each on its own stderr line), ExitFailed for a mistake on the
// command line itself.
const exitProblems = 1

// configOptions are the flags of `cronlock config [check]`: the backend's and --history,
// which then show as the origin "flag".
type configOptions struct {
	backendOptions
	History string
	JSON    bool
}

func newConfigCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &configOptions{}
	c := &cobra.Command{
		Use:   "config [check]",
		Short: "Show the settings in force and where each came from",
		Long: `Show every setting in force, as a run of this machine would see it, and where each
came from: default, file:PATH:LINE (the config file), env or flag:--NAME. Secrets are
masked. The last line says which backend runs lock on.

Exit 0, or 1 with one line on stderr per problem (an unknown CRONLOCK_ variable, a bad
value, a config file this user cannot read); 125 for a mistake on this command line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return configRun(c, o, false) },
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "Check the settings, and try the backend, the history file and the lock folder",
		Long: `Check the settings as config does, then try what they point at, writing nothing:
the backend (reachable; on Redis also its eviction policy, the ACL user's rights to
every command cronlock sends, and this host's clock against the server's TIME), the
history file (opens and is writable, or can be created), the lock folder (yours,
private, writable, or can be created), and the password files.

Prints what is fine on stdout; exit 0 when all is, else 1 with one line per problem
on stderr; 125 for a mistake on this command line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return configRun(c, o, true) },
	}
	c.AddCommand(check)
	pf := c.PersistentFlags()
	o.backendOptions.addFlags(pf)
	pf.StringVar(&o.History, "history", "", "SQLite history file (env CRONLOCK_HISTORY)")
	c.Flags().BoolVar(&o.JSON, "json", false, "one JSON object per setting and line")
	return c
}

// configRun resolves the settings as a run does (a run command's own flags, filled from
// the file, the environment and config's flags), shows them or checks them, and says
// every problem found.
func configRun(c *cobra.Command, o *configOptions, tryAll bool) error {
	format, stderr := logFormatOf(c), c.ErrOrStderr()
	var problems []string
	say := func(err error) { problems = append(problems, err.Error()) }
	loaded, errs := conf.LoadAll(os.Environ())
	for _, err := range errs {
		say(err)
	}
	if loaded != nil {
		s := wrapSettings(loaded)
		rc, ro := newRunCommand(io.Discard, io.Discard)
		rf := rc.Flags()
		c.Flags().Visit(func(f *pflag.Flag) {
			if rf.Lookup(f.Name) != nil {
				rf.Set(f.Name, f.Value.String())
			}
		})
		bad := 0
		for _, st := range conf.Table {
			if st.Flag != "" && rf.Lookup(st.Flag) != nil {
				if err := s.apply(rf, map[string]string{st.Flag: st.Name}); err != nil {
					say(err)
					bad++
				}
			}
		}
		if _, err := parseRetention(s.vals[retentionName], s.source[retentionName]); err != nil {
			say(err)
		}
		if bad == 0 {
			rf.Set("key", "config-check")
			if err := ro.resolve(rc, s); err != nil {
				say(err)
				bad++
			}
		}
		if !tryAll {
			if err := conf.Write(c.OutOrStdout(), configEntries(c, rf, s), o.JSON); err != nil {
				return err
			}
			if bad == 0 && !o.JSON {
				fmt.Fprintln(c.OutOrStdout(), "# runs lock on: "+backendInForce(&ro.backendOptions, s))
			}
		} else {
			for _, p := range tryConfig(c, ro, s, bad == 0) {
				say(errors.New(p))
			}
		}
	}
	for _, p := range problems {
		logline.Print(stderr, format, logline.Error, p)
	}
	if len(problems) > 0 {
		return &ExitError{Code: exitProblems}
	}
	return nil
}

// configEntries is every setting in force with its origin, secrets masked.
func configEntries(c *cobra.Command, rf *pflag.FlagSet, s *settings) []conf.Entry {
	masks := map[string]func(string) string{
		"CRONLOCK_REDIS_URL": redis.RedactURL,
		"CRONLOCK_PING_URL":  conf.MaskPingURL,
		"CRONLOCK_ETCD_ENDPOINTS": func(v string) string {
			parts := strings.Split(v, ",")
			for i, p := range parts {
				parts[i] = redis.RedactURL(p)
			}
			return strings.Join(parts, ",")
		},
	}
	var out []conf.Entry
	for _, st := range conf.Table {
		e := conf.Entry{Name: st.Name, Origin: s.loaded.Origins[st.Name]}
		v, set := s.vals[st.Name]
		switch f := c.Flags().Lookup(st.Flag); {
		case st.Flag != "" && f != nil && f.Changed:
			e.Value, e.Origin = f.Value.String(), conf.Origin{Kind: conf.Flag, Flag: st.Flag}
		case set:
			e.Value = v
		default:
			e.Value, e.Origin = configDefault(st, rf), conf.Origin{Kind: conf.Default}
		}
		if m := masks[st.Name]; m != nil && e.Value != "" {
			e.Value = m(e.Value)
		}
		out = append(out, e)
	}
	return out
}

// configDefault is the value a run uses for st when nothing sets it.
func configDefault(st conf.Setting, rf *pflag.FlagSet) string {
	switch st.Name {
	case "CRONLOCK_HISTORY":
		p, _ := history.DefaultPath()
		return p
	case "CRONLOCK_LOCK_DIR":
		return local.DefaultDir()
	case "CRONLOCK_NODE":
		n, _ := os.Hostname()
		return n
	case "CRONLOCK_LOG_FORMAT":
		return logline.Text
	case retentionName:
		return strconv.Itoa(int(history.DefaultRetention.Hours()/24)) + "d"
	case "CRONLOCK_FLEET_KEEP":
		return strconv.Itoa(lockrun.DefaultFleetKeep)
	}
	if f := rf.Lookup(st.Flag); f != nil {
		return f.DefValue
	}
	return ""
}

// backendInForce says which backend runs lock on, and why: a host that locks alone
// because no server is set must be told so.
func backendInForce(b *backendOptions, s *settings) string {
	switch b.Backend {
	case "redis":
		if l, err := b.open(); err == nil {
			defer l.Close()
			return l.Describe()
		}
		return "redis"
	case "etcd":
		return "etcd " + b.EtcdEndpoints
	}
	dir := b.LockDir
	if dir == "" {
		dir = local.DefaultDir()
	}
	if s.vals["CRONLOCK_BACKEND"] == "local" {
		return "local " + dir
	}
	return "local " + dir + " (no Redis URL or etcd endpoints are set: this host locks alone; set CRONLOCK_BACKEND=redis in " + DefaultConfigFile + " so that a host without the URL fails instead)"
}

// tryConfig tries what the settings point at, writing nothing, and returns the
// problems; what is fine is printed on stdout. resolved says the settings were accepted:
// only then is the backend tried.
func tryConfig(c *cobra.Command, ro *runOptions, s *settings, resolved bool) []string {
	ck := &configcheck.Checker{Out: c.OutOrStdout()}
	b := &ro.backendOptions
	if path := s.loaded.File; s.loaded.Origins["CRONLOCK_REDIS_URL"].Path == path && redis.URLHasPassword(s.vals["CRONLOCK_REDIS_URL"]) {
		ck.URLPasswordInFile(path, s.source["CRONLOCK_REDIS_URL"])
	}
	for name, what := range map[string]string{"CRONLOCK_REDIS_PASSWORD_FILE": "Redis", sentinelPasswordName: "Sentinel", "CRONLOCK_ETCD_PASSWORD_FILE": "etcd"} {
		path := s.vals[name]
		if f := c.Flags().Lookup(configFlagOf(name)); f != nil && f.Changed {
			path = f.Value.String()
		}
		if path != "" {
			ck.PasswordFile(path, name, func() error { _, err := readPasswordFile(path, what, name); return err })
		}
	}
	if resolved && b.Backend != "local" {
		if l, err := b.open(); err != nil {
			ck.Problems = append(ck.Problems, err.Error())
		} else {
			ck.Backend(l, defaultCheckTimeout, ro.job.MaxSkew, jobrun.Now)
			l.Close()
		}
	}
	ck.History(ro.job.History, isOff(ro.job.History))
	ck.LockDir(b.LockDir)
	if resolved {
		ck.OK("runs lock on " + backendInForce(b, s))
	}
	return ck.Problems
}

// configFlagOf is the flag of setting name, "" when it has none.
func configFlagOf(name string) string {
	for _, st := range conf.Table {
		if st.Name == name {
			return st.Flag
		}
	}
	return ""
}
