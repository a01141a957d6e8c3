package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cronlock/lockrun"
	"cronlock/logline"
	"cronlock/runview"
	"cronlock/suspend"
	"cronlock/tty"
)

// statusOptions are the settings of `cronlock status`.
type statusOptions struct {
	backendOptions
	Key       string
	JSON      bool
	Stdout    io.Writer
	Stderr    io.Writer
	LogFormat string
}

func newStatusCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &statusOptions{Stdout: stdout, Stderr: stderr}
	c := &cobra.Command{
		Use:   "status [--key KEY]",
		Short: "Show the locks held right now and by whom, and the suspended keys",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.load(c); err != nil {
				return err
			}
			if c.Flags().Changed("key") {
				if err := checkKey(o.Key); err != nil {
					return err
				}
			}
			o.LogFormat = logFormatOf(c)
			return statusRun(o)
		},
	}
	c.Flags().StringVarP(&o.Key, "key", "k", "", "show only this lock")
	c.Flags().BoolVar(&o.JSON, "json", false, "one JSON object per lock and line, for scripts")
	o.backendOptions.addFlags(c.Flags())
	return c
}

// lockStatus is one held lock as status prints it.
type lockStatus struct {
	Key          string     `json:"key"`
	Backend      string     `json:"backend"`
	Node         string     `json:"node"`
	PID          int        `json:"pid"`
	RunID        string     `json:"run_id"`
	Since        *time.Time `json:"since"`   // null when unknown (a value cronlock did not write)
	HeldMS       *int64     `json:"held_ms"` // null with since
	FencingToken uint64     `json:"fencing_token"`
	TTLLeftMS    int64      `json:"ttl_left_ms,omitempty"`
	Revoked      bool       `json:"revoked,omitempty"` // by unlock --force; frees itself at ttl_left_ms
	NoExpiry     bool       `json:"no_expiry,omitempty"`
	// Suspension is the key's suspension (cronlock suspend). A key that is suspended and
	// not held gets a line of its own with key, backend and suspension.
	Suspension *lockrun.Suspension `json:"suspension,omitempty"`
}

