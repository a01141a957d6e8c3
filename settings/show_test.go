package settings

import (
	"bytes"
	"strings"
	"testing"
)

// TestMaskPingURL: the ping URL's secret parts are hidden, {key} and ?create=1 kept.
func TestMaskPingURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hc-ping.com/0b8e4c1a-uuid":                  "https://hc-ping.com/xxxxx",
		"https://hc-ping.com/PINGKEY/{key}?create=1":         "https://hc-ping.com/xxxxx/{key}?create=1",
		"https://user:pw@hc.example:8000/ping/PINGKEY/{key}": "https://xxxxx@hc.example:8000/xxxxx/xxxxx/{key}",
		"https://hc.example/PINGKEY/{key}?token=s3cret":      "https://hc.example/xxxxx/{key}?xxxxx",
		"not a url with PINGKEY":                             "xxxxx",
		"https://hc.example/%zz":                             "xxxxx",
	} {
		if got := MaskPingURL(in); got != want {
			t.Errorf("MaskPingURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWrite: the origin first, then NAME=value; JSON names the file and line.
func TestWrite(t *testing.T) {
	es := []Entry{{Name: "CRONLOCK_TTL", Value: "1m0s"}, {Name: "CRONLOCK_BACKEND", Value: "redis", Origin: Origin{Kind: File, Path: "/etc/c.conf", Line: 2}},
		{Name: "CRONLOCK_PREFIX", Value: "p:", Origin: Origin{Kind: Flag, Flag: "prefix"}}}
	var b bytes.Buffer
	Write(&b, es, false)
	want := "default             CRONLOCK_TTL=1m0s\nfile:/etc/c.conf:2  CRONLOCK_BACKEND=redis\nflag:--prefix       CRONLOCK_PREFIX=p:\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	Write(&b, es, true)
	if lines := strings.Split(b.String(), "\n"); len(lines) != 4 || lines[0] != `{"name":"CRONLOCK_TTL","value":"1m0s","origin":"default"}` ||
		lines[1] != `{"name":"CRONLOCK_BACKEND","value":"redis","origin":"file","file":"/etc/c.conf","line":2}` ||
		lines[2] != `{"name":"CRONLOCK_PREFIX","value":"p:","origin":"flag","flag":"--prefix"}` {
		t.Errorf("json:\n%s", b.String())
	}
}
