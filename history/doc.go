// Package history records every cronlock run in a local SQLite file and reads it back.
//
// One row is written when a run starts (status "running") and completed when it ends, so
// a run whose cronlock died is still visible; Reap later marks such rows "abandoned",
// reliably even when the pid has been reused, because every live run holds a kernel flock
// on a per-run file that the kernel frees when the process dies.
//
// The file is SQLite in WAL mode with synchronous=NORMAL: many cronlock processes write to
// it at once, a crash never corrupts it, and a power cut may lose only the newest rows.
// The package deliberately knows nothing of locks, children, flags or configuration files,
// and it does not render tables: the cmd package decides where the file is (see DefaultPath)
// and how runs are shown. Retention (pruning old rows and output tails) is not done here yet.
package history
