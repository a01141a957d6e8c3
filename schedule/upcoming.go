package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// An Upcoming is one tick as `cronlock schedule` and `crontab lint` show it.
type Upcoming struct {
	Tick  time.Time     // the instant, in UTC
	Local time.Time     // the same instant in the schedule's zone
	In    time.Duration // from the time asked about to Tick; at most math.MaxInt64 (292 years)
	// DST says what daylight saving (or any change of the zone's offset) does to this
	// tick, in one sentence; "" when nothing. See Note.
	DST string
}

// MaxUpcoming is the most ticks Upcoming lists: enough for a year of an hourly job's
// pattern, few enough that a typo (--next 1000000) does not print for minutes.
const MaxUpcoming = 1000

// Upcoming returns the first n ticks after from (as Next finds them, so exactly the
// ticks `cronlock run --schedule` counts), each with its daylight-saving note. It
// returns fewer when the schedule has no more within Next's reach or before the year
// 10000 (which RFC 3339 cannot write).
func (s *Schedule) Upcoming(from time.Time, n int) []Upcoming {
	var out []Upcoming
	for t := s.Next(from); !t.IsZero() && t.Year() <= 9999 && len(out) < n; t = s.Next(t) {
		out = append(out, Upcoming{Tick: t, Local: t.In(s.loc), In: t.Sub(from), DST: s.Note(t)})
	}
	return out
}

// Note says what a change of the zone's offset does to tick (a tick Next returned),
// following the same rules as Next, or "" when it does nothing:
//
//   - a fixed time that does not exist (spring forward) and runs at the first instant
//     after the gap: "02:30 does not exist on 2026-03-29 in Europe/Berlin: runs at 03:00";
//   - wall-clock times of a wildcard expression that do not exist and are skipped, noted
//     on the first tick after them;
//   - a time that happens twice (fall back): whether it runs once (at the first, as a
//     fixed time does) or at both, as Next decides, and which of the two this tick is.
func (s *Schedule) Note(tick time.Time) string {
	sec := tick.Unix()
	seg := s.segmentAt(sec)
	var notes []string
	if n := s.gapNote(seg, sec); n != "" {
		notes = append(notes, n)
	}
	if n := s.repeatNote(seg, tick); n != "" {
		notes = append(notes, n)
	}
	return strings.Join(notes, "; ")
}

// gapNote is Note's part about wall-clock times a forward change of offset skipped,
// when tick is the first tick at or after that change.
func (s *Schedule) gapNote(seg segment, sec int64) string {
	if seg.start == math.MinInt64 {
		return ""
	}
	prev := s.segmentAt(seg.start - 1)
	if prev.off >= seg.off {
		return ""
	}
	// Only the first tick of the segment speaks of the gap before it.
	if first := s.Next(time.Unix(seg.start-1, 0)); first.Unix() != sec {
		return ""
	}
	_, gapLo, gapHi := s.transition(seg, ceilMinute(seg.start+seg.off))
	var ran, skipped []int64
	for m := ceilMinute(seg.start + prev.off); m < seg.start+seg.off; m += 60 {
		if !s.matchesWall(m) {
			continue
		}
		if m >= gapLo && m <= gapHi && sec == seg.start {
			ran = append(ran, m)
		} else {
			skipped = append(skipped, m)
		}
	}
	at := time.Unix(seg.start, 0).In(s.loc).Format("15:04")
	var parts []string
	if len(ran) > 0 {
		verb := "runs"
		if len(ran) > 1 {
			verb = "run once"
		}
		with := ""
		if s.matchesWall(floorMinute(seg.start + seg.off)) {
			with = ", with " + at + "'s own tick"
		}
		parts = append(parts, fmt.Sprintf("%s on %s in %s: %s at %s%s", notExist(ran), wallDate(ran[0]), s.zone, verb, at, with))
	}
	if len(skipped) > 0 {
		// transition's rules: a wildcard expression matches only the wall-clock times
		// that happen; a change of more than 3 hours is a clock change to cron.
		why := "skipped (a change of more than 3 hours: cron runs only the time it lands on)"
		if s.wild {
			why = "skipped (a * in the minute or hour field: cron runs only wall-clock times that happen)"
		}
		parts = append(parts, fmt.Sprintf("%s on %s in %s: %s", notExist(skipped), wallDate(skipped[0]), s.zone, why))
	}
	return strings.Join(parts, "; ")
}

