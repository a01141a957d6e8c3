package history

import "testing"

// TestPendingCompletions: completions are kept per key, read oldest first within a bound,
// replaced when kept again, and forgotten once delivered; another key's are not touched.
func TestPendingCompletions(t *testing.T) {
	s, _ := openTemp(t)
	for _, p := range []PendingCompletion{
		{Key: "billing", RunID: "01a2", Entry: `{"id":"01a2"`, StartUS: "1", EndUS: "2"},
		{Key: "billing", RunID: "01a1", Entry: `{"id":"01a1"`, StartUS: "", EndUS: "3"},
		{Key: "billing2", RunID: "01a3", Entry: `{"id":"01a3"`},
		{Key: "billing", RunID: "01a2", Entry: `{"id":"01a2","s":"x"`, StartUS: "1", EndUS: "2"},
	} {
		if err := s.AddPending(p); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := s.Pending("billing", 8)
	if err != nil || len(ps) != 2 || ps[0].RunID != "01a1" || ps[1].Entry != `{"id":"01a2","s":"x"` || ps[0].EndUS != "3" || ps[1].Key != "billing" {
		t.Fatalf("Pending = %+v, %v; want 01a1 then 01a2 (replaced)", ps, err)
	}
	if ps, _ := s.Pending("billing", 1); len(ps) != 1 {
		t.Fatalf("Pending with limit 1 = %+v", ps)
	}
	if err := s.DropPending("billing", []string{"01a1", "01a2"}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.Pending("billing", 8); len(ps) != 0 {
		t.Fatalf("after DropPending: %+v", ps)
	}
	if ps, _ := s.Pending("billing2", 8); len(ps) != 1 {
		t.Fatalf("billing2's: %+v; want its one completion", ps)
	}
}
