package sizes

import (
	"strings"
	"testing"
)

// Table tests of Parse and Format; FuzzParse (fuzz_test.go) adds any input at all.

// limit is the one --capture has.
const limit = 64 << 20

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"65536", 65536, ""},
		{"64KiB", 64 << 10, ""},
		{"64KB", 64 << 10, ""},
		{"64K", 64 << 10, ""},
		{"64k", 64 << 10, ""},
		{"1MiB", 1 << 20, ""},
		{"1MB", 1 << 20, ""},
		{"1M", 1 << 20, ""},
		{"10B", 10, ""},
		{" 8 KiB ", 8 << 10, ""},
		{"64MiB", limit, ""},
		{"67108864", limit, ""},
		{"67108865", 0, `"67108865" is more than the 64MiB limit`},
		{"65MiB", 0, "more than the 64MiB limit"},
		{"1GiB", 0, "more than the 64MiB limit"},
		{"lots", 0, `"lots" is not a size; write it like 0, 65536, 64KiB or 1MiB`},
		{"", 0, "not a size"},
		{"KiB", 0, "not a size"},
		{"-1", 0, "not a size"},
		{"1.5K", 0, "not a size"},
		{"64kib", 0, "not a size"},
		{"0x10", 0, "not a size"},
	} {
		got, err := Parse(c.in, limit)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Parse(%q) = %d, %v; want an error saying %q", c.in, got, err, c.err)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 1000: "1000", 1 << 10: "1KiB", 64 << 10: "64KiB",
		1536: "1536", 1 << 20: "1MiB", 64 << 20: "64MiB", 3 << 19: "1536KiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