func statusRun(o *statusOptions) error {
	locker, err := o.open()
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	defer locker.Close()
	// No deadline on the whole walk: every Redis call has its own (--redis-timeout), and
	// listing a large keyspace takes many SCAN calls, each of them quick.
	ctx := context.Background()
	held := map[string]lockrun.Holder{}
	var susps map[string]*lockrun.Suspension // in force, by key
	if o.Key != "" {
		h, err := locker.Inspect(ctx, o.Key)
		if err != nil {
			return exitf(ExitFailed, "%v", err)
		}
		if h != nil {
			held[o.Key] = *h
		}
		susp, err := lockrun.ReadSuspensionOf(ctx, locker, o.Key)
		if err != nil && !errors.Is(err, lockrun.ErrNoSuspend) {
			return exitf(ExitFailed, "%v", err)
		}
		if susp != nil {
			susps = map[string]*lockrun.Suspension{o.Key: susp}
		}
	} else {
		if held, err = locker.List(ctx); err != nil {
			return exitf(ExitFailed, "%v", err)
		}
		if susps, err = lockrun.AllSuspensionsOf(ctx, locker); err != nil && !errors.Is(err, lockrun.ErrNoSuspend) {
			return exitf(ExitFailed, "%v", err)
		}
	}
	if rl, ok := locker.(interface {
		Eviction(context.Context) (string, error)
	}); ok {
		// Read-only: status never refuses an evicting server, it says so. A server that
		// hides INFO (no +info) is not worth a second warning here; run gives it.
		if policy, err := rl.Eviction(ctx); err == nil && policy != "" {
			logline.Print(o.Stderr, o.LogFormat, logline.Warn, fmt.Sprintf(
				"warning: %s can evict keys (maxmemory-policy %s): a lock it evicts lets two hosts run a job at once, and run refuses it unless CRONLOCK_ALLOW_EVICTION=yes; set maxmemory-policy noeviction",
				locker.Describe(), policy))
		}
	}
	keys := make([]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := time.Now()
	rows := make([]lockStatus, 0, len(keys))
	for _, k := range keys {
		h := held[k]
		r := lockStatus{Key: k, Backend: locker.Describe(), Node: h.Node, PID: h.PID,
			RunID: h.RunID, FencingToken: h.FencingToken, TTLLeftMS: h.TTLLeft.Milliseconds(), Revoked: h.Revoked, NoExpiry: h.NoExpiry}
		// A lock value cronlock did not write (a SET by hand) has no acquisition time:
		// unknown, not 0001-01-01 held for 292 years.
		if !h.Since.IsZero() {
			since, ms := h.Since.UTC(), now.Sub(h.Since).Milliseconds()
			r.Since, r.HeldMS = &since, &ms
		}
		r.Suspension = susps[k]
		rows = append(rows, r)
	}
	suspended := slices.Sorted(maps.Keys(susps))
	if o.JSON {
		// Suspended keys that are not held get a line of their own, in key order with
		// the held ones.
		for _, k := range suspended {
			if _, ok := held[k]; !ok {
				rows = append(rows, lockStatus{Key: k, Backend: locker.Describe(), Suspension: susps[k]})
			}
		}
		slices.SortStableFunc(rows, func(a, b lockStatus) int { return strings.Compare(a.Key, b.Key) })
		for _, r := range rows {
			// Node names and run ids come from other hosts.
			if err := runview.WriteJSONLine(o.Stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		what := "no locks are held"
		if o.Key != "" {
			what = fmt.Sprintf("%s is not held", o.Key)
		}
		if _, err := fmt.Fprintf(o.Stdout, "%s on %s\n", what, locker.Describe()); err != nil {
			return err
		}
		return writeSuspended(o.Stdout, suspended, susps, now)
	}
	fmt.Fprintf(o.Stdout, "locks held on %s:\n", locker.Describe())
	table := [][]string{{"KEY", "NODE", "PID", "RUN", "SINCE", "HELD", "FENCING TOKEN"}}
	for _, r := range rows {
		node, pid, run, since, heldFor, token := "-", "-", "-", "-", "-", "-"
		if r.Node != "" {
			node = tty.Escape(r.Node)
		}
		if r.PID > 0 {
			pid = strconv.Itoa(r.PID)
		}
		if r.RunID != "" {
			run = tty.Escape(r.RunID)
		}
		if r.Since != nil {
			since = r.Since.Local().Format("2006-01-02 15:04:05 MST")
			heldFor = (time.Duration(*r.HeldMS) * time.Millisecond).String()
		}
		if r.FencingToken > 0 {
			token = strconv.FormatUint(r.FencingToken, 10)
		}
		if r.NoExpiry {
			node += " (no expiry: never frees itself; cronlock unlock --force removes it)"
		}
		if r.Revoked {
			// The holder may still be stopping its job; the key is what keeps others out.
			node += " (revoked, frees in " + (time.Duration(r.TTLLeftMS) * time.Millisecond).Round(time.Second).String() + ")"
		}
		table = append(table, []string{tty.Escape(r.Key), node, pid, run, since, heldFor, token})
	}
	if _, err = io.WriteString(o.Stdout, formatTable(table, nil, nil)); err != nil {
		return err
	}
	return writeSuspended(o.Stdout, suspended, susps, now)
}

// writeSuspended prints a line for each suspended key (who, since, until, why), held or
// not: a suspension outlives its key's runs and is what keeps the next ones from starting.
func writeSuspended(w io.Writer, keys []string, susps map[string]*lockrun.Suspension, now time.Time) error {
	for _, k := range keys {
		if _, err := fmt.Fprintln(w, tty.Escape(suspend.StatusLine(k, susps[k], now))); err != nil {
			return err
		}
	}
	return nil
}
