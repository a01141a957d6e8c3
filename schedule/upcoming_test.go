package schedule

import (
	"fmt"
	"strings"
	"testing"
)

// upcomingText lists n ticks after from as "local|note" lines.
func upcomingText(t *testing.T, expr, zone, from string, n int) string {
	t.Helper()
	s, err := Parse(expr, zone)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, u := range s.Upcoming(local(t, zone, from), n) {
		fmt.Fprintf(&b, "%s", u.Local.Format("2006-01-02 15:04 MST"))
		if u.DST != "" {
			b.WriteString(" | " + u.DST)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestUpcomingExplore(t *testing.T) {
	for _, c := range []struct{ expr, zone, from string; n int }{
		{"30 2 * * *", "Europe/Berlin", "2026-03-28 00:00", 3},
		{"30 2 * * *", "Europe/Berlin", "2026-10-24 00:00", 3},
		{"*/30 2 * * *", "Europe/Berlin", "2026-03-29 00:00", 2},
		{"*/30 2 * * *", "Europe/Berlin", "2026-10-25 00:00", 5},
		{"0,30 2,3 * * *", "Europe/Berlin", "2026-03-29 00:00", 3},
		{"30 1 * * *", "America/New_York", "2026-10-31 12:00", 3},
		{"30 * * * *", "America/New_York", "2026-11-01 00:00", 4},
		{"15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00", 2},
		{"45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00", 2},
		{"*/20 1 * * *", "Australia/Lord_Howe", "2026-04-05 00:00", 5},
		{"0 12 * * *", "Pacific/Apia", "2011-12-29 00:00", 2},
		{"0 0 29 2 *", "Asia/Tokyo", "2026-12-02 00:00", 3},
		{"0 0 29 2 1", "UTC", "2026-12-02 00:00", 3},
	} {
		t.Logf("%s in %s from %s:\n%s", c.expr, c.zone, c.from, upcomingText(t, c.expr, c.zone, c.from, c.n))
	}
}
