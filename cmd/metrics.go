package cmd

// The metrics file of --metrics-dir: the metrics package writes it; cmd decides when,
// and what a failure costs.

import (
	"fmt"
	"path/filepath"

	"cronlock/metrics"
)

// recordMetrics writes the metrics file of a finished run when --metrics-dir is set.
// A failure is one warning line, at most once an hour per host (a misconfigured folder
// under a per-minute job must not flood cron mail): monitoring never changes a run's exit
// code.
func (r *runner) recordMetrics(code int) {
	o := r.o
	if o.MetricsDir == "" || r.row == nil || r.row.Status == "" {
		return
	}
	f := metrics.Facts{Key: o.Key, Node: o.Node, Status: r.row.Status, ExitCode: code,
		Started: r.row.StartedAt, Finished: r.row.FinishedAt}
	if err := metrics.Write(o.MetricsDir, f); err != nil && !o.Quiet && !r.warnedLately("metrics") {
		r.infof("warning: cannot write the metrics of this run (%v); its exit code is unchanged. Fix that folder, or unset --metrics-dir and CRONLOCK_METRICS_DIR", err)
	}
}

// checkMetricsDir refuses a relative --metrics-dir: cron starts jobs in the home folder,
// a login shell wherever it is, and node_exporter reads one fixed folder.
func checkMetricsDir(dir string) error {
	if dir != "" && !filepath.IsAbs(dir) {
		return fmt.Errorf("--metrics-dir %q is not an absolute path; give node_exporter's textfile folder, e.g. /var/lib/node_exporter/textfile_collector", dir)
	}
	return nil
}
