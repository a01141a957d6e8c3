package schedule

import (
	"math"
	"math/bits"
	"time"
)

// searchSpan bounds how far Prev and Next look. Parse refuses expressions that never
// match, and the rarest it accepts (a day-of-month and a weekday that must meet, such as
// Feb 29 on a Sunday) meet at least every 40 years or so.
const searchSpan = 100 * 366 * 24 * 3600

// Prev returns the latest tick at or before now, as a UTC instant: the "tick" of a run
// that starts at now. Wall-clock times are read in the schedule's zone with Debian cron's
// daylight-saving rules (see the package doc). Prev returns the zero Time only when now
// lies outside the years 1 to 9999 or no tick falls in the 100 years before now.
func (s *Schedule) Prev(now time.Time) time.Time {
	if y := now.Year(); y < 1 || y > 9999 {
		return time.Time{}
	}
	hi := now.Unix()
	limit := hi - searchSpan
	for hi >= limit {
		seg := s.segmentAt(hi)
		lo := max(seg.start, limit)
		wallLo, wallHi := ceilMinute(lo+seg.off), floorMinute(hi+seg.off)
		gapLo, gapHi := int64(0), int64(-1)
		if seg.start > limit {
			wallLo, gapLo, gapHi = s.transition(seg, wallLo)
		}
		if c, ok := s.latest(wallLo, wallHi); ok {
			return time.Unix(c-seg.off, 0).UTC()
		}
		// Every tick of this segment is at or after its start, so a gap tick, which is
		// the start itself, comes only after the segment had none.
		if _, ok := s.latest(gapLo, gapHi); ok {
			return time.Unix(seg.start, 0).UTC()
		}
		if seg.start <= limit {
			break
		}
		hi = seg.start - 1
	}
	return time.Time{}
}

// Count returns how many ticks fall in [from, to], at most limit, and the first of them
// (zero when none does).
func (s *Schedule) Count(from, to time.Time, limit int) (n int, first time.Time) {
	first = s.Next(from.Add(-time.Nanosecond))
	if first.IsZero() || first.After(to) {
		return 0, time.Time{}
	}
	for t := first; !t.IsZero() && !t.After(to) && n < limit; t = s.Next(t) {
		n++
	}
	return n, first
}

// Next returns the first tick strictly after after, as a UTC instant, with the same rules
// as Prev. It returns the zero Time only when after lies outside the years 1 to 9999 or
// no tick falls in the 100 years after it.
func (s *Schedule) Next(after time.Time) time.Time {
	if y := after.Year(); y < 1 || y > 9999 {
		return time.Time{}
	}
	lo := after.Unix() + 1 // Unix rounds down: lo is the first whole second after after
	limit := lo + searchSpan
	for lo <= limit {
		seg := s.segmentAt(lo)
		hi := min(seg.end-1, limit)
		wallLo, wallHi := ceilMinute(lo+seg.off), floorMinute(hi+seg.off)
		if seg.start != math.MinInt64 {
			var gapLo, gapHi int64
			wallLo, gapLo, gapHi = s.transition(seg, wallLo)
			if lo == seg.start {
				if _, ok := s.earliest(gapLo, gapHi); ok {
					return time.Unix(seg.start, 0).UTC()
				}
			}
		}
		if c, ok := s.earliest(wallLo, wallHi); ok {
			return time.Unix(c-seg.off, 0).UTC()
		}
		if seg.end >= limit {
			break
		}
		lo = seg.end
	}
	return time.Time{}
}

// transition applies Debian cron's rules at the start of seg, where the zone's offset
// changed, as cron meets them on its first wake after the change: it compares the wall
// clock's minute then (cur) with the last minute it ran jobs for (last), in whole
// minutes, and with diff = cur − last it runs
//
//   - diff 1: every job of cur (a change of less than a minute forward);
//   - diff 2 to 5: every job of each minute after last up to cur (it thinks it woke late);
//   - diff 6 to 180 (daylight saving begins): the wildcard jobs of cur, and the fixed-time
//     jobs of each minute after last up to cur, so a fixed time skipped by the change
//     runs at the first instant after it;
//   - diff below 0, down to −179 (daylight saving ends): the wildcard jobs of cur only,
//     and fixed-time jobs again only after last (those of a repeated time ran already);
//   - above 180 or −180 and below (a clock change to cron, not daylight saving): every
//     job of cur;
//   - diff 0 (the clock went back a minute): nothing; it sleeps to the next minute.
//
// All of these run at seg.start: the wall minutes [gapLo, gapHi] tick there (gapHi <
// gapLo: none), and the segment's own minutes from newLo on tick as they come. cur is a
// minute that began before seg.start when the offsets differ by a fraction of a minute
// (Africa/Monrovia's −0:44:30 to 0:00 in 1972 put the wall clock at 00:44:30): its
// jobs start at seg.start, not at a minute boundary.
func (s *Schedule) transition(seg segment, wallLo int64) (newLo, gapLo, gapHi int64) {
	prev := s.segmentAt(seg.start - 1)
	last := floorMinute(seg.start + prev.off - 1)
	cur := floorMinute(seg.start + seg.off)
	const large = 180
	diff := (cur - last) / 60
	switch {
	case diff == 0:
		return max(wallLo, last+60), 0, -1 // cron sleeps on: that minute had its run
	case diff >= 2 && diff <= 5, diff > 5 && diff <= large && !s.wild:
		return wallLo, last + 60, cur
	case diff < 0 && diff > -large && !s.wild:
		return max(wallLo, last+60), 0, -1
	}
	return wallLo, cur, cur
}

