package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"cronlock/lockrun"
	"cronlock/tty"
)

// unlockOptions are the settings of `cronlock unlock`.
type unlockOptions struct {
	backendOptions
	Key    string
	Force  bool
	Stdout io.Writer
}

func newUnlockCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &unlockOptions{Stdout: stdout}
	c := &cobra.Command{
		Use:   "unlock --key KEY [--force]",
		Short: "Force-release a stale lock and say what was removed",
		Long: `Force-release a stale lock. On Redis the lock is removed only with its holder's
token, and a lock renewed within its TTL (its holder looks alive) is refused unless
--force. A local lock frees itself when its holder exits: unlock names the holder's pid.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.load(c); err != nil {
				return err
			}
			if !c.Flags().Changed("key") {
				return exitf(ExitFailed, "--key is required: the lock to release")
			}
			if err := checkKey(o.Key); err != nil {
				return err
			}
			return unlockRun(o)
		},
	}
	c.Flags().StringVarP(&o.Key, "key", "k", "", "the lock to release (required)")
	c.Flags().BoolVar(&o.Force, "force", false, "remove the lock even if its holder renewed it within its TTL")
	o.backendOptions.addFlags(c.Flags())
	return c
}

func unlockRun(o *unlockOptions) error {
	locker, err := o.open()
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	defer locker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*o.RedisTimeout+time.Second)
	defer cancel()
	h, err := locker.Unlock(ctx, o.Key, o.Force)
	if errors.Is(err, lockrun.ErrUnlockReplyLost) {
		// The key is free either way: not a failure, but not "nothing removed" either.
		_, err = fmt.Fprintln(o.Stdout, err)
		return err
	}
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	if h == nil {
		_, err = fmt.Fprintf(o.Stdout, "%s was not held on %s; nothing removed\n", o.Key, locker.Describe())
		return err
	}
	// A value cronlock did not write has neither time nor token: say nothing of them.
	since, token := "", ""
	if !h.Since.IsZero() {
		since = " since " + h.Since.Local().Format(time.RFC3339)
	}
	if h.FencingToken > 0 {
		token = fmt.Sprintf(" (fencing token %d)", h.FencingToken)
	}
	if h.Revoked {
		_, err = fmt.Fprintf(o.Stdout, "revoked %s on %s, held by %s%s%s: that run stops its job at its next renewal (exit 125, lock_lost), and the lock frees itself when its lease ends, in %s at most; no other run starts before\n",
			o.Key, locker.Describe(), tty.Escape(h.String()), since, token, h.TTLLeft.Round(time.Second))
		return err
	}
	_, err = fmt.Fprintf(o.Stdout, "removed %s from %s: it was held by %s%s%s\n",
		o.Key, locker.Describe(), tty.Escape(h.String()), since, token)
	return err
}
