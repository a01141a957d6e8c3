package schedule

import (
	"testing"
	"time"
)

func TestCanonical(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"@daily", "0 0 * * *"},
		{"@midnight", "0 0 * * *"},
		{"@hourly", "0 * * * *"},
		{"@weekly", "0 0 * * 7"},
		{"@weekly", "0 0 * * sun"},
		{"0 9 * jan-mar mon-fri", "0 9 * 1-3 1-5"},
		{"*/1 * * * *", "* * * * *"},
		{"0,1,2,3 0 * * *", "0-3 0 * * *"},
	} {
		a, err := Parse(c.a, "UTC")
		if err != nil {
			t.Fatal(err)
		}
		b, err := Parse(c.b, "UTC")
		if err != nil {
			t.Fatal(err)
		}
		if a.Canonical() != b.Canonical() {
			t.Errorf("%q → %q, %q → %q; want equal", c.a, a.Canonical(), c.b, b.Canonical())
		}
		if _, err := Parse(a.Canonical(), "UTC"); err != nil {
			t.Errorf("canonical %q of %q does not parse: %v", a.Canonical(), c.a, err)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"0 0 * * 1", "0 0 1-31 * 1"}, // OR-ed day fields: every day, not Mondays
		{"0 0 * * *", "0 1 * * *"},
		{"*/15 * * * *", "0,15,30,45 * * * *"}, // the leading * decides daylight saving
	} {
		a, _ := Parse(c.a, "UTC")
		b, _ := Parse(c.b, "UTC")
		if a.Canonical() == b.Canonical() {
			t.Errorf("%q and %q both → %q; want different", c.a, c.b, a.Canonical())
		}
	}
}

// TestCount: the ticks in [from, to], bounded by limit, and the first of them.
func TestCount(t *testing.T) {
	s, err := Parse("* * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	at := func(hm string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05", "2026-12-01 "+hm)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		from, to  string
		limit, n  int
		wantFirst string
	}{
		{"10:00:00", "10:05:00", 100, 6, "10:00:00"},
		{"10:00:30", "10:05:00", 100, 5, "10:01:00"},
		{"10:00:00", "10:05:00", 3, 3, "10:00:00"},
		{"10:00:30", "10:00:50", 100, 0, ""},
	} {
		n, first := s.Count(at(c.from), at(c.to), c.limit)
		want := time.Time{}
		if c.wantFirst != "" {
			want = at(c.wantFirst)
		}
		if n != c.n || !first.Equal(want) {
			t.Errorf("Count(%s, %s, %d) = %d, %s; want %d, %s", c.from, c.to, c.limit, n, first, c.n, want)
		}
	}
}
