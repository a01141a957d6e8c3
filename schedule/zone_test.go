package schedule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// machineZone replaces /etc/localtime for one test.
func machineZone(t *testing.T, name string) {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	saved := localZone
	localZone = func() (*time.Location, string, error) { return loc, name, nil }
	t.Cleanup(func() { localZone = saved })
}

func TestZoneChoice(t *testing.T) {
	machineZone(t, "Asia/Tokyo") // +09:00, no DST
	now := mustTime(t, "2026-07-01T12:00:00Z")
	tests := []struct{ expr, tz, zone, prev string }{
		{"0 9 * * *", "", "Asia/Tokyo", "2026-07-01T00:00:00Z"},
		{"0 9 * * *", "Europe/Berlin", "Europe/Berlin", "2026-07-01T07:00:00Z"},
		{"0 9 * * *", "UTC", "UTC", "2026-07-01T09:00:00Z"},
		// A CRON_TZ= prefix wins over --tz and over the machine's zone.
		{"CRON_TZ=America/New_York 0 9 * * *", "Europe/Berlin", "America/New_York", "2026-06-30T13:00:00Z"},
		{"CRON_TZ=America/New_York 0 9 * * *", "", "America/New_York", "2026-06-30T13:00:00Z"},
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "", "Europe/Berlin", "2026-07-01T00:30:00Z"},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, tc.tz)
		if err != nil {
			t.Fatal(err)
		}
		if s.Zone() != tc.zone {
			t.Errorf("Parse(%q, %q).Zone() = %q, want %q", tc.expr, tc.tz, s.Zone(), tc.zone)
		}
		if got := s.Prev(now); !got.Equal(mustTime(t, tc.prev)) {
			t.Errorf("Parse(%q, %q).Prev = %s, want %s", tc.expr, tc.tz, got, tc.prev)
		}
	}
}

// TestTZIgnored: a crontab's TZ= line reaches cronlock as $TZ, and must not move the
// tick, since cron fires by /etc/localtime. time.Local follows $TZ; Parse must not.
func TestTZIgnored(t *testing.T) {
	now := mustTime(t, "2026-07-01T12:00:00Z")

	machineZone(t, "Europe/Berlin")
	t.Setenv("TZ", "America/New_York")
	s, err := Parse("0 9 * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Zone() != "Europe/Berlin" || !s.Prev(now).Equal(mustTime(t, "2026-07-01T07:00:00Z")) {
		t.Errorf("with TZ=America/New_York and a Berlin machine: zone %s, tick %s; want Europe/Berlin, 07:00Z", s.Zone(), s.Prev(now))
	}
}

// TestTZIgnoredRealSeam runs the real /etc/localtime reader with $TZ set to a zone the
// machine is not in.
func TestTZIgnoredRealSeam(t *testing.T) {
	want, wantName, err := readLocaltime("/etc/localtime")
	if err != nil {
		t.Skipf("this machine's /etc/localtime: %v", err)
	}
	tz := "Pacific/Kiritimati" // +14: no machine here runs in it, so $TZ would show
	if strings.Contains(wantName, "Kiritimati") {
		tz = "Pacific/Pago_Pago"
	}
	t.Setenv("TZ", tz)
	s, err := Parse("0 9 * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	now := mustTime(t, "2026-07-01T12:00:00Z")
	wantTick := time.Date(2026, 7, 1, 9, 0, 0, 0, want)
	if wantTick.After(now) {
		wantTick = wantTick.AddDate(0, 0, -1)
	}
	if s.Zone() != wantName || !s.Prev(now).Equal(wantTick) {
		t.Errorf("with TZ=%s: zone %s, tick %s; want /etc/localtime's %s, %s", tz, s.Zone(), s.Prev(now), wantName, wantTick.UTC())
	}
}

func TestReadLocaltime(t *testing.T) {
	berlin, err := os.ReadFile("/usr/share/zoneinfo/Europe/Berlin")
	if err != nil {
		t.Skipf("no tz database here: %v", err)
	}
	dir := t.TempDir()
	zoneFile := filepath.Join(dir, "usr/share/zoneinfo/Europe/Berlin")
	if err := os.MkdirAll(filepath.Dir(zoneFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zoneFile, berlin, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "localtime-link")
	if err := os.Symlink("usr/share/zoneinfo/Europe/Berlin", link); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "localtime-copy")
	if err := os.WriteFile(copied, berlin, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "localtime-junk")
	if err := os.WriteFile(junk, []byte("not a zone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	summer := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

	for _, tc := range []struct{ path, name, offset, err string }{
		{link, "Europe/Berlin", "+0200", ""},
		{copied, copied, "+0200", ""},
		{filepath.Join(dir, "missing"), "UTC", "+0000", ""}, // as glibc: no file, UTC
		{junk, "", "", "is not a zone file"},
		{dir, "", "", "read the machine's zone"}, // a directory
	} {
		loc, name, err := readLocaltime(tc.path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--tz or CRONLOCK_TZ") {
				t.Errorf("readLocaltime(%s): error %v, want one containing %q and naming --tz", tc.path, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("readLocaltime(%s): %v", tc.path, err)
			continue
		}
		if name != tc.name || summer.In(loc).Format("-0700") != tc.offset {
			t.Errorf("readLocaltime(%s) = %s at %s, want %s at %s", tc.path, name, summer.In(loc).Format("-0700"), tc.name, tc.offset)
		}
	}
}
