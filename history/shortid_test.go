package history

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

// TestShortIDsAndResolve: each id's short form is the shortest start of 7 characters or
// more that no other id in the file shares; Resolve takes any start that one id has, and
// tells an ambiguous start (with a count, capped) from one that no id has.
func TestShortIDsAndResolve(t *testing.T) {
	s, _ := openTemp(t)
	ids := []string{"abcdefgh-1", "abcdefgh-2x", "abcdefgh-2y", "abzzzzzzzz", "short", "shortened-too"}
	for _, id := range ids {
		if err := s.Insert(&Run{ID: id, Key: "k", Node: "n", Status: runstatus.Succeeded, StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"abcdefgh-1": "abcdefgh-1", "abcdefgh-2x": "abcdefgh-2x", "abcdefgh-2y": "abcdefgh-2y",
		"abzzzzzzzz": "abzzzzz", "short": "short", "shortened-too": "shorten", "notthere-at-all": "notther"}
	got, err := s.ShortIDs(append(ids, "notthere-at-all"))
	if err != nil {
		t.Fatal(err)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("short id of %s: %q, want %q", id, got[id], w)
		}
	}
	among := ShortIDsAmong(append([]string{"abcdefgh-2x"}, ids...)) // a duplicate is still itself
	if strings.Join(among, " ") != "abcdefgh-2x abcdefgh-1 abcdefgh-2x abcdefgh-2y abzzzzz short shorten" {
		t.Errorf("ShortIDsAmong: %q", among)
	}

	for prefix, w := range map[string]string{"abcdefgh-1": "abcdefgh-1", "abz": "abzzzzzzzz", "short": "short",
		"shorte": "shortened-too", "abcdefgh-2y": "abcdefgh-2y"} {
		if id, err := s.Resolve(prefix); id != w || err != nil {
			t.Errorf("Resolve(%q) = %q, %v; want %q", prefix, id, err, w)
		}
	}
	for prefix, n := range map[string]int{"abcdefgh-2": 2, "ab": 4, "a": 4} {
		_, err := s.Resolve(prefix)
		var amb *AmbiguousError
		if !errors.As(err, &amb) || amb.Matches != n || amb.More {
			t.Errorf("Resolve(%q): %v; want ambiguous among %d", prefix, err, n)
		}
	}
	for _, prefix := range []string{"", "b", "abcdefgh-3", "abcdefgh-1x", "\xff\xff"} {
		if _, err := s.Resolve(prefix); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q): %v; want not found", prefix, err)
		}
	}
}

// TestShortIDQueryPlans: the neighbours of an id and the runs a prefix matches come from
// the id index, a few steps whatever the file holds.
func TestShortIDQueryPlans(t *testing.T) {
	s, _ := openTemp(t)
	for _, q := range []string{
		`SELECT id FROM runs WHERE id < 'x' ORDER BY id DESC LIMIT 1`,
		`SELECT id FROM runs WHERE id > 'x' ORDER BY id LIMIT 1`,
		`SELECT id FROM runs WHERE id >= 'x' AND id < 'y' ORDER BY id LIMIT 2`,
	} {
		p := strings.Join(queryPlan(t, s, q), "; ")
		if !strings.Contains(p, "SEARCH runs USING COVERING INDEX sqlite_autoindex_runs_1") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\nplan: %s\nwant a search of the id index and no sort", q, p)
		}
	}
}

// TestResolveCountsUpToACap: a prefix that a great many ids share is counted only up to
// ambiguousCap, so that a one-character prefix of a large file costs little.
func TestResolveCountsUpToACap(t *testing.T) {
	s, _ := openTemp(t)
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range ambiguousCap + 5 {
		if _, err := tx.Exec(`INSERT INTO runs (id, key, node, pid, command, status, started_at) VALUES (?, 'k', 'n', 1, x'', 'succeeded', ?)`,
			fmt.Sprintf("cap-%05d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for prefix, want := range map[string]AmbiguousError{
		"cap-":    {Prefix: "cap-", Matches: ambiguousCap, More: true},
		"cap-000": {Prefix: "cap-000", Matches: 100},
	} {
		_, err := s.Resolve(prefix)
		var amb *AmbiguousError
		if !errors.As(err, &amb) || *amb != want {
			t.Errorf("Resolve(%q): %v; want %+v", prefix, err, want)
		}
	}
}
