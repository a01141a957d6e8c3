// Package sizes reads and writes the byte counts people give cronlock (--capture,
// --output-max): a whole number of bytes with an optional binary unit, 65536, 64KiB,
// 64K, 1MiB. It is pure, like package durations: the upper limit is the caller's, and
// so are the flag the value belongs to and the exit code of a bad one.
package sizes

import (
	"fmt"
	"strconv"
	"strings"
)

// units are the suffixes Parse takes, tried in this order (longest first, so that 64KiB
// is not read as 64Ki bytes); K, KB and KiB all mean 1024.
var units = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"k", 1 << 10}, {"B", 1},
}

// Parse reads a size from 0 to limit bytes. Its errors quote s and say how to write a
// size, or what the limit is (as Format writes it).
func Parse(s string, limit int64) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size; write it like 0, 65536, 64KiB or 1MiB", s)
	}
	if n > limit/mult {
		return 0, fmt.Errorf("%q is more than the %s limit", s, Format(limit))
	}
	return n * mult, nil
}

// Format writes whole GiB, MiB and KiB with their unit, anything else in bytes; Parse
// reads it back.
func Format(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n != 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}
