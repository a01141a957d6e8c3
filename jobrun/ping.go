package jobrun

import (
	"context"

	"cronlock/notify"
	"cronlock/runstatus"
)

// pingDeadline bounds the pings of one run end (the wait for the start ping included);
// only a test build shortens it (testhooks_on.go).
var pingDeadline = notify.DefaultDeadline

// pinger is the run's Healthchecks pinger, made once the run id is known.
func (r *runner) pinger() *notify.Pinger {
	if r.ping == nil {
		r.ping = notify.New(r.o.Ping, r.runID)
		r.ping.Deadline = pingDeadline
		r.ping.UserAgent = "cronlock/" + r.o.Version
	}
	return r.ping
}

// pingStart sends the start ping of --ping in the background: the job does not wait.
func (r *runner) pingStart() {
	if r.o.Ping != "" {
		r.pinger().Start()
	}
}

// pingEnd sends the run's final outcome to --ping, after the lock is released: success,
// /EXIT for a non-zero exit (125 for a run that failed before its job started, 128+N for
// one interrupted), /fail for a run that exits 0 without succeeding (missed, whatever
// --conflict-exit-code says; a lost lock under --on-lock-lost continue). A skipped run is
// not pinged: the host that ran the job pings. A failed ping changes neither outcome nor
// exit code; it is one warning, at most hourly (cron would mail every run's), since
// Healthchecks itself alerts when pings stop arriving.
func (r *runner) pingEnd(code int) {
	o := r.o
	if o.Ping == "" || r.row == nil || r.runID == "" {
		return
	}
	st := r.row.Status
	// A suspended run pings nothing, as a skip: not a failure, and no success either
	// (the README says to pause the check at Healthchecks as well).
	if st == "" || st == runstatus.Skipped || st == runstatus.Running || st == runstatus.Suspended {
		return
	}
	exit := code
	if st == runstatus.Missed {
		exit = 0
	}
	err := r.pinger().Finish(context.Background(), exit, st != runstatus.Succeeded, r.pingBody())
	if err != nil && !o.Quiet && r.shouldWarn("ping", o.Key, err) {
		r.infof("warning: ping to the --ping URL failed: %v; the run's outcome and exit code are unchanged%s", err, r.repeatNote())
	}
}

// pingBody is what a failure ping carries: the end of the output, then cronlock's own
// line about the run (endLine; a run that never started its job has only its error),
// on a line of its own. The pinger cuts it to what the server takes.
func (r *runner) pingBody() []byte {
	row := r.row
	if row.Status == runstatus.Succeeded {
		return nil
	}
	line := r.pingLine
	if line == "" {
		line = row.Error
	}
	body := append([]byte(nil), notify.TailN(row.Output, maxPingBody)...)
	if line != "" {
		if len(body) > 0 && body[len(body)-1] != '\n' {
			body = append(body, '\n')
		}
		body = append(append(body, "cronlock: "...), line...)
		body = append(body, '\n')
	}
	return body
}

// maxPingBody bounds the body before the pinger cuts it to the server's limit.
const maxPingBody = 10 << 20
