package redis

import (
	"context"
	"testing"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestRedisRecordRunRepeated: an entry sent again (its first reply lost; eval retries
// every script) is in the fleet's record once, and not counted as a repeat of itself; an
// error of the same node that follows collapses into it (count and last time).
func TestRedisRecordRunRepeated(t *testing.T) {
	l := newRedisTestLocker(t, redistest.Addr(t))
	ctx := context.Background()
	rec := &lockrun.RunRecord{RunID: "run-twice", Node: "n", Status: "error", Exit: 125}
	for range 2 {
		if err := l.RecordRun(ctx, "twice", rec); err != nil {
			t.Fatal(err)
		}
	}
	other := &lockrun.RunRecord{RunID: "run-other", Node: "n", Status: "error", Exit: 125}
	if err := l.RecordRun(ctx, "twice", other); err != nil {
		t.Fatal(err)
	}
	es, err := l.Fleet(ctx, "twice", 0)
	if err != nil || len(es) != 1 || es[0].RunID != "run-twice" || es[0].Count != 2 || es[0].LastUS < es[0].StartUS {
		t.Fatalf("Fleet: %+v, %v; want run-twice's entry once, with a count of 2 (run-other collapsed into it)", es, err)
	}
	third := &lockrun.RunRecord{RunID: "run-third", Node: "m", Status: "error", Exit: 125}
	if err := l.RecordRun(ctx, "twice", third); err != nil {
		t.Fatal(err)
	}
	if es, err = l.Fleet(ctx, "twice", 0); err != nil || len(es) != 2 {
		t.Fatalf("Fleet: %+v, %v; want another node's error as an entry of its own", es, err)
	}
}
