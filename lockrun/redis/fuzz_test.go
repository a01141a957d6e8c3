package redis

// Fuzz targets for the parsers of this package: keys in Redis key names, and lock values
// read from Redis (the URL's are package conn's). Without -fuzz they run their seeds
// (f.Add and testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzParseHolder$' -fuzztime 60s ./lockrun/redis/

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"cronlock/lockrun"
)

// FuzzKeyName: every key ValidKey accepts makes exactly one Redis hash tag, matches no
// SCAN MATCH glob, and reads back from its lock key's name.
func FuzzKeyName(f *testing.F) {
	for _, s := range []string{"billing", "a", "daily/billing@host:1.0_x-y", "{tag}", "*", "a?b",
		strings.Repeat("/", lockrun.MaxKeyLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if lockrun.ValidKey(key) != nil {
			return
		}
		l := &Locker{prefix: "cronlock:"}
		lk := l.lockKey(key)
		if strings.Count(lk, "{") != 1 || strings.Count(lk, "}") != 1 || strings.ContainsAny(lk, "*?[]\\") {
			t.Fatalf("lock key %q of %q breaks the hash tag or SCAN MATCH", lk, key)
		}
		if back, ok := l.keyName(lk, "lock"); !ok || back != key {
			t.Fatalf("keyName(%q) = %q, %v; want %q", lk, back, ok, key)
		}
	})
}

// FuzzParseHolder: any lock value (and any PTTL) gives a non-nil Holder that prints,
// whose times encode as JSON (status --json), and a value cronlock wrote reads back.
func FuzzParseHolder(f *testing.F) {
	good, _ := json.Marshal(lockrun.HolderValue{Token: "t", Fence: "42", Node: "web-1", PID: 7, RunID: "r",
		SinceMS: "1748761200000", AcquiredUS: "1748761200000000", RenewedUS: "1748761200000000", TTLMS: 60000})
	for _, s := range []string{string(good), "", "x", "null", "[]", "{}", `{"pid":"7"}`,
		`{"pid":1e99}`, `{"fence":"18446744073709551615"}`, `{"fence":"18446744073709551616"}`,
		`{"since_ms":"-9223372036854775808"}`, `{"since_ms":"9223372036854775807"}`,
		`{"since_ms":"253402300800000"}`, `{"renewed_us":"-62135596800000001"}`,
		`{"node":"\u001b[2J\u0007","run_id":"\u202e"}`, `{"node":"a"}{"node":"b"}`} {
		f.Add(s, int64(1000))
	}
	f.Add(string(good), int64(-2))
	f.Add(string(good), int64(-1))
	f.Add(string(good), int64(1<<62))
	f.Fuzz(func(t *testing.T, value string, pttl int64) {
		h := parseHolder(value, pttl)
		if h == nil {
			t.Fatal("parseHolder returned nil")
		}
		if h.TTLLeft < 0 || (pttl <= 0 && h.TTLLeft != 0) {
			t.Fatalf("parseHolder(_, %d): TTLLeft %v", pttl, h.TTLLeft)
		}
		_ = h.String()
		_ = (&lockrun.HeldError{Key: "k", Holder: h}).Error()
		if _, err := json.Marshal(h); err != nil {
			t.Fatalf("parseHolder(%q): holder does not encode: %v", value, err)
		}
		if _, err := json.Marshal(h.Since.UTC()); err != nil {
			t.Fatalf("parseHolder(%q): since does not encode: %v", value, err)
		}
		var v lockrun.HolderValue
		if json.Unmarshal([]byte(value), &v) != nil {
			if h.Node == "" || h.PID != 0 || h.FencingToken != 0 {
				t.Fatalf("parseHolder(%q) of a foreign value = %+v", value, h)
			}
			return
		}
		if h.Node != v.Node || h.PID != v.PID || h.RunID != v.RunID {
			t.Fatalf("parseHolder(%q) = %+v", value, h)
		}
		if n, err := strconv.ParseUint(v.Fence, 10, 64); err == nil && n != h.FencingToken {
			t.Fatalf("parseHolder(%q): fencing token %d, want %d", value, h.FencingToken, n)
		}
		if ms, err := strconv.ParseInt(v.SinceMS, 10, 64); err == nil && !h.Since.IsZero() && h.Since.UnixMilli() != ms {
			t.Fatalf("parseHolder(%q): since %v, want %d ms", value, h.Since, ms)
		}
	})
}
