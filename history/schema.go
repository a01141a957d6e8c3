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
}
