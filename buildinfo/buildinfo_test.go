package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestInfo: a stamped release shows its tag; a plain go build shows the toolchain's
// revision and whether the tree was modified instead of a bare "devel".
func TestInfo(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	clean := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}
	goVer := runtime.Version()
	for _, c := range []struct {
		version, commit string
		etcd            bool
		settings        []debug.BuildSetting
		short, long     string
	}{
		{"v0.3.1", "fedcba9876543210", false, rev, "v0.3.1",
			"cronlock v0.3.1 (commit fedcba987654, " + goVer + ", linux/amd64, etcd backend: no)"},
		{"v0.3.1", "", true, clean, "v0.3.1",
			"cronlock v0.3.1 (commit 0123456789ab, " + goVer + ", linux/amd64, etcd backend: yes)"},
		{"", "", false, rev, "devel (0123456789ab, modified)",
			"cronlock devel (commit 0123456789ab+modified, " + goVer + ", linux/amd64, etcd backend: no)"},
		{"", "", false, clean, "devel (0123456789ab)",
			"cronlock devel (commit 0123456789ab, " + goVer + ", linux/amd64, etcd backend: no)"},
		{"", "", false, nil, "devel",
			"cronlock devel (commit unknown, " + goVer + ", linux/amd64, etcd backend: no)"},
	} {
		in := FromSettings(c.version, c.commit, c.etcd, c.settings)
		in.Platform = "linux/amd64"
		if got := in.Short(); got != c.short {
			t.Errorf("%+v: Short() = %q; want %q", c, got, c.short)
		}
		if got := in.String(); got != c.long {
			t.Errorf("%+v: String() = %q; want %q", c, got, c.long)
		}
		if strings.Contains(in.String(), "\n") {
			t.Errorf("String() %q is more than one line", in.String())
		}
	}
}
