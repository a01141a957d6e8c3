// Package metrics writes the metrics file of a finished cronlock run, for node_exporter's
// textfile collector.
//
// That is its one job: Write rewrites DIR/cronlock_<key>.prom with what the last run of
// that key on this host came to (when it ended, how long it took, its exit code and
// status) and counters by status carried over from the file it replaces. The previous
// file is read back and replaced under a flock, so two runs of one key on one host never
// lose an increment, and the new file is renamed into place, so node_exporter never reads
// half of one.
//
// What it deliberately does not do: it serves no HTTP endpoint and pushes nowhere, since
// node_exporter reads the folder; it does not create the folder, whose owner and
// permissions are the admin's choice; and it does not link prometheus/client_golang or
// prometheus/common/expfmt. Their package init (client_golang's default registry, procfs,
// protobuf descriptors) and size would be paid by every cronlock process, with or without
// --metrics-dir, out of proportion with cronlock's small per-run overhead, for a format
// that a few functions here write and read back. The tests check the files with expfmt's
// parser, as node_exporter reads them.
package metrics
