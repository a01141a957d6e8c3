package history

// migrations is the versioned schema. migrations[i] brings a file from user_version i to
// i+1; a file at user_version len(migrations) is current and Open does no schema work at
// all (the common case: one PRAGMA read per run). Append new steps; never edit old ones,
// because files written by older cronlock versions must keep opening.
var migrations = []string{
	// v1: runs stay small (the output tail lives in run_output), and every list the
	// history command makes is served by an index walked newest first.
	`
CREATE TABLE runs (
	id            TEXT    NOT NULL PRIMARY KEY, -- UUIDv7
	key           TEXT    NOT NULL,
	node          TEXT    NOT NULL,
	pid           INTEGER NOT NULL,
	command       BLOB    NOT NULL,             -- argv, each argument followed by a NUL byte
	status        TEXT    NOT NULL,
	exit_code     INTEGER,                      -- NULL when there is none
	signal        TEXT    NOT NULL DEFAULT '',
	started_at    INTEGER NOT NULL,             -- Unix nanoseconds
	finished_at   INTEGER,                      -- NULL while running (and for abandoned)
	error         TEXT    NOT NULL DEFAULT '',
	holder        TEXT    NOT NULL DEFAULT '',
	fencing_token INTEGER NOT NULL DEFAULT 0,   -- uint64 stored bit for bit
	backend       TEXT    NOT NULL DEFAULT ''
);
-- history --key K --limit N: newest first within one key. Ties on started_at are
-- broken by rowid (insertion order), which every index carries implicitly.
CREATE INDEX runs_key_started ON runs (key, started_at);
-- history --limit N: newest first over all keys.
CREATE INDEX runs_started ON runs (started_at);
-- Reap looks only at running rows of one node; a partial index keeps that cheap with
-- a million finished rows.
CREATE INDEX runs_running ON runs (node) WHERE status = 'running';

-- Output tails are kept apart so that listing and indexing never read them, and so that
-- retention can drop tails while keeping the rows.
CREATE TABLE run_output (
	run_id TEXT NOT NULL PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	tail   BLOB NOT NULL
);
`,
	// v2: what tells a dead run from a live one without the lock file (boot id, process
	// start time), how many tries the lock took, which stream each byte of the output
	// tail came from, and a small table of settings such as when retention last ran.
	`
ALTER TABLE runs ADD COLUMN attempt   INTEGER NOT NULL DEFAULT 1; -- lock tries this run made
ALTER TABLE runs ADD COLUMN boot_id   BLOB    NOT NULL DEFAULT x''; -- 16 bytes of /proc/sys/kernel/random/boot_id
ALTER TABLE runs ADD COLUMN pid_start INTEGER NOT NULL DEFAULT 0;   -- start of pid, clock ticks after boot
-- Segments of the tail: pairs of uvarints (stream, length), stream 1 = stdout, 2 = stderr;
-- empty = one unmarked stream (rows written by schema v1).
ALTER TABLE run_output ADD COLUMN streams BLOB NOT NULL DEFAULT x'';
-- history stats: the newest runs of a key are a merge of its per-status lists, each read
-- newest first from this index alone (no table lookups); the last success and the last
-- failure of a key are one index step each, even for a key that has failed a million
-- times. About 40 bytes per run.
CREATE INDEX runs_key_status_started ON runs (key, status, started_at, finished_at);
-- The run's key and start, copied next to its tail, so that keeping only the newest
-- tails of a key (prune.go) walks that key's few tails in an index instead of all its
-- runs. It costs bytes only for runs that still have a tail, which are bounded per key.
-- (Named apart from runs' own columns, so that joins of the two stay unambiguous.)
ALTER TABLE run_output ADD COLUMN run_key        TEXT    NOT NULL DEFAULT '';
ALTER TABLE run_output ADD COLUMN run_started_at INTEGER NOT NULL DEFAULT 0;
UPDATE run_output SET (run_key, run_started_at) = (SELECT key, started_at FROM runs WHERE id = run_id)
	WHERE run_id IN (SELECT id FROM runs);
CREATE INDEX run_output_key_started ON run_output (run_key, run_started_at);
CREATE TABLE meta (
	name  TEXT NOT NULL PRIMARY KEY,
	value          -- no type: kept as written
) WITHOUT ROWID;
`,
	// v3: the exit code cronlock itself returned, what cron saw (124 for a timeout, 127
	// for a missing command, the conflict code for a skip), which exit_code (the child's
	// own) cannot tell. NULL while running, for abandoned runs, and for rows written
	// before v3: their code was never recorded, and guessing it would mislead.
	`
ALTER TABLE runs ADD COLUMN exit INTEGER;
`,
	// v4: the schedule tick a run was for (--schedule), so that "did the 09:00 run
	// happen" has an answer that does not depend on when cron fired. NULL without
	// --schedule, and for rows written before v4.
	`
ALTER TABLE runs ADD COLUMN scheduled_for INTEGER; -- Unix nanoseconds, UTC instant
`,
	// v5: the tries of one run (--retries). Every try is a row of its own; first_try is
	// the id of the run's first try (NULL for that try itself, for a run of one try, and
	// in rows before v5), and try counts from 1. A try that failed and was followed by
	// another has status retried.
	`
ALTER TABLE runs ADD COLUMN first_try TEXT; -- not run_id: run_output has that column
ALTER TABLE runs ADD COLUMN try       INTEGER NOT NULL DEFAULT 1;
`,
	// v6: which attempt of its tick a run was (1 for the first run of a tick, 2 for the
	// first standby takeover…; NULL without --schedule and in rows before v6), and the
	// lost run a takeover took the tick from ('' = none). Not "attempt": that column
	// counts lock tries under --wait.
	`
ALTER TABLE runs ADD COLUMN tick_attempt INTEGER;
ALTER TABLE runs ADD COLUMN takeover_of  TEXT NOT NULL DEFAULT '';
`,
}
