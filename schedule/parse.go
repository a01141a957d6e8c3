package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a crontab(5) schedule: five fields (minute hour day-of-month month
// day-of-week; numbers, ranges a-b, steps */n and a-b/n, lists, month and day names of
// three letters in any case, 0 or 7 for Sunday) or one of @yearly @annually @monthly
// @weekly @daily @midnight @hourly. When both day fields are restricted a day matches
// either; when either starts with "*" it must match both (Vixie cron).
//
// The zone is a CRON_TZ=Zone prefix of expr, else tz (the --tz / CRONLOCK_TZ value),
// else the zone of /etc/localtime; never $TZ. Zones are tz database names such as
// Europe/Berlin or UTC.
//
// Parse refuses, with a one-line error that says what is wrong and what is allowed (and
// does not repeat expr, which the caller names with its flag): a descriptor not in lower
// case (@HOURLY, @Daily: cron refuses it, and with it the whole crontab), @reboot and
// @every (they have no tick), seconds or year fields, a TZ= prefix, "?", a step on a
// single value ("5/10": cron versions read it differently), backward ranges, and
// expressions that can never match (such as 0 0 30 2 *). Refusing the last ones means every Schedule has a
// tick at least every 100 years, so Prev and Next find one.
func Parse(expr, tz string) (*Schedule, error) {
	fields := strings.Fields(expr)
	zoneName, fromPrefix := tz, false
	if len(fields) > 0 {
		switch f := fields[0]; {
		case hasPrefixFold(f, "CRON_TZ="):
			zoneName, fromPrefix = f[len("CRON_TZ="):], true
			fields = fields[1:]
			if zoneName == "" {
				return nil, fmt.Errorf("CRON_TZ= names no zone: write CRON_TZ=Europe/Berlin (no space after =) before the fields")
			}
		case hasPrefixFold(f, "TZ="):
			return nil, fmt.Errorf("a TZ= prefix does not set when cron fires (in a crontab it sets the job's environment): use CRON_TZ=Zone, --tz or CRONLOCK_TZ")
		}
	}
	s, err := parseFields(fields)
	if err != nil {
		return nil, err
	}
	if fromPrefix {
		s.loc, err = loadZone(zoneName)
		if err != nil {
			return nil, fmt.Errorf("CRON_TZ zone %q: %w", zoneName, err)
		}
		s.zone = zoneName
	} else if zoneName != "" {
		s.loc, err = loadZone(zoneName)
		if err != nil {
			return nil, fmt.Errorf("time zone %q (--tz or CRONLOCK_TZ): %w", zoneName, err)
		}
		s.zone = zoneName
	} else {
		s.loc, s.zone, err = localZone()
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// descriptor returns the five fields a Debian cron shorthand stands for. (A switch, not a
// map: a map would cost every cronlock start a package init.) Debian sets HR_STAR for
// @hourly, so @hourly is a wildcard expression for daylight saving.
func descriptor(d string) (string, bool) {
	switch d {
	case "@yearly", "@annually":
		return "0 0 1 1 *", true
	case "@monthly":
		return "0 0 1 * *", true
	case "@weekly":
		return "0 0 * * 0", true
	case "@daily", "@midnight":
		return "0 0 * * *", true
	case "@hourly":
		return "0 * * * *", true
	}
	return "", false
}

const fieldHelp = "5 fields (minute hour day-of-month month day-of-week) or @yearly @annually @monthly @weekly @daily @midnight @hourly"

func parseFields(fields []string) (*Schedule, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty schedule: give %s", fieldHelp)
	}
	if strings.HasPrefix(fields[0], "@") {
		d := strings.ToLower(fields[0])
		if _, known := descriptor(d); (known || d == "@reboot") && d != fields[0] {
			// Debian's cron (and cronie) compare descriptors with strcmp.
			return nil, fmt.Errorf("descriptors are lower case only: cron refuses this one (\"bad time specifier\") and then ignores the whole crontab; write %s", d)
		}
		switch {
		case d == "@reboot":
			return nil, fmt.Errorf("@reboot has no tick (it runs once at boot): give %s", fieldHelp)
		case d == "@every":
			return nil, fmt.Errorf("@every is not crontab(5) and has no fixed ticks: write the fields, e.g. */5 * * * *")
		}
		five, ok := descriptor(d)
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q: crontab(5) has @yearly @annually @monthly @weekly @daily @midnight @hourly", fields[0])
		}
		if len(fields) > 1 {
			return nil, fmt.Errorf("%s takes nothing after it, found %q", d, strings.Join(fields[1:], " "))
		}
		s, err := parseFields(strings.Fields(five))
		if err != nil {
			panic("schedule: descriptor " + d + ": " + err.Error())
		}
		s.expr = d
		s.wild = d == "@hourly"
		return s, nil
	}
	if len(fields) != 5 {
		return nil, fmt.Errorf("%d fields: cronlock takes the %s; no seconds, year, user or command", len(fields), fieldHelp)
	}
	s := &Schedule{expr: normalise(fields)}
	var err error
	var bits uint64
	if s.minute, err = minuteField.parse(fields[0]); err != nil {
		return nil, err
	}
	if bits, err = hourField.parse(fields[1]); err != nil {
		return nil, err
	}
	s.hour = uint32(bits)
	if bits, err = domField.parse(fields[2]); err != nil {
		return nil, err
	}
	s.dom = uint32(bits)
	if bits, err = monthField.parse(fields[3]); err != nil {
		return nil, err
	}
	s.month = uint16(bits)
	if bits, err = dowField.parse(fields[4]); err != nil {
		return nil, err
	}
	// 0 and 7 are both Sunday (Vixie cron sets both bits; one is enough here).
	if bits&(1<<7) != 0 {
		bits = bits&^(1<<7) | 1
	}
	s.dow = uint8(bits)
	s.wild = fields[0][0] == '*' || fields[1][0] == '*'
	s.minStar, s.hourStar, s.monthStar = fields[0][0] == '*', fields[1][0] == '*', fields[3][0] == '*'
	s.domStar = fields[2][0] == '*'
	s.dowStar = fields[4][0] == '*'
	if err := s.checkSatisfiable(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkSatisfiable refuses day-of-month and month fields that never meet. Only then can
// an expression never match: if a day is matched by either day field, every week has
// one; if by both, each (month, day) pair meets every weekday within 28 years or so.
func (s *Schedule) checkSatisfiable() error {
	if !s.domStar && !s.dowStar {
		return nil
	}
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		longest := daysIn(2000, m) // a leap year: Feb 29 counts
		if s.dom&(1<<(longest+1)-1) != 0 {
			return nil
		}
	}
	return fmt.Errorf("day-of-month and month never meet (no month chosen has those days): the schedule would never run")
}

type field struct {
	name     string
	min, max int
	names    []string // names[i] is the value min+i
}

var (
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12,
		names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	dowField = field{name: "day-of-week", min: 0, max: 7,
		names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

func (f field) errorf(elem, format string, args ...any) error {
	return fmt.Errorf("%s field %q: %s", f.name, elem, fmt.Sprintf(format, args...))
}

func (f field) allowed() string {
	a := fmt.Sprintf("%d-%d", f.min, f.max)
	if f.names != nil {
		a += fmt.Sprintf(" or %s-%s", f.names[0], f.names[len(f.names)-1])
	}
	if f.name == "day-of-week" {
		a += " (0 and 7 are Sunday)"
	}
	return a
}

// parse reads one field: a comma-separated list of *, */n, a, a-b, a-b/n.
func (f field) parse(text string) (uint64, error) {
	var bits uint64
	for _, elem := range strings.Split(text, ",") {
		b, err := f.parseElem(elem)
		if err != nil {
			return 0, err
		}
		bits |= b
	}
	return bits, nil
}

func (f field) parseElem(elem string) (uint64, error) {
	if elem == "" {
		return 0, f.errorf(elem, "empty list item: separate values with single commas, e.g. 1,15")
	}
	rng, stepText, hasStep := strings.Cut(elem, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || !isDigits(stepText) || n < 1 {
			return 0, f.errorf(elem, "the step after / must be a whole number of 1 or more")
		}
		step = n
	}
	var lo, hi int
	switch {
	case rng == "*":
		lo, hi = f.min, f.max
	case rng == "?":
		return 0, f.errorf(elem, "? is not crontab(5): use *")
	case strings.Contains(rng, "*"):
		return 0, f.errorf(elem, "* stands alone or as */n")
	default:
		loText, hiText, isRange := strings.Cut(rng, "-")
		var err error
		if lo, err = f.value(elem, loText); err != nil {
			return 0, err
		}
		hi = lo
		if isRange {
			if hi, err = f.value(elem, hiText); err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, f.errorf(elem, "the range runs backwards; write low-high, or a list such as %d-%d,%d-%d", lo, f.max, f.min, hi)
			}
		} else if hasStep {
			return 0, f.errorf(elem, "a step needs a range: write %d-%d/%d or */%d (cron versions differ on %s)", lo, f.max, step, step, elem)
		}
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << v
	}
	return bits, nil
}

func (f field) value(elem, text string) (int, error) {
	if text == "" {
		return 0, f.errorf(elem, "a value is missing: allowed are %s", f.allowed())
	}
	if isDigits(text) {
		n, err := strconv.Atoi(text)
		if err != nil || n < f.min || n > f.max {
			return 0, f.errorf(elem, "%s is out of range: allowed are %s", text, f.allowed())
		}
		return n, nil
	}
	for i, name := range f.names {
		if strings.EqualFold(text, name) {
			return f.min + i, nil
		}
	}
	if f.names != nil {
		return 0, f.errorf(elem, "%s is not a number or a three-letter name: allowed are %s", text, f.allowed())
	}
	return 0, f.errorf(elem, "%s is not a number: allowed are %s", text, f.allowed())
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
