package schedule

import (
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every zone of the system's tzdata against a model of Debian's cron itself: its main
// loop (cron.c of cron 3.0pl1, with the daylight-saving patch Debian carries), run wake
// by wake, rather than a reading of its rules. It shares no code with the package: the
// fields are read by the oracle (oracle_test.go), the wall clock by time.Time.In alone.
//
// What the model does, as cron does:
//   - cron sleeps until the next minute of its wall clock, clockTime = (now + GMToff)/60
//     in whole minutes, where GMToff is the zone's offset in seconds, minutes and seconds
//     both (so in a zone 44 min 30 s behind UTC it wakes at 30 s past each UTC minute);
//   - on waking, timeDiff = clockTime − virtualTime (the last minute it ran jobs for)
//     decides: 1 runs every job of the new minute; 2 to 5 (woke late) every job of each
//     minute missed; 6 to 180 (the clock went forward: daylight saving) the wildcard jobs
//     of the new minute and the fixed-time jobs of each minute missed; below 0 down to
//     −179 (the clock went back), the wildcard jobs of the new minute only, virtualTime
//     staying until the clock has caught up; above 180, or −180 and below, every job of
//     the new minute; and a wake within the minute it ran last (timeDiff 0) sleeps on;
//   - a job is "wildcard" when its minute or hour field starts with * (Debian sets
//     HR_STAR for @hourly), and every job it runs on one wake starts at that wake.
//
// One thing the model does not copy: cron re-reads GMToff only when the zone's isdst
// flag flips, so an offset change that is not daylight saving (Africa/Monrovia's in
// 1972, America/Caracas's in 2007) reaches a running daemon only at its next restart,
// and until then it fires by the old offset. The model re-reads the offset at every wake,
// as a daemon started after the change does; cronlock's tick is the one of that daemon.
//
// Compared within 1970–2037 (cron's minute arithmetic overflows in 2038): around offset
// changes, which is where the rules differ, and at instants between them. A tick is the
// wake's instant; cron starts the job a second after it.

// cronTable is an expression read by the oracle once into tables, for speed.
type cronTable struct {
	minute [60]bool
	hour   [24]bool
	dom    [32]bool
	month  [13]bool
	dow    [8]bool
	star   bool // the day-of-month or day-of-week field starts with *: both must match
	wild   bool
}

func newCronTable(o *oracle) *cronTable {
	c := &cronTable{wild: o.wild, star: o.fields[2][0] == '*' || o.fields[4][0] == '*'}
	for i := range 60 {
		c.minute[i] = fieldHas(o.fields[0], i, 0, 59)
	}
	for i := range 24 {
		c.hour[i] = fieldHas(o.fields[1], i, 0, 23)
	}
	for i := 1; i <= 31; i++ {
		c.dom[i] = fieldHas(o.fields[2], i, 1, 31)
	}
	for i := 1; i <= 12; i++ {
		c.month[i] = fieldHas(o.fields[3], i, 1, 12)
	}
	for i := range 7 {
		c.dow[i] = fieldHas(o.fields[4], i, 0, 7) || (i == 0 && fieldHas(o.fields[4], 7, 0, 7))
	}
	return c
}

// matches reports whether the wall-clock minute number vm (minutes since 1970-01-01 00:00
// of the wall clock, as cron's virtual time) matches: cron reads it with gmtime.
func (c *cronTable) matches(vm int64) bool {
	w := time.Unix(vm*60, 0).UTC()
	_, mo, d := w.Date()
	if !c.minute[w.Minute()] || !c.hour[w.Hour()] || !c.month[mo] {
		return false
	}
	if c.star {
		return c.dom[d] && c.dow[w.Weekday()]
	}
	return c.dom[d] || c.dow[w.Weekday()]
}

// debianCron runs the model from start (the daemon starts then) to end and returns the
// instants of the wakes that started a job of c, in order.
func debianCron(c *cronTable, loc *time.Location, start, end int64) []int64 {
	offset := func(sec int64) int64 {
		_, off := time.Unix(sec, 0).In(loc).Zone()
		return int64(off)
	}
	floorDiv := func(a, b int64) int64 {
		q := a / b
		if a%b != 0 && (a < 0) != (b < 0) {
			q--
		}
		return q
	}
	gmtoff := offset(start)
	timeRunning := floorDiv(start+gmtoff, 60)
	virtualTime := timeRunning
	var runs []int64
	for {
		// cron_sleep(timeRunning + 1), then set_time.
		wake := (timeRunning+1)*60 - gmtoff
		if wake >= end {
			return runs
		}
		gmtoff = offset(wake)
		clock := floorDiv(wake+gmtoff, 60)
		if clock == timeRunning {
			continue // still the minute it ran: it sleeps again, to the new offset's minute
		}
		timeRunning = clock
		ran := false
		find := func(vm int64, doWild, doFixed bool) {
			if (c.wild && doWild || !c.wild && doFixed) && c.matches(vm) {
				ran = true
			}
		}
		switch diff := timeRunning - virtualTime; {
		case diff == 1:
			virtualTime = timeRunning
			find(virtualTime, true, true)
		case diff > 180 || diff <= -180: // cron.c: wakeupKind stays -1 unless diff > -180
			virtualTime = timeRunning
			find(timeRunning, true, true)
		case diff > 5:
			find(timeRunning, true, false)
			for virtualTime < timeRunning {
				virtualTime++
				find(virtualTime, false, true)
			}
		case diff > 0:
			for virtualTime < timeRunning {
				virtualTime++
				find(virtualTime, true, true)
			}
		default:
			find(timeRunning, true, false)
		}
		if ran {
			runs = append(runs, wake)
		}
	}
}

// zoneExprs are the expressions every zone is tried with: every minute, wildcard and
// fixed-time (the fixed one is every minute too, so every rule for a fixed time shows at
// any hour a zone changes its offset), an hourly one of each, and a daily one.
var zoneExprs = []string{"* * * * *", "0-59 0-23 * * *", "@hourly", "0 0-23 * * *", "30 2 * * *", "0 0 * * *"}

// tzdataZones returns the zone files under dir, one name per distinct content (links and
// copies are one zone), skipping posix/ (a copy of the rest) and right/ (the same zones
// counting leap seconds, which neither the kernel's clock nor Go's time package counts).
func tzdataZones(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	seen := map[[32]byte]bool{}
	zones := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if name == "posix" || name == "right" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(data), "TZif") {
			return nil // zone.tab, leapseconds, tzdata.zi…
		}
		if name == "localtime" || name == "posixrules" || name == "Factory" {
			return nil
		}
		sum := sha256.Sum256(data)
		if !seen[sum] {
			seen[sum] = true
			zones[name] = data
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return zones
}

// zoneChanges returns the instants in [from, to) where loc's offset changes.
func zoneChanges(loc *time.Location, from, to int64) []int64 {
	var out []int64
	for t := from; t < to; {
		_, end := time.Unix(t, 0).In(loc).ZoneBounds()
		if end.IsZero() || end.Unix() >= to {
			break
		}
		if _, a := time.Unix(end.Unix()-1, 0).In(loc).Zone(); true {
			if _, b := end.In(loc).Zone(); a != b {
				out = append(out, end.Unix())
			}
		}
		t = end.Unix()
	}
	return out
}

const (
	cronFrom = 1970 // the first year compared (a window needs the hours before it too)
	cronTo   = 2038 // the first year not compared: cron's minute arithmetic overflows
)

// TestTicksAgreeWithDebianCronInEveryZone compares the ticks of zoneExprs with the model
// of Debian's cron in every zone of /usr/share/zoneinfo: around every offset change of a
// sample (each zone's changes of each kind, and a random share of the rest; all of them
// without -short when CRONLOCK_TEST_ALL_ZONE_CHANGES=1), and at a few instants in
// between, among them Africa/Monrovia's years at −0:44:30.
func TestTicksAgreeWithDebianCronInEveryZone(t *testing.T) {
	const dir = "/usr/share/zoneinfo"
	if _, err := os.Stat(filepath.Join(dir, "Europe/Berlin")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the system's tzdata is missing (%v): apt-get install tzdata (scripts/test.sh does)", err)
		}
		t.Skipf("the system's tzdata is missing (%v): apt-get install tzdata", err)
	}
	all := os.Getenv("CRONLOCK_TEST_ALL_ZONE_CHANGES") == "1" && !testing.Short()
	share := 0.02
	if testing.Short() {
		share = 0.005
	}
	zones := tzdataZones(t, dir)
	names := make([]string, 0, len(zones))
	for n := range zones {
		names = append(names, n)
	}
	slices.Sort(names)
	from := time.Date(cronFrom, 1, 1, 0, 0, 0, 0, time.UTC).Unix() + 12*3600
	to := time.Date(cronTo, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - 12*3600
	windows, changes := 0, 0
	for _, name := range names {
		loc, err := time.LoadLocationFromTZData(name, zones[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		scheds := make([]*Schedule, len(zoneExprs))
		tables := make([]*cronTable, len(zoneExprs))
		for i, e := range zoneExprs {
			if scheds[i], err = Parse(e, name); err != nil {
				t.Fatalf("Parse(%q, %q): %v", e, name, err)
			}
			tables[i] = newCronTable(newOracle(t, e, loc))
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		r := rand.New(rand.NewPCG(h.Sum64(), 2026))
		chs := zoneChanges(loc, from, to)
		changes += len(chs)
		kinds := map[string]bool{}
		var at []int64
		for _, c := range chs {
			_, before := time.Unix(c-1, 0).In(loc).Zone()
			_, after := time.Unix(c, 0).In(loc).Zone()
			kind := fmt.Sprintf("%d %d", before, after)
			if all || !kinds[kind] || r.Float64() < share {
				kinds[kind] = true
				at = append(at, c)
			}
		}
		for range 2 {
			at = append(at, from+8*3600+r.Int64N(to-from-16*3600))
		}
		if name == "Africa/Monrovia" {
			at = append(at, time.Date(1971, 6, 1, 11, 0, 30, 0, time.UTC).Unix())
		}
		for _, c := range at {
			// After a change, cron's rules last until the clock is back where it was (at
			// most 180 minutes: beyond that cron runs only the new minute's jobs).
			_, before := time.Unix(c-1, 0).In(loc).Zone()
			_, after := time.Unix(c, 0).In(loc).Zone()
			span := min(time.Duration(max(before-after, after-before))*time.Second, 3*time.Hour) + 15*time.Minute
			windows++
			compareWithCron(t, name, loc, scheds, tables, c-10*60, c+int64(span/time.Second))
		}
	}
	t.Logf("%d zones, %d offset changes in %d–%d, %d windows compared", len(names), changes, cronFrom, cronTo-1, windows)
}

// compareWithCron compares the schedules' ticks in [lo, hi) with the model's, the daemon
// started some hours before lo (with no offset change in the hours before that, so that
// it starts as a daemon running for long would be).
func compareWithCron(t *testing.T, name string, loc *time.Location, scheds []*Schedule, tables []*cronTable, lo, hi int64) {
	t.Helper()
	start := lo - 4*3600
	for {
		ch := zoneChanges(loc, start-4*3600, start)
		if len(ch) == 0 {
			break
		}
		start = ch[0] - 4*3600
	}
	for i, s := range scheds {
		var want []int64
		for _, w := range debianCron(tables[i], loc, start, hi) {
			if w >= lo {
				want = append(want, w)
			}
		}
		var got []int64
		for tick := s.Next(time.Unix(lo-1, 0)); tick.Unix() < hi; tick = s.Next(tick) {
			got = append(got, tick.Unix())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q in %s, %s to %s:\n cronlock %s\n cron     %s", s, name,
				time.Unix(lo, 0).In(loc).Format(time.RFC3339), time.Unix(hi, 0).In(loc).Format(time.RFC3339),
				showTicks(got, want, loc), showTicks(want, got, loc))
		}
		// Prev agrees: at each tick, and just before the next one.
		for j, w := range want {
			if p := s.Prev(time.Unix(w, 0)); p.Unix() != w {
				t.Fatalf("%q in %s: Prev(%s) = %s, want the tick itself", s, name, time.Unix(w, 0).In(loc).Format(time.RFC3339), p.In(loc).Format(time.RFC3339))
			}
			if j+1 < len(want) {
				if p := s.Prev(time.Unix(want[j+1]-1, 0)); p.Unix() != w {
					t.Fatalf("%q in %s: Prev(%s) = %s, want %s", s, name, time.Unix(want[j+1]-1, 0).In(loc).Format(time.RFC3339), p.In(loc).Format(time.RFC3339), time.Unix(w, 0).In(loc).Format(time.RFC3339))
				}
			}
		}
	}
}

// showTicks lists the ticks of a that b lacks, marked with *, among a's others near them.
func showTicks(a, b []int64, loc *time.Location) string {
	var out []string
	for _, x := range a {
		mark := ""
		if !slices.Contains(b, x) {
			mark = "*"
		}
		out = append(out, mark+time.Unix(x, 0).In(loc).Format("15:04:05Z07:00"))
	}
	if len(out) > 40 {
		// Keep the marked ones and their neighbours.
		var keep []string
		for i, s := range out {
			if strings.HasPrefix(s, "*") || (i > 0 && strings.HasPrefix(out[i-1], "*")) || (i+1 < len(out) && strings.HasPrefix(out[i+1], "*")) {
				keep = append(keep, s)
			} else if len(keep) == 0 || keep[len(keep)-1] != "…" {
				keep = append(keep, "…")
			}
		}
		out = keep
	}
	return strings.Join(out, " ")
}