// A segment is a stretch of instants [start, end) (Unix seconds) with one UTC offset,
// off seconds; start is math.MinInt64 and end math.MaxInt64 where the zone has no
// transition. Within a segment the wall clock is instant+off.
type segment struct {
	start, end, off int64
}

func (s *Schedule) segmentAt(sec int64) segment {
	t := time.Unix(sec, 0).In(s.loc)
	_, off := t.Zone()
	seg := segment{start: math.MinInt64, end: math.MaxInt64, off: int64(off)}
	start, end := t.ZoneBounds()
	if !start.IsZero() {
		seg.start = start.Unix()
	}
	if !end.IsZero() {
		seg.end = end.Unix()
	}
	if seg.start <= sec && sec < seg.end {
		return seg
	}
	// Past the zone file's last transition Go derives bounds from the zone's rule and, in
	// a leap year, ends the year a day early (go1.26: ZoneBounds of 2040-12-31T12:00Z in
	// Europe/London ends at 2040-12-31T00:00Z). Find the bounds from offsets instead.
	seg.start = s.edge(sec, seg.off, -1)
	seg.end = s.edge(sec, seg.off, +1) + 1
	return seg
}

func (s *Schedule) offsetAt(sec int64) int64 {
	_, off := time.Unix(sec, 0).In(s.loc).Zone()
	return int64(off)
}

// edge returns the last second in direction dir (+1 or -1) from sec that still has the
// offset off, looking up to about a year: farther bounds are only the rule's year ends.
func (s *Schedule) edge(sec, off, dir int64) int64 {
	in, step := sec, int64(3600)
	for step < 400*86400 && s.offsetAt(in+dir*step) == off {
		in += dir * step
		step *= 2
	}
	if step >= 400*86400 {
		return in
	}
	out := in + dir*step // has another offset; the edge is between in and out
	for (out-in)*dir > 1 {
		mid := in + (out-in)/2
		if s.offsetAt(mid) == off {
			in = mid
		} else {
			out = mid
		}
	}
	return in
}

func floorMinute(sec int64) int64 {
	m := sec % 60
	if m < 0 {
		m += 60
	}
	return sec - m
}

func ceilMinute(sec int64) int64 { return -floorMinute(-sec) }

// A civil minute: a wall-clock date and time.
type civil struct {
	y, mo, d, h, mi int
}

func civilOf(wall int64) civil {
	t := time.Unix(wall, 0).UTC()
	y, mo, d := t.Date()
	return civil{y, int(mo), d, t.Hour(), t.Minute()}
}

func (c civil) wall() int64 {
	return time.Date(c.y, time.Month(c.mo), c.d, c.h, c.mi, 0, 0, time.UTC).Unix()
}

// key orders civil minutes as wall() does, without the cost of time.Date.
func (c civil) key() int64 {
	return ((((int64(c.y)*13+int64(c.mo))*32+int64(c.d))*24+int64(c.h))*60 + int64(c.mi))
}

// latest returns the latest wall-clock minute in [lo, hi] (wall seconds) that matches
// the fields. It jumps by field: a month that does not match is skipped whole, and so
// is a day or an hour.
func (s *Schedule) latest(lo, hi int64) (int64, bool) {
	if hi < lo {
		return 0, false
	}
	c, stop := civilOf(hi), civilOf(lo).key()
	for c.key() >= stop {
		switch {
		case s.month&(1<<c.mo) == 0:
			if m := highestBelow(uint64(s.month), c.mo); m > 0 {
				c = civil{c.y, m, daysIn(c.y, m), 23, 59}
			} else {
				m = highestBelow(uint64(s.month), 13)
				c = civil{c.y - 1, m, daysIn(c.y-1, m), 23, 59}
			}
		case !s.dayMatches(c.y, c.mo, c.d):
			c = s.prevDay(c)
		case s.hour&(1<<c.h) == 0:
			if h := highestBelow(uint64(s.hour), c.h); h >= 0 {
				c.h, c.mi = h, 59
			} else {
				c = prevDayEnd(c)
			}
		case s.minute&(1<<c.mi) == 0:
			if m := highestBelow(s.minute, c.mi); m >= 0 {
				c.mi = m
			} else if h := highestBelow(uint64(s.hour), c.h); h >= 0 {
				c.h, c.mi = h, 59
			} else {
				c = prevDayEnd(c)
			}
		default:
			return c.wall(), true
		}
	}
	return 0, false
}

