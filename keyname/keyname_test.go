package keyname

import (
	"strings"
	"testing"
)

// The two schemes cronlock uses, as lockrun and metrics declare them.
var (
	lockFiles    = Scheme{Suffix: ".lock", Plain: "_-", MaxLen: 255 - len(".lock"), HashedCut: 200}
	metricsFiles = Scheme{Prefix: "cronlock_", Suffix: ".prom", Plain: "_.-", MaxLen: 200, HashedCut: 200 - HashLen}
)

// nameTests are names computed by cronlock's encoders before they became this package:
// lock is the local lock file, prom the metrics file. Every name must stay byte for byte
// the same, or an upgrade would lock, and count into, another file than the running
// cronlock of the same key.
var nameTests = []struct{ key, lock, prom string }{
	{"", ".lock", "cronlock_.prom"},
	{"billing", "billing.lock", "cronlock_billing.prom"},
	{"Ab_-9", "Ab_-9.lock", "cronlock_Ab_-9.prom"},
	{"a.b_c-d", "a%2Eb_c-d.lock", "cronlock_a.b_c-d.prom"},
	{"team/report:daily", "team%2Freport%3Adaily.lock", "cronlock_team%2Freport%3Adaily.prom"},
	{"../up@x", "%2E%2E%2Fup%40x.lock", "cronlock_..%2Fup%40x.prom"},
	{"a/b", "a%2Fb.lock", "cronlock_a%2Fb.prom"},
	{"a.b", "a%2Eb.lock", "cronlock_a.b.prom"},
	{"@:", "%40%3A.lock", "cronlock_%40%3A.prom"},
	{".", "%2E.lock", "cronlock_..prom"},
	{"..", "%2E%2E.lock", "cronlock_...prom"},
	{"a%2Fb", "a%252Fb.lock", "cronlock_a%252Fb.prom"},
	{"a=b", "a%3Db.lock", "cronlock_a%3Db.prom"},
	{"\x00\xff", "%00%FF.lock", "cronlock_%00%FF.prom"},

	// 200 "/" triple to 600 encoded bytes; the cut (200 for lock files, 167 for metrics
	// files) falls after the "%2" of a triple, after its "%", and between two triples.
	{r("/", 200),
		r("%2F", 66) + "=a9edaa36c97b0b8200699dcc7a4f4e94.lock",
		"cronlock_" + r("%2F", 55) + "=a9edaa36c97b0b8200699dcc7a4f4e94.prom"},
	{"a" + r("/", 199),
		"a" + r("%2F", 66) + "=f6c4f0bc2ffbd92f77ddaa09993b012d.lock",
		"cronlock_a" + r("%2F", 55) + "=f6c4f0bc2ffbd92f77ddaa09993b012d.prom"},
	{"ab" + r("/", 198),
		"ab" + r("%2F", 66) + "=fa453b278f3a8633b24058e54204da46.lock",
		"cronlock_ab" + r("%2F", 55) + "=fa453b278f3a8633b24058e54204da46.prom"},

	// Metrics files: 200 encoded bytes are whole, 201 hashed.
	{r("a", 200), r("a", 200) + ".lock", "cronlock_" + r("a", 200) + ".prom"},
	{r("a", 201), r("a", 201) + ".lock", "cronlock_" + r("a", 167) + "=a92efd82109373e58f9a2056dee01e80.prom"},
	{r("/", 66) + "ab", r("%2F", 66) + "ab.lock", "cronlock_" + r("%2F", 66) + "ab.prom"},
	{r("/", 66) + "abc", r("%2F", 66) + "abc.lock", "cronlock_" + r("%2F", 55) + "=483422476a86ad5b3dcfdba3831ec8ee.prom"},
	{r("/", 66) + ".b", r("%2F", 66) + "%2Eb.lock", "cronlock_" + r("%2F", 66) + ".b.prom"},
	{r("x", 170) + "/", r("x", 170) + "%2F.lock", "cronlock_" + r("x", 170) + "%2F.prom"},

	// Lock files: 250 encoded bytes (255 with ".lock") are whole, 251 hashed.
	{r("a", 250), r("a", 250) + ".lock", "cronlock_" + r("a", 167) + "=3f3e35e0a775d9b1d5ec2eccca06381c.prom"},
	{r("a", 251), r("a", 200) + "=772f911dd9d6692897188d0b03f718fb.lock", "cronlock_" + r("a", 167) + "=772f911dd9d6692897188d0b03f718fb.prom"},
	{r("/", 83) + "a", r("%2F", 83) + "a.lock", "cronlock_" + r("%2F", 55) + "=b0a6e19de75aec3a3326ca174d411620.prom"},
	{r("/", 83) + "ab", r("%2F", 66) + "=985156bd9f58ee835b23adeb5b613843.lock", "cronlock_" + r("%2F", 55) + "=985156bd9f58ee835b23adeb5b613843.prom"},
	{r(".", 83) + "a", r("%2E", 83) + "a.lock", "cronlock_" + r(".", 83) + "a.prom"},
}

