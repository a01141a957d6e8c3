package checkpoint

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"cronlock/lockrun"
	"cronlock/settings"
)

// Exit codes of the job's `cronlock checkpoint save` and `load`.
const (
	// ExitNone: load found no checkpoint (and printed nothing).
	ExitNone = 1
	// ExitTempFail (EX_TEMPFAIL): the save was refused or failed, or load failed. After
	// a refused save the job must stop: another run may hold the lock. A load never exits
	// 1 on an error, so `load || start from zero` cannot start over after a hiccup.
	ExitTempFail = 75
	// ExitUsage: bad usage, a value over 64 KiB, or no run to talk to (the command was
	// not started by a job of `cronlock run`).
	ExitUsage = 125
)

// outsideRun is the line of a checkpoint command that no run started.
var outsideRun = fmt.Sprintf("no cronlock run to talk to: %s is not set; cronlock checkpoint save and load work only inside a job started by cronlock run (outside one, use cronlock checkpoint show or reset --key KEY)", settings.JobCheckpointSocket)

// Save is `cronlock checkpoint save [VALUE | -]` with socket from the job's environment:
// it returns the exit code and, for a non-zero one, the line to say.
func Save(socket string, args []string, stdin io.Reader) (code int, msg string) {
	if socket == "" {
		return ExitUsage, outsideRun
	}
	var value []byte
	switch {
	case len(args) == 0 || args[0] == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, lockrun.MaxCheckpoint+1))
		if err != nil {
			return ExitUsage, fmt.Sprintf("checkpoint save: read the value from stdin: %v", err)
		}
		value = b
	default:
		value = []byte(args[0])
	}
	if len(value) > lockrun.MaxCheckpoint {
		return ExitUsage, fmt.Sprintf("checkpoint save: the value is over %d bytes (64 KiB); nothing was saved: save a position (an id, an offset, a page token), not the data", lockrun.MaxCheckpoint)
	}
	err := (&Client{Path: socket}).Save(value)
	var re *ReplyError
	var ue *UnreachableError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &re) && re.Status == StatusRefused:
		return ExitTempFail, re.Msg
	case errors.As(err, &ue):
		return ExitTempFail, fmt.Sprintf("checkpoint save failed, nothing was saved: %v", err)
	default:
		return ExitTempFail, fmt.Sprintf("checkpoint save failed, it may or may not be stored: %v", err)
	}
}

// Load is `cronlock checkpoint load [--last-success]`: the value goes raw to stdout.
func Load(socket string, lastSuccess bool, stdout io.Writer) (code int, msg string) {
	if socket == "" {
		return ExitUsage, outsideRun
	}
	v, found, err := (&Client{Path: socket}).Load(lastSuccess)
	if err != nil {
		return ExitTempFail, fmt.Sprintf("checkpoint load failed (exit 75, not 1: do not start over): %v", err)
	}
	if !found {
		return ExitNone, ""
	}
	if _, err := stdout.Write(v); err != nil {
		return ExitTempFail, fmt.Sprintf("checkpoint load: write the value: %v", err)
	}
	return 0, ""
}

// shown is one checkpoint in `checkpoint show --json`.
type shown struct {
	Scope       string    `json:"scope"`
	RunID       string    `json:"run_id"`
	Node        string    `json:"node"`
	TickAttempt int       `json:"tick_attempt"`
	Try         int       `json:"try"`
	Token       uint64    `json:"fencing_token"`
	Saved       time.Time `json:"saved_at"`
	Size        int       `json:"size"`
	Value       *string   `json:"value"` // null when not UTF-8
	ValueBase64 string    `json:"value_base64"`
}

func toShown(c *lockrun.Checkpoint) *shown {
	if c == nil {
		return nil
	}
	s := &shown{Scope: c.Scope, RunID: c.RunID, Node: c.Node, TickAttempt: c.TickAttempt, Try: c.Try,
		Token: c.Token, Saved: c.Saved.UTC(), Size: len(c.Value), ValueBase64: base64.StdEncoding.EncodeToString(c.Value)}
	if utf8.Valid(c.Value) {
		v := string(c.Value)
		s.Value = &v
	}
	return s
}

// Show is `cronlock checkpoint show --key K [--json]`.
func Show(ctx context.Context, store lockrun.CheckpointStore, key string, asJSON bool, w io.Writer) error {
	last, ok, err := store.Checkpoints(ctx, key)
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.Marshal(struct {
			Key         string `json:"key"`
			Last        *shown `json:"last"`
			LastSuccess *shown `json:"last_success"`
		}{key, toShown(last), toShown(ok)})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if last == nil && ok == nil {
		_, err := fmt.Fprintf(w, "%s has no checkpoint\n", key)
		return err
	}
	for _, x := range []struct {
		what string
		c    *lockrun.Checkpoint
	}{{"newest", last}, {"last success", ok}} {
		if x.c == nil {
			if _, err := fmt.Fprintf(w, "%s: %s: none\n", key, x.what); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(w, "%s: %s: %s\n", key, x.what, Describe(x.c, 200)); err != nil {
			return err
		}
	}
	return nil
}

// Describe is one checkpoint for people: its size, first bytes (escaped: a job must not
// drive the reader's terminal), scope, run and when it was saved.
func Describe(c *lockrun.Checkpoint, first int) string {
	v := c.Value
	more := ""
	if len(v) > first {
		v, more = v[:first], "…"
	}
	return fmt.Sprintf("%d bytes %s%s (scope %s, run %s on %s, tick attempt %d, try %d, fencing token %d, saved %s)",
		len(c.Value), strconv.Quote(string(v)), more, c.Scope, c.RunID, strconv.Quote(c.Node)[1:len(strconv.Quote(c.Node))-1],
		c.TickAttempt, c.Try, c.Token, c.Saved.Local().Format(time.RFC3339))
}

// Reset is `cronlock checkpoint reset --key K [--force]`.
func Reset(ctx context.Context, store lockrun.CheckpointStore, key string, force bool, w io.Writer) error {
	n, err := store.ResetCheckpoints(ctx, key, force)
	var he *lockrun.HeldError
	if errors.As(err, &he) {
		return fmt.Errorf("%s is running (%v): its checkpoints were not reset, as the job would save again or start over; wait for it to end, or pass --force", key, he)
	}
	if err != nil {
		return err
	}
	if n == 0 {
		_, err = fmt.Fprintf(w, "%s had no checkpoint; nothing removed\n", key)
		return err
	}
	_, err = fmt.Fprintf(w, "removed %d checkpoint record(s) of %s\n", n, key)
	return err
}
