package cmd

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cronlock/checkpoint"
	"cronlock/lockrun"
	conf "cronlock/settings"
)

// newCheckpointCmd is `cronlock checkpoint`: save and load, run by a job of cronlock run
// (through its run's socket, package checkpoint), and show and reset, run by people.
func newCheckpointCmd(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "checkpoint save|load|show|reset",
		Short: "A job's fenced progress, so that a retry or another host resumes it",
		Long: `A job started by cronlock run saves its position with 'cronlock checkpoint save VALUE'
(or '-' for stdin, at most 64 KiB) and reads it back with 'cronlock checkpoint load', which
prints the newest checkpoint of this tick (or run) and exits 0, exits 1 when there is none,
and 75 on any error. A save is written only while the run still holds its lock; a refused
save exits 75, and the job should stop. Save per batch, not per row: each save is a
backend write.`,
		Args: subcommandArgs,
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	socket := func() string { return os.Getenv(conf.JobCheckpointSocket) }
	save := &cobra.Command{
		Use:   "save [VALUE | -]",
		Short: "Save the job's position (inside a job of cronlock run)",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return exitf(ExitFailed, "checkpoint save takes one VALUE (or - for stdin), got %d arguments: quote a value that has spaces; nothing was saved", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			code, msg := checkpoint.Save(socket(), args, os.Stdin)
			return codeErr(code, msg)
		},
	}
	// A value that starts with - (a negative offset, a base64url page token) reads as a
	// flag: say how to save it rather than only that the flag is unknown.
	save.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		msg := err.Error()
		v, ok := strings.CutPrefix(msg, "unknown flag: ")
		if !ok {
			_, v, ok = strings.Cut(msg, "unknown shorthand flag: ")
			if ok {
				_, v, ok = strings.Cut(v, " in ")
			}
		}
		if !ok {
			return &usageError{plainNumberError(err)}
		}
		return exitf(ExitFailed, "checkpoint save: %q reads as a flag; to save a VALUE that starts with -, put -- before it (cronlock checkpoint save -- VALUE); nothing was saved", v)
	})
	var lastSuccess bool
	load := &cobra.Command{
		Use:   "load [--last-success]",
		Short: "Print the newest checkpoint of this tick: exit 0, 1 when none, 75 on error",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			code, msg := checkpoint.Load(socket(), lastSuccess, stdout)
			return codeErr(code, msg)
		},
	}
	load.Flags().BoolVar(&lastSuccess, "last-success", false, "the newest checkpoint of any succeeded run of the key, any tick")
	c.AddCommand(save, load, newCheckpointShowCmd(stdout), newCheckpointResetCmd(stdout))
	return c
}

// codeErr is a command's exit code and line as its error.
func codeErr(code int, msg string) error {
	if code == 0 {
		return nil
	}
	return &ExitError{Code: code, Msg: msg}
}

// ckptOptions are the settings of checkpoint show and reset.
type ckptOptions struct {
	backendOptions
	Key   string
	JSON  bool
	Force bool
}

func newCheckpointShowCmd(stdout io.Writer) *cobra.Command {
	o := &ckptOptions{}
	c := &cobra.Command{
		Use:   "show --key KEY [--json]",
		Short: "Show a key's newest checkpoint and that of its last succeeded run",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return o.do(c, func(ctx context.Context, s lockrun.CheckpointStore) error {
				return checkpoint.Show(ctx, s, o.Key, o.JSON, stdout)
			})
		},
	}
	c.Flags().StringVarP(&o.Key, "key", "k", "", "the job's key (required)")
	c.Flags().BoolVar(&o.JSON, "json", false, "one JSON object")
	o.backendOptions.addFlags(c.Flags())
	return c
}

func newCheckpointResetCmd(stdout io.Writer) *cobra.Command {
	o := &ckptOptions{}
	c := &cobra.Command{
		Use:   "reset --key KEY [--force]",
		Short: "Delete a key's checkpoints (refused while it runs, unless --force)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return o.do(c, func(ctx context.Context, s lockrun.CheckpointStore) error {
				return checkpoint.Reset(ctx, s, o.Key, o.Force, stdout)
			})
		},
	}
	c.Flags().StringVarP(&o.Key, "key", "k", "", "the job's key (required)")
	c.Flags().BoolVar(&o.Force, "force", false, "delete them even while the key's lock is held")
	o.backendOptions.addFlags(c.Flags())
	return c
}

// do opens the backend and calls f with its checkpoint store.
func (o *ckptOptions) do(c *cobra.Command, f func(ctx context.Context, s lockrun.CheckpointStore) error) error {
	if err := o.load(c); err != nil {
		return err
	}
	if !c.Flags().Changed("key") {
		return exitf(ExitFailed, "--key is required: the job whose checkpoints to %s", c.Name())
	}
	if err := checkKey(o.Key); err != nil {
		return err
	}
	locker, err := o.open()
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	defer locker.Close()
	s, ok := locker.(lockrun.CheckpointStore)
	if !ok {
		return exitf(ExitFailed, "%s does not store checkpoints", locker.Describe())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*o.RedisTimeout+time.Second)
	defer cancel()
	if err := f(ctx, s); err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	return nil
}
