package suspend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"cronlock/lockrun"
)

func TestNew(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		o     Options
		until time.Time
		bad   string // part of the usage error; "" = none
	}{
		{o: Options{}, until: time.Time{}},
		{o: Options{For: 2 * time.Hour}, until: now.Add(2 * time.Hour)},
		{o: Options{Until: "2026-12-02 08:30", UTC: true}, until: now.Add(150 * time.Minute)},
		{o: Options{Until: "2026-12-02T09:30:00+02:00"}, until: now.Add(90 * time.Minute)},
		{o: Options{For: time.Hour, Until: "2027-01-01"}, bad: "do not go together"},
		{o: Options{Until: "2026-12-02 05:59", UTC: true}, bad: "has already passed"},
		{o: Options{Until: "2026-12-02 06:00", UTC: true}, bad: "has already passed"},
		{o: Options{Until: "soon"}, bad: "want a time"},
		{o: Options{For: -time.Hour}, bad: "negative"},
		{o: Options{Reason: strings.Repeat("x", lockrun.MaxReasonBytes+1)}, bad: "--reason"},
	} {
		tc.o.Now, tc.o.By = clock, "ops@box"
		s, err := New(tc.o)
		var ue *UsageError
		switch {
		case tc.bad != "":
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("New(%+v) = %v, %v; want a usage error with %q", tc.o, s, err, tc.bad)
			}
		case err != nil || !s.Until.Equal(tc.until) || !s.Since.Equal(now) || s.By != "ops@box":
			t.Errorf("New(%+v) = %+v, %v; want until %v", tc.o, s, err, tc.until)
		}
	}
}

func TestEncodeDecodeLifted(t *testing.T) {
	since := time.Date(2026, 12, 2, 6, 0, 0, 123000, time.UTC)
	s := &lockrun.Suspension{By: "a@b", Since: since, Until: since.Add(time.Hour), Reason: "db \"upgrade\""}
	got := lockrun.DecodeSuspension(lockrun.EncodeSuspension(s))
	if *got != *s {
		t.Fatalf("round trip: %+v; want %+v", got, s)
	}
	if got.Lifted(since.Add(59*time.Minute)) || !got.Lifted(since.Add(time.Hour)) {
		t.Errorf("Lifted: wrong side of its until")
	}
	if open := lockrun.DecodeSuspension([]byte("garbage")); open == nil || open.Lifted(since.AddDate(10, 0, 0)) {
		t.Errorf("an unreadable record must stay a suspension: %+v", open)
	}
	if line := Made("k", &lockrun.Suspension{By: "a@b", Since: since}, "redis x"); !strings.Contains(line, "until cronlock resume") {
		t.Errorf("Made without a bound: %q; want it to say it lasts until resume", line)
	}
}
