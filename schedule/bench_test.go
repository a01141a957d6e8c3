package schedule

import (
	"testing"
	"time"
)

// BenchmarkPrev: the tick search every cronlock start runs once.
//
//	go test -run '^$' -bench . -benchmem ./schedule/
func BenchmarkPrev(b *testing.B) {
	now := time.Date(2027, 6, 15, 10, 7, 30, 0, time.UTC)
	for _, expr := range []string{"*/5 * * * *", "0 9 * * 1-5", "0 0 29 2 *"} {
		for _, zone := range []string{"UTC", "Europe/Berlin"} {
			s, err := Parse(expr, zone)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(expr+"/"+zone, func(b *testing.B) {
				for b.Loop() {
					s.Prev(now)
				}
			})
		}
	}
}

// BenchmarkParse includes loading the zone: a zone file read for a named zone, and
// /etc/localtime for the machine's.
func BenchmarkParse(b *testing.B) {
	for _, tc := range []struct{ name, expr, tz string }{
		{"machine", "0 9 * * 1-5", ""},
		{"Europe/Berlin", "0 9 * * 1-5", "Europe/Berlin"},
		{"UTC", "0 9 * * 1-5", "UTC"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(tc.expr, tc.tz); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
