package jobrun

import (
	"os"

	"cronlock/child"
	"cronlock/runstatus"
)

// openSpool makes the spool of a run with --output on-failure (Options.OutputOnFailure):
// the job's output is held on disk ($TMPDIR, else /var/tmp), Options.OutputMax bytes per
// destination in full, and written out only when the run does not succeed. It returns nil
// when the output goes out as it comes: the setting is always, or no spool could be made
// (one warning: the output is then printed rather than lost).
func (r *runner) openSpool() *child.Spool {
	o := r.o
	if !o.OutputOnFailure {
		return nil
	}
	dir := os.Getenv("TMPDIR")
	sp, err := child.OpenSpool(dir, o.OutputMax, o.Stdout, o.Stderr)
	if err != nil {
		fix := "make $TMPDIR a writable folder on disk"
		if dir == "" {
			fix = "make " + child.DefaultSpoolDir + " writable, or set TMPDIR to a writable folder on disk"
		}
		r.infof("warning: --output on-failure cannot hold the job's output (%v), so it is printed as it comes; %s", err, fix)
		return nil
	}
	return sp
}

// spoolToWrite reports whether the spool has output to write out for outcome out: then the
// lock goes first and the spool is written after (finishSpool), as a slow reader must
// not hold the lock.
func spoolToWrite(sp *child.Spool, out outcome) bool {
	return sp != nil && out.Status != runstatus.Succeeded
}

// finishSpool writes the spool out when the run, by its final outcome out, did not
// succeed, and drops it otherwise. Output that cannot be written makes the outcome that
// of an output error, as it would without the spool.
func (r *runner) finishSpool(sp *child.Spool, res *child.Result, out outcome) outcome {
	err := sp.Finish(out.Status == runstatus.Succeeded)
	if err == nil || res.OutputErr != nil {
		return out
	}
	res.OutputErr = err
	return outcomeOf(*res, r.o)
}
