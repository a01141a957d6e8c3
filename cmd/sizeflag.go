package cmd

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeValue is a byte count flag: 65536, 64KiB, 64K, 1MiB, 0; at most limit (0 =
// maxCapture) and, when positive is set, at least 1.
type sizeValue struct {
	n        *int64
	limit    int64
	positive bool
}

func (v sizeValue) String() string { return formatSize(*v.n) }
func (v sizeValue) Type() string   { return "size" }
func (v sizeValue) Set(s string) error {
	limit := v.limit
	if limit == 0 {
		limit = maxCapture
	}
	n, err := parseSizeUpTo(s, limit)
	if err != nil {
		return err
	}
	if n == 0 && v.positive {
		return fmt.Errorf("%q keeps nothing; give a size of at least 1 byte, e.g. 1GiB", s)
	}
	*v.n = n
	return nil
}

// maxCapture bounds --capture: the tail lives in memory and in one history row.
const maxCapture = 64 << 20

// sizeUnits are the suffixes parseSize takes, tried in this order (longest first, so that
// 64KiB is not read as 64Ki bytes); K, KB and KiB all mean 1024.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"k", 1 << 10}, {"B", 1},
}

// parseSize reads a --capture value: a whole number of bytes with an optional unit,
// from 0 to maxCapture.
func parseSize(s string) (int64, error) {
	return parseSizeUpTo(s, maxCapture)
}

// parseSizeUpTo is parseSize with another upper limit.
func parseSizeUpTo(s string, limit int64) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
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
		return 0, fmt.Errorf("%q is more than the %s limit", s, formatSize(limit))
	}
	return n * mult, nil
}

// formatSize writes whole MiB and KiB with their unit, anything else in bytes; parseSize
// reads it back.
func formatSize(n int64) string {
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

// exitCodesValue is a comma-separated list of exit codes 1–255 (--retry-on).
type exitCodesValue struct{ codes *[]int }

func (v exitCodesValue) Type() string { return "codes" }
func (v exitCodesValue) String() string {
	s := make([]string, len(*v.codes))
	for i, c := range *v.codes {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
func (v exitCodesValue) Set(s string) error {
	var codes []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		c, err := strconv.Atoi(part)
		if err != nil || c < 1 || c > 255 {
			return fmt.Errorf("%q is not an exit code from 1 to 255 (0 is success, never tried again)", part)
		}
		codes = append(codes, c)
	}
	*v.codes = codes
	return nil
}
