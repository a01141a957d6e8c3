package local

// Fuzz targets for every parser of the lockrun package: keys, Redis URLs (and their
// redaction), lock values read from Redis, local lock records and lock file names.
// Without -fuzz they run their seeds (f.Add and testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzRedisURLPassword$' -fuzztime 60s ./lockrun/

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"cronlock/lockrun"
)

// FuzzLocalRecord: any bytes at the start of a lock file read as nil or as a record
// whose holder prints and encodes; a record cronlock writes reads back the same.
func FuzzLocalRecord(f *testing.F) {
	now := time.Date(2025, 6, 1, 7, 0, 0, 123456000, time.UTC)
	good, _ := json.Marshal(localRecord{V: 1, FencingToken: 9, Key: "billing", Node: "web-1", PID: 7,
		RunID: "r", Acquired: formatLocalTime(now), Renewed: formatLocalTime(now)})
	for _, s := range []string{string(good) + "\n", string(good), string(good) + "\ngarbage", "", "\n",
		"{", "{}\n", `{"v":2,"pid":-1}`, `{"acquired":"9999-12-31T23:59:59.999999Z"}`,
		`{"acquired":"0000-01-01T00:00:00.000000+23:59"}`, `{"acquired":"2025-06-01T07:00:00.000000-23:59"}`,
		`{"fencing_token":-1}`, `{"node":"\u001b]0;x\u0007"}`, strings.Repeat(" ", 8200) + "{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := fuzzFile(t)
		if err := unix.Ftruncate(fd, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Pwrite(fd, data, 0); err != nil {
			t.Fatal(err)
		}
		if r := readLocalRecord(fd); r != nil {
			h := r.holder()
			if h == nil || h.Node != r.Node || h.PID != r.PID || h.FencingToken != r.FencingToken {
				t.Fatalf("holder of %+v = %+v", r, h)
			}
			if _, err := json.Marshal(h); err != nil {
				t.Fatalf("holder of %q does not encode: %v", data, err)
			}
			_ = h.String()
			// Write it back as cronlock does (times in cronlock's own form) and read it again.
			r.Key = "k"
			r.Acquired, r.Renewed = formatLocalTime(h.Since), formatLocalTime(h.Renewed)
			if !utf8.ValidString(r.Node) || !utf8.ValidString(r.RunID) {
				return // JSON would turn invalid UTF-8 into U+FFFD: not a round trip
			}
			if err := writeLocalRecord(fd, r); err != nil {
				t.Fatal(err)
			}
			back := readLocalRecord(fd)
			if back == nil {
				b, _ := json.Marshal(r)
				if len(b) < 8192 {
					t.Fatalf("record %+v written, not read back", r)
				}
				return
			}
			if *back != *r {
				t.Fatalf("record %+v read back as %+v", r, back)
			}
		}
	})
}

// fuzzFile is one scratch file per fuzz worker, reused by every input.
var fuzzFD = -1

func fuzzFile(t *testing.T) int {
	if fuzzFD >= 0 {
		return fuzzFD
	}
	dir, err := os.MkdirTemp("", "cronlock-fuzz")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(filepath.Join(dir, "r.lock"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir) // the open descriptor keeps the file
	fuzzFD = fd
	return fd
}

// FuzzLocalFileName: every string names one plain file inside the lock folder (no "/",
// no NUL, not "." or "..", at most 255 bytes, ends in .lock); two different strings never
// share a name; a valid key whose name is not hashed decodes back to itself.
func FuzzLocalFileName(f *testing.F) {
	for _, s := range []string{"billing", "Ab_-9", "../../etc/x", "a/b", "a.b", "@:", ".", "..",
		"a%2Fb", "", "\x00", strings.Repeat("/", lockrun.MaxKeyLen), strings.Repeat("a", lockrun.MaxKeyLen),
		strings.Repeat("a/", lockrun.MaxKeyLen/2), strings.Repeat("ab/", 70), strings.Repeat("/", 80) + "="} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, key, other string) {
		name := localFileName(key)
		if len(name) > 255 || !strings.HasSuffix(name, ".lock") || strings.ContainsAny(name, "/\x00") ||
			name == "." || name == ".." {
			t.Fatalf("localFileName(%q) = %q", key, name)
		}
		if key != other && localFileName(other) == name {
			t.Fatalf("localFileName(%q) = localFileName(%q) = %q", key, other, name)
		}
		back, ok := localKeyFromName(name)
		hashed := strings.Contains(name, "=")
		switch {
		case lockrun.ValidKey(key) == nil && !hashed:
			if !ok || back != key {
				t.Fatalf("localKeyFromName(localFileName(%q) = %q) = %q, %v", key, name, back, ok)
			}
		case ok:
			t.Fatalf("localKeyFromName(%q) = %q from key %q", name, back, key)
		}
	})
}

// FuzzLocalKeyFromName: any directory entry name either is refused or decodes to a
// valid key whose file name is exactly that name (so List never reports a key twice or
// a key that Acquire would lock elsewhere).
func FuzzLocalKeyFromName(f *testing.F) {
	for _, s := range []string{"billing.lock", "a%2Fb.lock", "a%2fb.lock", "a%2F.lock", "%.lock", "%2.lock",
		"%zz.lock", "%+1.lock", "a/b.lock", "a.b.lock", ".lock", "billing", "x=0123.lock", "%00.lock",
		"%2E%2E%2F%2E%2E%2Fetc%2Fx.lock", "a%252Fb.lock", "%C3%A9.lock", "a.lock.lock"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		key, ok := localKeyFromName(name)
		if !ok {
			if key != "" {
				t.Fatalf("localKeyFromName(%q) = %q but not ok", name, key)
			}
			return
		}
		if err := lockrun.ValidKey(key); err != nil {
			t.Fatalf("localKeyFromName(%q) = invalid key %q: %v", name, key, err)
		}
		if localFileName(key) != name {
			t.Fatalf("localKeyFromName(%q) = %q, whose name is %q", name, key, localFileName(key))
		}
	})
}