// repeatNote is Note's part about a wall-clock time that happens twice because the
// offset goes back.
func (s *Schedule) repeatNote(seg segment, tick time.Time) string {
	sec := tick.Unix()
	wall := floorMinute(sec + seg.off)
	hhmm := civilOf(wall)
	name := fmt.Sprintf("%02d:%02d happens twice on %s in %s", hhmm.h, hhmm.mi, wallDate(wall), s.zone)
	// The second of the two: the segment began by going back over this wall time.
	if seg.start != math.MinInt64 {
		prev := s.segmentAt(seg.start - 1)
		if prev.off > seg.off && sec+seg.off < seg.start+prev.off {
			first := tick.Add(-time.Duration(prev.off-seg.off) * time.Second)
			if s.Prev(first).Equal(first) {
				return fmt.Sprintf("%s (%s, then %s): runs at both; this is the second", name, abbrev(first, s.loc), abbrev(tick, s.loc))
			}
			return fmt.Sprintf("%s (%s, then %s): runs once, at the second", name, abbrev(first, s.loc), abbrev(tick, s.loc))
		}
	}
	// The first of the two: the next segment goes back over it.
	if seg.end != math.MaxInt64 {
		next := s.segmentAt(seg.end)
		if next.off < seg.off && sec+seg.off >= seg.end+next.off {
			second := tick.Add(time.Duration(seg.off-next.off) * time.Second)
			if s.Next(second.Add(-time.Second)).Equal(second) {
				return fmt.Sprintf("%s (%s, then %s): runs at both; this is the first", name, abbrev(tick, s.loc), abbrev(second, s.loc))
			}
			return fmt.Sprintf("%s (%s, then %s): runs once, at the first", name, abbrev(tick, s.loc), abbrev(second, s.loc))
		}
	}
	return ""
}

// matchesWall reports whether the wall-clock minute starting at wall (seconds, as if
// UTC) matches the fields.
func (s *Schedule) matchesWall(wall int64) bool {
	c := civilOf(wall)
	return s.month&(1<<c.mo) != 0 && s.dayMatches(c.y, c.mo, c.d) &&
		s.hour&(1<<c.h) != 0 && s.minute&(1<<c.mi) != 0
}

// notExist names wall-clock minutes that do not exist: "02:30 does not exist", "02:00,
// 02:30 do not exist", "02:00 to 02:59 (60 times) do not exist".
func notExist(ms []int64) string {
	hm := func(m int64) string { c := civilOf(m); return fmt.Sprintf("%02d:%02d", c.h, c.mi) }
	switch {
	case len(ms) == 1:
		return hm(ms[0]) + " does not exist"
	case len(ms) <= 4:
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = hm(m)
		}
		return strings.Join(names, ", ") + " do not exist"
	}
	return fmt.Sprintf("%s to %s (%d times) do not exist", hm(ms[0]), hm(ms[len(ms)-1]), len(ms))
}

func wallDate(wall int64) string { return time.Unix(wall, 0).UTC().Format("2006-01-02") }

// abbrev names the offset in force at t: "EDT", or "+1030" where the zone has no
// abbreviation, as Go gives it.
func abbrev(t time.Time, loc *time.Location) string {
	name, _ := t.In(loc).Zone()
	return name
}

// FormatIn writes how long until a tick for people, to the minute or the largest two
// units: "now", "45s", "25m", "2h 30m", "3d 4h", "1y 64d".
func FormatIn(d time.Duration) string {
	switch {
	case d < time.Second:
		return "now"
	case d == math.MaxInt64:
		return "over 292y" // time.Duration's reach
	}
	if d < time.Minute {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	d = d.Round(time.Minute)
	const day, year = 24 * time.Hour, 365 * 24 * time.Hour
	two := func(a time.Duration, ua string, b time.Duration, ub string) string {
		s := strconv.FormatInt(int64(a), 10) + ua
		if b > 0 {
			s += " " + strconv.FormatInt(int64(b), 10) + ub
		}
		return s
	}
	switch {
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < day:
		return two(d/time.Hour, "h", d%time.Hour/time.Minute, "m")
	case d < year:
		return two(d/day, "d", d%day/time.Hour, "h")
	}
	return two(d/year, "y", d%year/day, "d")
}

// fromLayouts are the times ParseFrom takes besides RFC 3339, read in the schedule's
// zone.
var fromLayouts = []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"}

// ParseFrom reads the time a list of ticks starts after (`cronlock schedule --from`):
// "now" (or ""), an RFC 3339 time with its own offset (2026-03-29T01:00:00Z), or a
// wall-clock time in loc: "2026-03-29 01:30", with seconds, with a T, or a date alone
// (its midnight). A wall-clock time that happens twice is the first; one that does not
// exist is read as Go's time.Date does (moved forward by the gap). Its errors quote v
// and list the forms.
func ParseFrom(v string, loc *time.Location, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.EqualFold(v, "now") {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range fromLayouts {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return firstOf(t), nil
		}
	}
	return time.Time{}, errors.New("use now, an RFC 3339 time (2026-03-29T01:00:00Z, 2026-03-29T03:00:00+02:00), or a time in the schedule's zone: 2026-03-29 01:30, 2026-03-29 01:30:00, or 2026-03-29")
}

// firstOf returns the first instant with t's wall-clock time when that time happens twice
// (Go's time.Date leaves the choice open), else t.
func firstOf(t time.Time) time.Time {
	_, off := t.Zone()
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t
	}
	_, before := start.Add(-time.Second).Zone()
	if earlier := t.Add(-time.Duration(before-off) * time.Second); before > off && earlier.Before(start) {
		return earlier
	}
	return t
}
