// Package history records every cronlock run in a local SQLite file and reads it back.
//
// A run's start facts go first into a small per-run file that the run keeps flocked while
// it lives (Claim). Its row is written as running (Start) and completed when it ends
// (Finish), or written once at the end (Insert, or Finish alone), and readers add the rows
// of live runs from their files (AddLive). The kernel frees the flock when the process
// dies, so Reap marks a dead run abandoned even when its pid has been reused. List, Get
// and Stats read runs back. Prune deletes old runs on request and Retain at most once a
// day, both keeping running rows and each key's last success and last failure; each key
// keeps only its newest tailsPerKey output tails. The file is SQLite in WAL mode with
// synchronous=NORMAL: many cronlock processes write to it at once, a crash never
// corrupts it, and a power cut may lose only the newest rows.
//
// The package deliberately knows nothing of locks, children, flags or configuration files,
// and it renders no tables: the cmd package decides which file to use (DefaultPath is the
// default), when runs are recorded and pruned, and how they are shown.
package history
