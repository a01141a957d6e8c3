package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"cronlock/fleetrecord"
	"cronlock/lockrun"
	"cronlock/runview"
)

// openFleet connects to the Redis or etcd that holds the fleet's record, from the backend
// flags and settings alone: a monitoring box needs only the URL.
func openFleet(c *cobra.Command, bo *backendOptions) (lockrun.FleetStore, error) {
	if err := bo.load(c); err != nil {
		return nil, err
	}
	if bo.Backend != "redis" && bo.Backend != "etcd" {
		return nil, &usageError{fmt.Errorf("--fleet reads the fleet's record in Redis or etcd: give --redis or CRONLOCK_REDIS_URL, or --etcd or CRONLOCK_ETCD_ENDPOINTS (the local backend has only this machine's history)")}
	}
	l, err := bo.open()
	if err != nil {
		return nil, exitf(ExitFailed, "%v", err)
	}
	return l.(lockrun.FleetStore), nil
}

// historyFleetRun is `cronlock history --fleet`: every host's runs from the record in
// Redis, with node, tick and DUPLICATE marks.
func historyFleetRun(c *cobra.Command, o *historyOptions, bo *backendOptions) error {
	l, err := openFleet(c, bo)
	if err != nil {
		return err
	}
	defer l.Close()
	// Filters other than the key are applied here, so the whole kept record is read
	// for them; without, the newest --limit of each key is all that travels.
	filtered := o.Status != "" || o.Node != "" || !o.Since.IsZero() || !o.Until.IsZero()
	per := o.Limit
	if filtered {
		per = 0
	}
	es, err := fleetrecord.Read(l, o.Key, per)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	var out []lockrun.FleetEntry
	for _, e := range es {
		st := e.Started()
		switch {
		case o.Status != "" && e.Status != o.Status, o.Node != "" && e.Node != o.Node,
			!o.Since.IsZero() && st.Before(o.Since), !o.Until.IsZero() && !st.Before(o.Until):
			continue
		}
		out = append(out, e)
	}
	more := o.Limit > 0 && len(out) > o.Limit
	if more {
		out = out[:o.Limit]
	}
	if len(out) == 0 {
		if len(es) == 0 {
			return noRuns(o, "no runs in the fleet's record on "+l.Describe())
		}
		return noRuns(o, "no runs match")
	}
	if o.JSON {
		return runview.WriteFleetJSON(o.Stdout, out)
	}
	if err := runview.WriteFleetTable(o.Stdout, out, o.view()); err != nil {
		return err
	}
	if more || (o.Key == "" && o.Limit > 0 && len(out) == o.Limit) {
		fmt.Fprintf(o.Stderr, "cronlock: the newest %d runs shown; --limit 0 shows every run the record keeps\n", len(out))
	}
	return nil
}

// historyStatsFleetRun is `cronlock history stats --fleet`: per-key stats of the
// fleet's record, in the format of history stats.
func historyStatsFleetRun(c *cobra.Command, o *historyStatsOptions, bo *backendOptions) error {
	l, err := openFleet(c, bo)
	if err != nil {
		return err
	}
	defer l.Close()
	es, err := fleetrecord.Read(l, o.Filter.Key, 0)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	stats, err := fleetrecord.Stats(l, es, o.Filter)
	if err != nil {
		return exitf(ExitFailed, "%v", err)
	}
	hist := &historyOptions{JSON: o.JSON, Stdout: o.Stdout, Stderr: o.Stderr, LogFormat: o.LogFormat}
	if len(stats) == 0 {
		return noRuns(hist, "no runs match in the fleet's record on "+l.Describe())
	}
	return writeStats(o, stats)
}
