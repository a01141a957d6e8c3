package history

import (
	"database/sql"
	"fmt"
	"sort"
)

// MinShortID is the fewest characters a short run id has, as git abbreviates commits: a
// short id grows beyond it only as far as it must to stay unique.
const MinShortID = 7

// ambiguousCap is how many runs an ambiguous prefix is counted up to: a one-character
// prefix of a million-run file must not cost a walk of the whole id index.
const ambiguousCap = 1000

// AmbiguousError is returned by Resolve for a prefix that more than one run id starts
// with.
type AmbiguousError struct {
	Prefix  string
	Matches int  // how many runs it matches, counted up to a cap
	More    bool // Matches is the cap: the prefix matches more runs than that
}

func (e *AmbiguousError) Error() string {
	n := fmt.Sprintf("%d", e.Matches)
	if e.More {
		n = "more than " + n
	}
	return fmt.Sprintf("history: run id prefix %s is ambiguous: it matches %s runs", e.Prefix, n)
}

// ShortIDs returns, for each of ids, the shortest prefix of at least MinShortID characters
// that no other run id in the file starts with (the whole id when it is shorter, or
// itself the start of another id). The ids next to an id in the id index are the only
// ones that can share the most of its prefix, so each id costs two index steps, whatever
// the file holds. An id that is not in the file gets the prefix it would need there.
func (s *Store) ShortIDs(ids []string) (map[string]string, error) {
	stmt, err := s.db.Prepare(`SELECT
		(SELECT id FROM runs WHERE id < ?1 ORDER BY id DESC LIMIT 1),
		(SELECT id FROM runs WHERE id > ?1 ORDER BY id LIMIT 1)`)
	if err != nil {
		return nil, describe(s.path, fmt.Errorf("short run ids: %w", err))
	}
	defer stmt.Close()
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		var before, after sql.NullString
		if err := stmt.QueryRow(id).Scan(&before, &after); err != nil {
			return nil, describe(s.path, fmt.Errorf("short id of run %s: %w", id, err))
		}
		out[id] = shortID(id, before.String, after.String)
	}
	return out, nil
}

// ShortIDsAmong is ShortIDs for a list that is the whole world, such as the fleet's
// record as read: each id's shortest prefix of at least MinShortID characters that no
// other id of ids starts with. The result is in the order of ids.
func ShortIDsAmong(ids []string) []string {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	out := make([]string, len(ids))
	for i, id := range ids {
		j := sort.SearchStrings(sorted, id)
		var before, after string
		if j > 0 {
			before = sorted[j-1]
		}
		for k := j + 1; k < len(sorted); k++ { // past duplicates of id itself
			if sorted[k] != id {
				after = sorted[k]
				break
			}
		}
		out[i] = shortID(id, before, after)
	}
	return out
}

// shortID is the shortest prefix of id, of at least MinShortID characters, that neither
// of its neighbours in sorted order starts with; id itself when no prefix is.
func shortID(id, before, after string) string {
	n := max(commonPrefix(id, before), commonPrefix(id, after)) + 1
	return id[:min(max(n, MinShortID), len(id))]
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Resolve returns the id of the one run whose id is prefix, or else starts with it:
// ErrNotFound when none does, an *AmbiguousError when several do. It walks the id index
// from prefix on, and counts an ambiguous prefix's runs only up to a cap.
func (s *Store) Resolve(prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("%w: empty id", ErrNotFound)
	}
	where, args := `id >= ?`, []any{prefix}
	if end, ok := prefixEnd(prefix); ok {
		where, args = where+` AND id < ?`, append(args, end)
	}
	rows, err := s.db.Query(`SELECT id FROM runs WHERE `+where+` ORDER BY id LIMIT 2`, args...)
	if err != nil {
		return "", describe(s.path, fmt.Errorf("find run %s: %w", prefix, err))
	}
	var found []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return "", describe(s.path, fmt.Errorf("find run %s: %w", prefix, err))
		}
		found = append(found, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", describe(s.path, fmt.Errorf("find run %s: %w", prefix, err))
	}
	switch {
	case len(found) == 0:
		return "", fmt.Errorf("%w: %s", ErrNotFound, prefix)
	case len(found) == 1 || found[0] == prefix: // the whole id of a run, even if another id goes on from it
		return found[0], nil
	}
	var n int
	err = s.db.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM runs WHERE `+where+` LIMIT ?)`,
		append(args, ambiguousCap+1)...).Scan(&n)
	if err != nil {
		return "", describe(s.path, fmt.Errorf("find run %s: %w", prefix, err))
	}
	return "", &AmbiguousError{Prefix: prefix, Matches: min(n, ambiguousCap), More: n > ambiguousCap}
}

// prefixEnd is the smallest string greater than every string that starts with p (p with
// its last byte below 0xff raised by one, the 0xff bytes after it dropped); false when
// there is none (p is all 0xff bytes).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}
