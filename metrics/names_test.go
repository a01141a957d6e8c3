package metrics

import (
	"strings"
	"testing"
)

// TestMetricsFileNameEncoding checks the name encoding itself: distinct keys never share
// a file, and names stay within NAME_MAX.
func TestMetricsFileNameEncoding(t *testing.T) {
	keys := []string{"a/b", "a%2Fb", "a:b", "a.b", "a_b", "a-b", "ab", strings.Repeat("x", 200),
		strings.Repeat("/", 199) + "a", strings.Repeat("/", 199) + "b", strings.Repeat("x", 170) + "/"}
	seen := map[string]string{}
	for _, k := range keys {
		n := fileName(k)
		if other, dup := seen[n]; dup {
			t.Errorf("keys %q and %q share the file %s", k, other, n)
		}
		seen[n] = k
		if len(n)+len(".lock") > 255 || strings.ContainsAny(n, "/\x00") || !strings.HasSuffix(n, ".prom") {
			t.Errorf("key %q: file name %q", k, n)
		}
	}
}

// TestMetricsFileNamePinned pins metrics file names byte for byte, so that an upgrade
// keeps writing (and carrying counters over from) the same file for a key. It covers keys
// kept whole up to 200 encoded bytes, hashed names past that, and every position of the
// 167-byte cut relative to a %XX triple.
func TestMetricsFileNamePinned(t *testing.T) {
	r := strings.Repeat
	for _, tt := range []struct{ key, name string }{
		{"", "cronlock_.prom"},
		{"billing", "cronlock_billing.prom"},
		{"a.b_c-d", "cronlock_a.b_c-d.prom"},
		{"team/report:daily", "cronlock_team%2Freport%3Adaily.prom"},
		{"../up@x", "cronlock_..%2Fup%40x.prom"},
		{".", "cronlock_..prom"},
		{"a=b", "cronlock_a%3Db.prom"},
		{"\x00\xff", "cronlock_%00%FF.prom"},
		{r("a", 200), "cronlock_" + r("a", 200) + ".prom"},                                  // 200 encoded bytes: whole
		{r("a", 201), "cronlock_" + r("a", 167) + "=a92efd82109373e58f9a2056dee01e80.prom"}, // 201: hashed
		{r("/", 66) + "ab", "cronlock_" + r("%2F", 66) + "ab.prom"},                         // 200 with escapes: whole
		{r("/", 66) + "abc", "cronlock_" + r("%2F", 55) + "=483422476a86ad5b3dcfdba3831ec8ee.prom"},
		{r("/", 66) + ".b", "cronlock_" + r("%2F", 66) + ".b.prom"},
		{r("/", 200), "cronlock_" + r("%2F", 55) + "=a9edaa36c97b0b8200699dcc7a4f4e94.prom"},          // cut 167 splits "%2F" after "%2"
		{"a" + r("/", 199), "cronlock_a" + r("%2F", 55) + "=f6c4f0bc2ffbd92f77ddaa09993b012d.prom"},   // cut 167 splits after "%"
		{"ab" + r("/", 198), "cronlock_ab" + r("%2F", 55) + "=fa453b278f3a8633b24058e54204da46.prom"}, // cut 167 between triples
		{r("x", 170) + "/", "cronlock_" + r("x", 170) + "%2F.prom"},
	} {
		if got := fileName(tt.key); got != tt.name {
			t.Errorf("fileName(%q) = %q, want %q", tt.key, got, tt.name)
		}
	}
}
