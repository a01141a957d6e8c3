package schedule

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// localZone returns the zone cron reads wall-clock times in, and its name. It is a
// variable so that tests can stand in for /etc/localtime.
var localZone = func() (*time.Location, string, error) {
	return readLocaltime("/etc/localtime")
}

// readLocaltime loads the zone file at path. time.Local is not used because it follows
// $TZ, which the cron daemon does not (see the package doc).
func readLocaltime(path string) (*time.Location, string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Without /etc/localtime, glibc (and so cron) reads wall-clock times in UTC.
		return time.UTC, "UTC", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the machine's zone: %w; give the zone with --tz or CRONLOCK_TZ", err)
	}
	name := path
	if target, err := os.Readlink(path); err == nil {
		if _, zone, ok := strings.Cut(target, "zoneinfo/"); ok && zone != "" {
			name = zone
		}
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not a zone file (%v): fix it, or give the zone with --tz or CRONLOCK_TZ", path, err)
	}
	return loc, name, nil
}

// loadZone loads a zone by its tz database name.
func loadZone(name string) (*time.Location, error) {
	// time.LoadLocation("Local") is time.Local, which follows $TZ.
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("not a zone name: leave the zone out to use the machine's, or name one such as Europe/Berlin or UTC")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone: use a tz database name such as Europe/Berlin or UTC (as in /usr/share/zoneinfo; case matters)")
	}
	return loc, nil
}
