// Package schedule reads crontab(5) schedules and finds their ticks.
//
// Its one job is crontab(5) expressions, zones, and the previous tick at or before an
// instant (and the next one after it), with Debian cron's daylight-saving rules: an
// expression whose minute or hour field starts with "*" (and @hourly) matches wall-clock
// times as they happen, so a repeated hour has two ticks and a skipped hour none; any
// other expression matches each wall-clock time once, at its first occurrence, and a time
// inside a spring-forward gap at the first instant after the gap. A tick is a minute
// boundary of the zone's own wall clock, also where the offset is not a whole number of
// minutes (Africa/Monrovia, −0:44:30 until 1972: 30 s past each UTC minute); a minute cut
// by an offset change ticks at the change, where cron runs it (see transition).
//
// The package is pure: the only I/O is reading the zone of /etc/localtime, the zone the
// cron daemon uses, when no zone is given. It never reads $TZ (and never uses time.Local,
// which does): in a crontab, TZ= changes a job's environment, not when cron fires it. It
// does not run anything, claim ticks or know about locks; its callers do.
package schedule

import (
	"strconv"
	"strings"
	"time"
)

// A Schedule is a parsed crontab expression with the zone its wall-clock times are read
// in. Make one with Parse; the zero Schedule is not usable. A Schedule is immutable and
// safe for concurrent use.
type Schedule struct {
	expr string // normalised, without the CRON_TZ= prefix
	zone string
	loc  *time.Location

	minute uint64 // bits 0-59
	hour   uint32 // bits 0-23
	dom    uint32 // bits 1-31
	month  uint16 // bits 1-12
	dow    uint8  // bits 0-6, Sunday = 0 (7 is folded into 0)

	// domStar and dowStar are Vixie cron's DOM_STAR and DOW_STAR: the field's text starts
	// with "*". When either is set a day must match both fields, otherwise either.
	domStar, dowStar bool
	// wild is Vixie cron's MIN_STAR|HR_STAR: it decides the daylight-saving rule.
	wild bool
	// minStar, hourStar and monthStar: the field's text starts with "*" (Canonical).
	minStar, hourStar, monthStar bool
}

// String returns the expression as Parse read it, normalised: lowercase, fields separated
// by one space, without a CRON_TZ= prefix (Zone names the zone). Parse(s.String(),
// s.Zone()) gives an equal Schedule.
func (s *Schedule) String() string { return s.expr }

// Zone returns the name of the zone the schedule's wall-clock times are read in: the
// CRON_TZ= prefix, else the tz given to Parse, else the name /etc/localtime points to
// (such as "Europe/Berlin"; "/etc/localtime" when it is a copy rather than a link, "UTC"
// when it is missing).
func (s *Schedule) Zone() string { return s.zone }

// Location returns the zone as a *time.Location, for showing a tick in local time.
func (s *Schedule) Location() *time.Location { return s.loc }

// Wildcard reports whether the expression matches wall-clock times as they happen (its
// minute or hour field starts with "*", or it is @hourly): then a repeated hour has two
// ticks and a skipped hour none. Otherwise it is a fixed-time expression.
func (s *Schedule) Wildcard() bool { return s.wild }

func normalise(fields []string) string {
	return strings.ToLower(strings.Join(fields, " "))
}

// Canonical returns the expression in a canonical form, so that two spellings of one
// schedule compare equal: descriptors become their five fields (@daily is 0 0 * * *),
// names become numbers, 7 becomes 0, and each field is written from the values it
// matches ("*", "*/n" where the text began with "*", else a list of values and ranges).
// A field's leading "*" is kept because it changes what cron does (the day fields are
// then AND-ed, not OR-ed; daylight saving). The zone is not part of it (Zone).
func (s *Schedule) Canonical() string {
	f := []string{
		canonField(s.minute, 0, 59, s.minStar),
		canonField(uint64(s.hour), 0, 23, s.hourStar),
		canonField(uint64(s.dom), 1, 31, s.domStar),
		canonField(uint64(s.month), 1, 12, s.monthStar),
		canonField(uint64(s.dow), 0, 6, s.dowStar),
	}
	return strings.Join(f, " ")
}

// canonField writes the values of bits in lo..hi.
func canonField(bits uint64, lo, hi int, star bool) string {
	if star {
		for n := 1; n <= hi-lo+1; n++ {
			var want uint64
			for v := lo; v <= hi; v += n {
				want |= 1 << v
			}
			if want == bits {
				if n == 1 {
					return "*"
				}
				return "*/" + strconv.Itoa(n)
			}
		}
	}
	var out []string
	for v := lo; v <= hi; v++ {
		if bits&(1<<v) == 0 {
			continue
		}
		end := v
		for end+1 <= hi && bits&(1<<(end+1)) != 0 {
			end++
		}
		switch {
		case end == v:
			out = append(out, strconv.Itoa(v))
		case end == v+1:
			out = append(out, strconv.Itoa(v), strconv.Itoa(end))
		default:
			out = append(out, strconv.Itoa(v)+"-"+strconv.Itoa(end))
		}
		v = end
	}
	return strings.Join(out, ",")
}
