package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"cronlock/lockrun"
	"cronlock/suspend"
	"cronlock/tty"
)

// ExitNotSuspended is resume's exit code for a key that was not suspended (never, or its
// --for/--until has passed): nothing was changed.
const ExitNotSuspended = 1

// suspendOptions are the settings of `cronlock suspend` and `cronlock resume`.
type suspendOptions struct {
	backendOptions
	suspend.Options
	Stdout io.Writer
}

func newSuspendCmd(stdout io.Writer) *cobra.Command {
	o := &suspendOptions{Stdout: stdout}
	c := &cobra.Command{
		Use:   "suspend --key KEY [--for D | --until TIME] [--reason TEXT]",
		Short: "Pause a job on every host: its runs end suspended until resume",
		Long: `Pause a job on every host that uses this backend, like a CronJob's suspend: each
run of KEY ends with status suspended and the conflict exit code, without starting its
job, until cronlock resume, --for D has passed, or --until TIME has come. A job already
running is not stopped. Who suspended it (user@host), since when, until when and why are
shown by status, check and a suspended run's -v line. resume does not run the ticks that
were skipped meanwhile, and a Healthchecks check (--ping) is not paused.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.load(c); err != nil {
				return err
			}
			if err := needKey(c, o.Key); err != nil {
				return err
			}
			s, err := suspend.New(o.Options)
			var ue *suspend.UsageError
			if errors.As(err, &ue) {
				return &usageError{err}
			}
			if err != nil {
				return exitf(ExitFailed, "%v", err)
			}
			return suspendRun(o, s)
		},
	}
	c.Flags().StringVarP(&o.Key, "key", "k", "", "the job to suspend (required)")
	c.Flags().Var(durationValue{d: &o.For, positive: true}, "for", "lift the suspension by itself after this long (2h, 1d)")
	c.Flags().StringVar(&o.Until, "until", "", "lift the suspension by itself at this time (2026-12-24 06:00, RFC 3339)")
	c.Flags().StringVar(&o.Reason, "reason", "", "why, for whoever finds it suspended")
	c.Flags().BoolVar(&o.UTC, "utc", false, "read --until in UTC, not local time")
	o.backendOptions.addFlags(c.Flags())
	return c
}

func newResumeCmd(stdout io.Writer) *cobra.Command {
	o := &suspendOptions{Stdout: stdout}
	c := &cobra.Command{
		Use:   "resume --key KEY",
		Short: "Lift a job's suspension: its next tick runs",
		Long: `Lift a job's suspension on every host. The next tick runs as usual; the ticks
skipped while it was suspended are not run. A key that is not suspended exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.load(c); err != nil {
				return err
			}
			if err := needKey(c, o.Key); err != nil {
				return err
			}
			return resumeRun(o)
		},
	}
	c.Flags().StringVarP(&o.Key, "key", "k", "", "the job to resume (required)")
	o.backendOptions.addFlags(c.Flags())
	return c
}

// needKey refuses a missing or illegal --key.
func needKey(c *cobra.Command, key string) error {
	if !c.Flags().Changed("key") {
		return &usageError{fmt.Errorf("--key is required: the job to %s", c.Name())}
	}
	return checkKey(key)
}

func suspendRun(o *suspendOptions, s *lockrun.Suspension) error {
	return withSuspender(o, func(ctx context.Context, l lockrun.Locker) (string, error) {
		return suspend.Made(o.Key, s, l.Describe()), suspend.Suspend(ctx, l, o.Key, s)
	})
}

func resumeRun(o *suspendOptions) error {
	return withSuspender(o, func(ctx context.Context, l lockrun.Locker) (string, error) {
		s, err := suspend.Resume(ctx, l, o.Key)
		if suspend.IsNotSuspended(err) {
			return "", exitf(ExitNotSuspended, "%v", err)
		}
		if err != nil {
			return "", err
		}
		return suspend.Lifted(o.Key, s, l.Describe(), time.Now()), nil
	})
}

// withSuspender opens the backend, runs f within the operations' bound, and prints the
// line f returns (escaped: a reason is free text); f's error is a failure (125) unless
// it is an *ExitError already.
func withSuspender(o *suspendOptions, f func(ctx context.Context, l lockrun.Locker) (string, error)) error {
	locker, err := o.open()
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	defer locker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*o.RedisTimeout+time.Second)
	defer cancel()
	line, err := f(ctx, locker)
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		return err
	case err != nil:
		return exitf(ExitFailed, "%v", err)
	}
	_, err = fmt.Fprintln(o.Stdout, tty.Escape(line))
	return err
}
