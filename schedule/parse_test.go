package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPrevFields: what each part of crontab(5) selects, in UTC, through Prev and Next.
func TestPrevFields(t *testing.T) {
	tests := []struct {
		expr, now, prev, next string
	}{
		// Descriptors.
		{"@yearly", "2026-05-09T10:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"@annually", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"@monthly", "2026-05-09T10:00:00Z", "2026-05-01T00:00:00Z", "2026-06-01T00:00:00Z"},
		{"@weekly", "2026-05-09T10:00:00Z", "2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"}, // Sundays
		{"@daily", "2026-05-09T10:00:00Z", "2026-05-09T00:00:00Z", "2026-05-10T00:00:00Z"},
		{"@midnight", "2026-05-09T00:00:00Z", "2026-05-09T00:00:00Z", "2026-05-10T00:00:00Z"},
		{"@hourly", "2026-05-09T10:59:59Z", "2026-05-09T10:00:00Z", "2026-05-09T11:00:00Z"},
		// Every minute; the tick at now itself; seconds and nanoseconds of now.
		{"* * * * *", "2026-05-09T10:07:00Z", "2026-05-09T10:07:00Z", "2026-05-09T10:08:00Z"},
		{"* * * * *", "2026-05-09T10:07:59.999Z", "2026-05-09T10:07:00Z", "2026-05-09T10:08:00Z"},
		{"0 9 * * *", "2026-05-09T08:59:59.999999999Z", "2026-05-08T09:00:00Z", "2026-05-09T09:00:00Z"},
		{"0 9 * * *", "2026-05-09T09:00:00Z", "2026-05-09T09:00:00Z", "2026-05-10T09:00:00Z"},
		// Ranges, steps, lists.
		{"*/5 * * * *", "2026-05-09T10:07:00Z", "2026-05-09T10:05:00Z", "2026-05-09T10:10:00Z"},
		{"*/25 * * * *", "2026-05-09T10:59:00Z", "2026-05-09T10:50:00Z", "2026-05-09T11:00:00Z"},
		{"10-20 * * * *", "2026-05-09T10:07:00Z", "2026-05-09T09:20:00Z", "2026-05-09T10:10:00Z"},
		{"10-20/4 * * * *", "2026-05-09T10:17:00Z", "2026-05-09T10:14:00Z", "2026-05-09T10:18:00Z"},
		{"10-20/4 * * * *", "2026-05-09T10:19:00Z", "2026-05-09T10:18:00Z", "2026-05-09T11:10:00Z"},
		{"5,35 */6 * * *", "2026-05-09T10:07:00Z", "2026-05-09T06:35:00Z", "2026-05-09T12:05:00Z"},
		{"0 1,13-15 * * *", "2026-05-09T12:00:00Z", "2026-05-09T01:00:00Z", "2026-05-09T13:00:00Z"},
		{"0-59/100 * * * *", "2026-05-09T10:07:00Z", "2026-05-09T10:00:00Z", "2026-05-09T11:00:00Z"},
		{"*/1 * * * *", "2026-05-09T10:07:30Z", "2026-05-09T10:07:00Z", "2026-05-09T10:08:00Z"},
		{"59 23 31 12 *", "2026-05-09T10:07:30Z", "2025-12-31T23:59:00Z", "2026-12-31T23:59:00Z"},
		// Month and day names, any case, alone, in ranges and lists.
		{"0 0 1 jan *", "2026-05-09T00:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"0 0 1 JUL,Dec *", "2026-05-09T00:00:00Z", "2025-12-01T00:00:00Z", "2026-07-01T00:00:00Z"},
		{"0 0 1 mar-may *", "2026-06-09T00:00:00Z", "2026-05-01T00:00:00Z", "2027-03-01T00:00:00Z"},
		{"0 0 1 feb-nov/3 *", "2026-06-09T00:00:00Z", "2026-05-01T00:00:00Z", "2026-08-01T00:00:00Z"},
		{"0 9 * * mon-fri", "2026-05-09T10:00:00Z", "2026-05-08T09:00:00Z", "2026-05-11T09:00:00Z"}, // Sat → Fri, Mon
		{"0 9 * * MON-Fri", "2026-05-11T08:00:00Z", "2026-05-08T09:00:00Z", "2026-05-11T09:00:00Z"},
		{"0 9 * * sat,SUN", "2026-05-11T08:00:00Z", "2026-05-10T09:00:00Z", "2026-05-16T09:00:00Z"},
		{"0 9 * * 1-5", "2026-05-09T10:00:00Z", "2026-05-08T09:00:00Z", "2026-05-11T09:00:00Z"},
		// 0 and 7 are Sunday, also at the end of a range and under a step.
		{"0 0 * * 7", "2026-05-09T00:00:00Z", "2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"},
		{"0 0 * * 0", "2026-05-09T00:00:00Z", "2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"},
		{"0 0 * * sun", "2026-05-09T00:00:00Z", "2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"},
		{"0 0 * * 5-7", "2026-05-07T00:00:00Z", "2026-05-03T00:00:00Z", "2026-05-08T00:00:00Z"}, // Thu: last Sun, next Fri
		{"0 0 * * fri-7", "2026-05-11T00:00:00Z", "2026-05-10T00:00:00Z", "2026-05-15T00:00:00Z"},
		{"0 0 * * */7", "2026-05-09T00:00:00Z", "2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"},
		{"0 0 * * 1-7/2", "2026-05-09T00:00:00Z", "2026-05-08T00:00:00Z", "2026-05-10T00:00:00Z"}, // Mon Wed Fri Sun
		// Day of month and day of week: OR when both are restricted (Vixie cron)...
		{"0 0 13 * 5", "2026-05-09T00:00:00Z", "2026-05-08T00:00:00Z", "2026-05-13T00:00:00Z"}, // Fri 8th; Wed 13th
		{"0 0 1,15 * mon", "2026-05-09T00:00:00Z", "2026-05-04T00:00:00Z", "2026-05-11T00:00:00Z"},
		// ...AND when either starts with "*", even "*/2" or "*/1"...
		{"0 0 */2 * 1", "2026-05-09T00:00:00Z", "2026-04-27T00:00:00Z", "2026-05-11T00:00:00Z"}, // odd-day Mondays
		{"0 0 1 * */1", "2026-05-09T00:00:00Z", "2026-05-01T00:00:00Z", "2026-06-01T00:00:00Z"},
		{"0 0 13 * */2", "2026-05-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-06-13T00:00:00Z"}, // 13th on Sun Tue Thu Sat
		// ...and "1,*" does not start with "*": OR, so every day.
		{"0 0 1,* * 1", "2026-05-09T10:00:00Z", "2026-05-09T00:00:00Z", "2026-05-10T00:00:00Z"},
		// Leap days and month ends.
		{"0 0 29 2 *", "2027-06-01T00:00:00Z", "2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2101-01-01T00:00:00Z", "2096-02-29T00:00:00Z", "2104-02-29T00:00:00Z"}, // 2100 is no leap year
		{"0 0 29 feb mon", "2026-05-09T00:00:00Z", "2026-02-23T00:00:00Z", "2027-02-01T00:00:00Z"},
		{"0 0 29 2 */7", "2026-05-09T00:00:00Z", "2004-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}, // Feb 29 that is a Sunday
		{"0 0 31 * *", "2026-05-09T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"},
		{"0 0 31 * *", "2026-07-01T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"},
		{"0 0 30 * *", "2026-03-01T00:00:00Z", "2026-01-30T00:00:00Z", "2026-03-30T00:00:00Z"}, // no Feb 30
		{"0 0 31 4,6,9,11,12 *", "2026-05-09T00:00:00Z", "2025-12-31T00:00:00Z", "2026-12-31T00:00:00Z"},
		{"0 12 28-31 * *", "2026-03-01T00:00:00Z", "2026-02-28T12:00:00Z", "2026-03-28T12:00:00Z"},
		// Whitespace and tabs between fields.
		{" 0\t9  *  * \t* ", "2026-05-09T10:00:00Z", "2026-05-09T09:00:00Z", "2026-05-10T09:00:00Z"},
		// Year ends.
		{"0 0 * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"},
		{"30 23 31 dec *", "2026-01-01T00:00:00Z", "2025-12-31T23:30:00Z", "2026-12-31T23:30:00Z"},
		{"0 0 1 1 *", "2025-12-31T23:59:59Z", "2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, "UTC")
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		now := mustTime(t, tc.now)
		if got, want := s.Prev(now), mustTime(t, tc.prev); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%q Prev(%s) = %s, want %s", tc.expr, tc.now, got, want)
		}
		if got, want := s.Next(now), mustTime(t, tc.next); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%q Next(%s) = %s, want %s", tc.expr, tc.now, got, want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "empty schedule: give 5 fields"},
		{"   \t ", "empty schedule"},
		{"@reboot", "@reboot has no tick"},
		{"@every 5m", "@every is not crontab(5)"},
		{"@every", "@every is not crontab(5)"},
		{"@fortnightly", `unknown descriptor "@fortnightly"`},
		// Debian's cron and cronie compare descriptors with strcmp: any other case is "bad
		// time specifier", and the whole crontab is ignored.
		{"@HOURLY", `descriptors are lower case only: cron refuses this one ("bad time specifier") and then ignores the whole crontab; write @hourly`},
		{"@Daily", "write @daily"},
		{"@MIDNIGHT", "bad time specifier"},
		{"@yEARLY", "write @yearly"},
		{"@REBOOT", "bad time specifier"},
		{"@Fortnightly", `unknown descriptor "@Fortnightly"`},
		{"@daily 0", "@daily takes nothing after it"},
		{"* * * * * *", "6 fields: cronlock takes the 5 fields"},
		{"0 0 * * * 2026", "6 fields"},
		{"0 9 * * * root", "6 fields"},
		{"* * * *", "4 fields"},
		{"garbage", "1 fields"},
		{"60 * * * *", `minute field "60": 60 is out of range: allowed are 0-59`},
		{"* 24 * * *", `hour field "24": 24 is out of range: allowed are 0-23`},
		{"* * 0 * *", `day-of-month field "0": 0 is out of range: allowed are 1-31`},
		{"* * 32 * *", "day-of-month field"},
		{"* * * 13 *", `month field "13": 13 is out of range: allowed are 1-12 or jan-dec`},
		{"* * * 0 *", "month field"},
		{"* * * * 8", `day-of-week field "8": 8 is out of range: allowed are 0-7 or sun-sat (0 and 7 are Sunday)`},
		{"* * * * monday", `day-of-week field "monday": monday is not a number or a three-letter name`},
		{"* * * january *", "month field"},
		{"* * * * ?", `? is not crontab(5): use *`},
		{"0 0 ? * 1", "? is not crontab(5)"},
		{"5/10 * * * *", `minute field "5/10": a step needs a range: write 5-59/10 or */10`},
		{"* * * * mon/2", `write 1-7/2 or */2`},
		{"5-3 * * * *", `minute field "5-3": the range runs backwards; write low-high, or a list such as 5-59,0-3`},
		{"* * * * fri-sun", `day-of-week field "fri-sun": the range runs backwards`},
		{"*-5 * * * *", `* stands alone or as */n`},
		{"** * * * *", `* stands alone`},
		{"*/0 * * * *", `the step after / must be a whole number of 1 or more`},
		{"1-5/0 * * * *", "the step after /"},
		{"*/ * * * *", "the step after /"},
		{"*/-1 * * * *", "the step after /"},
		{"*/+2 * * * *", "the step after /"},
		{"+5 * * * *", `+5 is not a number`},
		{"-5 * * * *", `a value is missing`},
		{"5- * * * *", `a value is missing`},
		{"1,,2 * * * *", `empty list item`},
		{"1, * * * *", `empty list item`},
		{"1-2-3 * * * *", `2-3 is not a number`},
		{"0x10 * * * *", "not a number"},
		{"99999999999999999999 * * * *", "out of range"},
		{"* * * * */99999999999999999999", "the step after /"},
		{"0 0 30 2 *", "day-of-month and month never meet"},
		{"0 0 31 4,6,9,11 *", "never meet"},
		{"0 0 30,31 feb *", "never meet"},
		{"0 0 */30 2 *", "never meet"}, // 1 and 31? no: */30 is 1 and 31; 1 exists
		{"TZ=Europe/Berlin 0 0 * * *", "a TZ= prefix does not set when cron fires"},
		{"CRON_TZ= 0 0 * * *", "CRON_TZ= names no zone"},
		{"CRON_TZ=Mars/Olympus 0 0 * * *", `CRON_TZ zone "Mars/Olympus": unknown time zone: use a tz database name such as Europe/Berlin`},
		{"CRON_TZ=Local 0 0 * * *", `CRON_TZ zone "Local": not a zone name`},
		{"CRON_TZ=../../etc/passwd 0 0 * * *", "unknown time zone"},
		{"CRON_TZ=Europe/Berlin", "empty schedule"},
		{"CRON_TZ=UTC CRON_TZ=UTC * * * * *", "6 fields"},
		{"\x00 * * * *", `minute field "\x00"`},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, "UTC")
		if tc.expr == "0 0 */30 2 *" { // a check that the never-meet rule is not too eager
			if err != nil {
				t.Errorf("Parse(%q): %v; Feb 1 matches", tc.expr, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Parse(%q) = %q, want an error containing %q", tc.expr, s, tc.want)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("Parse(%q) error %q, want it to contain %q", tc.expr, msg, tc.want)
		}
		if strings.ContainsAny(msg, "\n\r") {
			t.Errorf("Parse(%q) error %q is not one line", tc.expr, msg)
		}
	}
}

func TestParseZoneErrors(t *testing.T) {
	for _, tc := range []struct{ tz, want string }{
		{"Europe/Berln", `time zone "Europe/Berln" (--tz or CRONLOCK_TZ): unknown time zone`},
		{"europe/berlin", "case matters"},
		{"Local", `time zone "Local" (--tz or CRONLOCK_TZ): not a zone name`},
		{"/etc/localtime", "unknown time zone"},
	} {
		_, err := Parse("0 0 * * *", tc.tz)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse with tz %q: error %v, want it to contain %q", tc.tz, err, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct{ expr, tz, str, zone string }{
		{"0  9 * *\tMON-Fri", "UTC", "0 9 * * mon-fri", "UTC"},
		{"@daily", "Europe/Berlin", "@daily", "Europe/Berlin"},
		{"@midnight", "UTC", "@midnight", "UTC"},
		{"CRON_TZ=America/New_York 30 2 * * *", "Europe/Berlin", "30 2 * * *", "America/New_York"},
		{"cron_tz=Asia/Tokyo */5 * * * 7", "", "*/5 * * * 7", "Asia/Tokyo"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, tc.tz)
		if err != nil {
			t.Fatalf("Parse(%q, %q): %v", tc.expr, tc.tz, err)
		}
		if s.String() != tc.str || s.Zone() != tc.zone || s.Location().String() != tc.zone {
			t.Errorf("Parse(%q, %q): String %q Zone %q Location %q, want %q %q", tc.expr, tc.tz, s, s.Zone(), s.Location(), tc.str, tc.zone)
		}
		again, err := Parse(s.String(), s.Zone())
		if err != nil || !sameSchedule(again, s) {
			t.Errorf("Parse(%q) does not give the schedule back: %v", s.String(), err)
		}
	}
}

func TestWildcard(t *testing.T) {
	for expr, want := range map[string]bool{
		"* * * * *": true, "*/5 * * * *": true, "30 * * * *": true, "0 */2 * * *": true, "@hourly": true,
		"*/15 2 * * *": true, "30 2 * * *": false, "0-59 * * * *": true, "0-59 0-23 * * *": false,
		"@daily": false, "@midnight": false, "@weekly": false, "@monthly": false, "@yearly": false,
		"0 9 * * 1-5": false, "0,30 9 * * *": false,
	} {
		s, err := Parse(expr, "UTC")
		if err != nil {
			t.Fatal(err)
		}
		if s.Wildcard() != want {
			t.Errorf("%q Wildcard() = %v, want %v", expr, s.Wildcard(), want)
		}
	}
}