var r = strings.Repeat

func TestEncodePinned(t *testing.T) {
	for _, tt := range nameTests {
		if got := lockFiles.Encode(tt.key); got != tt.lock {
			t.Errorf("lock file of %q = %q, want %q", tt.key, got, tt.lock)
		}
		if got := metricsFiles.Encode(tt.key); got != tt.prom {
			t.Errorf("metrics file of %q = %q, want %q", tt.key, got, tt.prom)
		}
	}
}

// TestDecode: a whole name decodes to its key, a hashed one does not decode, nor does
// any name Encode would not write.
func TestDecode(t *testing.T) {
	for _, tt := range nameTests {
		for _, c := range []struct {
			s    Scheme
			name string
		}{{lockFiles, tt.lock}, {metricsFiles, tt.prom}} {
			key, ok := c.s.Decode(c.name)
			if hashed := strings.Contains(c.name, "="); ok == hashed || ok && key != tt.key {
				t.Errorf("Decode(%q) = %q, %v; want %q, %v", c.name, key, ok, tt.key, !hashed)
			}
		}
	}
	for _, name := range []string{
		"a%2fb.lock", // lowercase hex
		"a%2Eb",      // no suffix
		"a.b.lock",   // "." is escaped in lock files
		"%61.lock",   // "a" is not
		"%.lock", "%2.lock", "a%.lock", "%zz.lock", "%+1.lock", "%-1.lock",
		"x=0123.lock", "a%3D.lock.lock",
		r("a", 251) + ".lock", // too long to be whole
	} {
		if key, ok := lockFiles.Decode(name); ok || key != "" {
			t.Errorf("lock files: Decode(%q) = %q, %v; want a refusal", name, key, ok)
		}
	}
	for _, name := range []string{"billing.prom", "cronlock_billing", "cronlock_a%2Eb.prom", "xcronlock_a.prom", "cronlock.prom"} {
		if key, ok := metricsFiles.Decode(name); ok || key != "" {
			t.Errorf("metrics files: Decode(%q) = %q, %v; want a refusal", name, key, ok)
		}
	}
}

// TestDistinctAndShort: distinct keys never share a name, and every name stays within
// its scheme's length.
func TestDistinctAndShort(t *testing.T) {
	keys := []string{"a/b", "a%2Fb", "a:b", "a.b", "a_b", "a-b", "ab", "a=b", r("x", 200), r("x", 201),
		r("/", 199) + "a", r("/", 199) + "b", r("x", 170) + "/", r("/", 66) + "ab", r("/", 66) + "abc"}
	for _, s := range []Scheme{lockFiles, metricsFiles} {
		seen := map[string]string{}
		for _, k := range keys {
			n := s.Encode(k)
			if other, dup := seen[n]; dup {
				t.Errorf("keys %q and %q share the name %s", k, other, n)
			}
			seen[n] = k
			if len(n) > len(s.Prefix)+s.MaxLen+len(s.Suffix) || strings.ContainsAny(n, "/\x00") {
				t.Errorf("key %q: name %q (%d bytes)", k, n, len(n))
			}
		}
	}
	for _, s := range []Scheme{lockFiles, metricsFiles} {
		if strings.ContainsAny(s.Plain, "%=/\x00") || s.HashedCut+HashLen > s.MaxLen {
			t.Errorf("scheme %+v breaks the rules of its fields", s)
		}
	}
}
