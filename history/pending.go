package history

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Pending completions: a run whose completion of its entry in the fleet's record never
// reached the backend (its release timed out in a failover, and so did the retry) is
// kept here, and the next run of the same key on this host delivers it in its own
// release (jobrun), so that every claimed run ends completed in the fleet's record. They
// live in the meta table (no schema change), one row per run, named
// "fleet_pending\x00KEY\x00RUN": a key's rows are one range of the table's primary key.

// PendingCompletion is one completion kept for a later run; its fields are the
// backend's (lockrun.PendingCompletion), kept as they were given.
type PendingCompletion struct {
	Key     string `json:"-"`
	RunID   string `json:"-"`
	Entry   string `json:"e"`
	StartUS string `json:"a"`
	EndUS   string `json:"f"`
}

const pendingPrefix = "fleet_pending\x00"

func pendingName(key, runID string) string { return pendingPrefix + key + "\x00" + runID }

// AddPending keeps p until DropPending removes it.
func (s *Store) AddPending(p PendingCompletion) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(`INSERT INTO meta (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, pendingName(p.Key, p.RunID), string(v))
	if err != nil {
		err = fmt.Errorf("keep the fleet record's completion of run %s: %w", p.RunID, err)
	}
	return describe(s.path, err)
}

// Pending returns the completions kept for key, at most limit, oldest run first (run
// ids are UUIDv7).
func (s *Store) Pending(key string, limit int) ([]PendingCompletion, error) {
	lo := pendingPrefix + key + "\x00"
	hi := pendingPrefix + key + "\x01"
	rows, err := s.db.Query(`SELECT name, value FROM meta WHERE name >= ? AND name < ? ORDER BY name LIMIT ?`, lo, hi, limit)
	if err != nil {
		return nil, describe(s.path, fmt.Errorf("read the fleet record's pending completions: %w", err))
	}
	defer rows.Close()
	var out []PendingCompletion
	for rows.Next() {
		var name string
		var v any
		if err := rows.Scan(&name, &v); err != nil {
			return nil, describe(s.path, err)
		}
		var p PendingCompletion
		b, _ := v.(string)
		if json.Unmarshal([]byte(b), &p) != nil {
			continue // not ours to read: left for a person to see
		}
		p.Key, p.RunID = key, strings.TrimPrefix(name, lo)
		out = append(out, p)
	}
	return out, describe(s.path, rows.Err())
}

// DropPending forgets the completions of runIDs of key: they were delivered.
func (s *Store) DropPending(key string, runIDs []string) error {
	for _, id := range runIDs {
		if _, err := s.db.Exec(`DELETE FROM meta WHERE name = ?`, pendingName(key, id)); err != nil {
			return describe(s.path, fmt.Errorf("forget a delivered completion: %w", err))
		}
	}
	return nil
}
