package lockrun

import "testing"

// TestAttemptsAreNoDuplicates: attempts of one tick (a takeover chain) are never
// DUPLICATE of each other; another claim of the same tick is.
func TestAttemptsAreNoDuplicates(t *testing.T) {
	es := []FleetEntry{
		{Key: "k", RunID: "a", Status: "abandoned", TickUS: 60e6, StartUS: 1, EndUS: 5},
		{Key: "k", RunID: "b", Status: "lock_lost", TickUS: 60e6, StartUS: 5, EndUS: 9, TakeoverOf: "a", Attempt: 2},
		{Key: "k", RunID: "c", Status: "succeeded", TickUS: 60e6, StartUS: 9, EndUS: 12, TakeoverOf: "b", Attempt: 3},
	}
	MarkDuplicates(es)
	for _, e := range es {
		if e.Duplicate {
			t.Fatalf("attempt %s of one tick marked DUPLICATE", e.RunID)
		}
	}
	es = append(es, FleetEntry{Key: "k", RunID: "d", Status: "succeeded", TickUS: 60e6, StartUS: 20, EndUS: 21})
	MarkDuplicates(es)
	if !es[3].Duplicate {
		t.Fatal("a second claim of the tick outside its attempts was not DUPLICATE")
	}
}
