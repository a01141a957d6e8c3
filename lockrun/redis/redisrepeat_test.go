package redis

import (
	"context"
	"testing"

	"cronlock/internal/redistest"
	"cronlock/lockrun"
)

// TestRedisRecordRunRepeated: an entry sent again (its first reply lost; eval retries
// every script) is in the fleet's record once.
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
	if err != nil || len(es) != 2 {
		t.Fatalf("Fleet: %+v, %v; want two entries, each run once", es, err)
	}
}