// earliest is latest's mirror: the earliest matching minute in [lo, hi].
func (s *Schedule) earliest(lo, hi int64) (int64, bool) {
	if hi < lo {
		return 0, false
	}
	c, stop := civilOf(lo), civilOf(hi).key()
	for c.key() <= stop {
		switch {
		case s.month&(1<<c.mo) == 0:
			if m := lowestAbove(uint64(s.month), c.mo); m >= 0 && m <= 12 {
				c = civil{c.y, m, 1, 0, 0}
			} else {
				c = civil{c.y + 1, lowestAbove(uint64(s.month), 0), 1, 0, 0}
			}
		case !s.dayMatches(c.y, c.mo, c.d):
			c = s.nextDay(c)
		case s.hour&(1<<c.h) == 0:
			if h := lowestAbove(uint64(s.hour), c.h); h >= 0 && h < 24 {
				c.h, c.mi = h, 0
			} else {
				c = nextDayStart(c)
			}
		case s.minute&(1<<c.mi) == 0:
			if m := lowestAbove(s.minute, c.mi); m >= 0 && m < 60 {
				c.mi = m
			} else if h := lowestAbove(uint64(s.hour), c.h); h >= 0 && h < 24 {
				c.h, c.mi = h, 0
			} else {
				c = nextDayStart(c)
			}
		default:
			return c.wall(), true
		}
	}
	return 0, false
}

func (s *Schedule) dayMatches(y, mo, d int) bool {
	if d > daysIn(y, mo) {
		return false
	}
	domOK := s.dom&(1<<d) != 0
	dowOK := s.dow&(1<<weekday(y, mo, d)) != 0
	if s.domStar || s.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// prevDay steps to the end of the previous day, skipping straight to the previous
// day-of-month that can match when the day-of-week field cannot add one.
func (s *Schedule) prevDay(c civil) civil {
	if s.domStar || s.dowStar {
		if s.dow == 0x7f {
			if d := highestBelow(uint64(s.dom), c.d); d > 0 {
				return civil{c.y, c.mo, d, 23, 59}
			}
			c.d = 1
		}
	}
	return prevDayEnd(c)
}

func (s *Schedule) nextDay(c civil) civil {
	if s.domStar || s.dowStar {
		if s.dow == 0x7f {
			if d := lowestAbove(uint64(s.dom), c.d); d > 0 && d <= daysIn(c.y, c.mo) {
				return civil{c.y, c.mo, d, 0, 0}
			}
			c.d = daysIn(c.y, c.mo)
		}
	}
	return nextDayStart(c)
}

func prevDayEnd(c civil) civil {
	if c.d > 1 {
		return civil{c.y, c.mo, c.d - 1, 23, 59}
	}
	if c.mo > 1 {
		return civil{c.y, c.mo - 1, daysIn(c.y, c.mo-1), 23, 59}
	}
	return civil{c.y - 1, 12, 31, 23, 59}
}

func nextDayStart(c civil) civil {
	if c.d < daysIn(c.y, c.mo) {
		return civil{c.y, c.mo, c.d + 1, 0, 0}
	}
	if c.mo < 12 {
		return civil{c.y, c.mo + 1, 1, 0, 0}
	}
	return civil{c.y + 1, 1, 1, 0, 0}
}

// highestBelow returns the highest set bit of mask below n, or -1.
func highestBelow(mask uint64, n int) int {
	return bits.Len64(mask&(1<<n-1)) - 1
}

// lowestAbove returns the lowest set bit of mask above n, or -1.
func lowestAbove(mask uint64, n int) int {
	m := mask &^ (1<<(n+1) - 1)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

func daysIn(y, mo int) int {
	switch mo {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// weekday returns 0 for Sunday, from Howard Hinnant's days_from_civil.
func weekday(y, mo, d int) int {
	if mo <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (mo + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	days := era*146097 + doe - 719468
	w := (days + 4) % 7 // 1970-01-01 was a Thursday
	if w < 0 {
		w += 7
	}
	return w
}
