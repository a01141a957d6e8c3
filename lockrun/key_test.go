package lockrun

import (
	"strings"
	"testing"
)

func TestValidKeyMessages(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"naïve", `the key has 'ï' (U+00EF) at position 3; use only A-Z a-z 0-9 . _ - : / @`},
		{"nai\u0308ve", `the key has '̈' (U+0308) at position 4;`},
		{"東京", `the key has '東' (U+6771) at position 1;`},
		{"a b", `the key has ' ' at position 2;`},
		{"ab!", `the key has '!' at position 3;`},
		{"a\x1bb", `the key has '\x1b' at position 2;`},
		{"é\xffx", `the key has 'é' (U+00E9) at position 1;`},
		{"ab\xff", `the key has the byte 0xff (not UTF-8) at position 3;`},
		{"a\u00a0b", `the key has '\u00a0' (U+00A0) at position 2;`},
		{strings.Repeat("é", 150), `the key has 'é' (U+00E9) at position 1;`},
		{strings.Repeat("k", MaxKeyLen+1), "the key is 201 characters long; the limit is 200"},
		{"", "the key is empty"},
	} {
		err := ValidKey(c.key)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidKey(%q) = %v; want %q", c.key, err, c.want)
		}
	}
	for _, ok := range []string{"daily-billing", "team/report:daily@host_1.0", strings.Repeat("k", MaxKeyLen)} {
		if err := ValidKey(ok); err != nil {
			t.Errorf("ValidKey(%q) = %v", ok, err)
		}
	}
}
