package cmd

import (
	"fmt"
	"strconv"
	"strings"

	"cronlock/sizes"
)

// sizeValue is a byte count flag: 65536, 64KiB, 64K, 1MiB, 0; at most limit (0 =
// maxCapture) and, when positive is set, at least 1.
type sizeValue struct {
	n        *int64
	limit    int64
	positive bool
}

func (v sizeValue) String() string { return sizes.Format(*v.n) }
func (v sizeValue) Type() string   { return "size" }
func (v sizeValue) Set(s string) error {
	limit := v.limit
	if limit == 0 {
		limit = maxCapture
	}
	n, err := sizes.Parse(s, limit)
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
