package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tests of `cronlock report` through the built binary; the page itself is tested in a
// real Chromium by package report.

// TestReportBadInput: a missing --html, a bad --since and an unwritable FILE each get
// one line and exit 125, and leave no file behind.
func TestReportBadInput(t *testing.T) {
	c := newCLI(t, "")
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "--html FILE is required"},
		{[]string{"report", "--html", filepath.Join(dir, "x.html"), "--since", "yesterdayish"}, "--since"},
		{[]string{"report", "--html", filepath.Join(dir, "no", "such", "x.html")}, "give --html a file in a folder you can write"},
		{[]string{"report", "--html", filepath.Join(dir, "x.html"), "--key", ""}, "--key"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != 125 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 125 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
	if os.Geteuid() != 0 { // root writes anywhere
		code, _, errs := c.run("report", "--html", filepath.Join(ro, "x.html"))
		if code != 125 || !strings.Contains(errs, "permission denied") {
			t.Errorf("a folder it may not write: exit %d, %q", code, errs)
		}
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("files left behind: %v", es)
	}
}

// TestReportPages: the local history's page (--fleet on the local backend says once that
// it draws the history) and the fleet's page from real Redis, each written 0600 with a
// bar per run by status.
func TestReportPages(t *testing.T) {
	local := newCLI(t, "")
	local.env = append(local.env, "CRONLOCK_BACKEND=local")
	for _, job := range []string{"true", "false"} {
		local.run("run", "--key", "nightly", "--", job)
	}
	page := filepath.Join(local.dir, "local.html")
	code, _, errs := local.run("report", "--html", page, "--fleet")
	if code != 0 || strings.Count(errs, "no fleet's record") != 1 {
		t.Fatalf("report --fleet on the local backend: exit %d, stderr %q", code, errs)
	}
	checkPage(t, page, "From the history ", map[string]int{`"r s-succeeded" data-i`: 1, `"r s-failed" data-i`: 1})

	hosts := newFleet(t, "redis", "web-1", "web-2")
	hosts[0].run("run", "--key", "billing", "--", "true")
	hosts[1].run("run", "--key", "billing", "--", "sh", "-c", "exit 3")
	page = filepath.Join(hosts[0].dir, "fleet.html")
	os.WriteFile(page, []byte("an older page"), 0o644) // replaced whole, and private
	code, _, errs = hosts[0].run("report", "--html", page, "--fleet", "--key", "billing")
	if code != 0 || errs != "" {
		t.Fatalf("report --fleet: exit %d, stderr %q", code, errs)
	}
	checkPage(t, page, "record on redis", map[string]int{`"r s-succeeded" data-i`: 1, `"r s-failed" data-i`: 1, ">web-1<": 1, ">web-2<": 1})
}

// checkPage checks a written page's mode, source and counts of strings in it.
func checkPage(t *testing.T, page, source string, want map[string]int) {
	t.Helper()
	st, err := os.Stat(page)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", page, st.Mode().Perm())
	}
	b, _ := os.ReadFile(page)
	html := string(b)
	if !strings.Contains(html, source) {
		t.Errorf("the page does not say it is from %q", source)
	}
	for s, n := range want {
		if got := strings.Count(html, s); got != n {
			t.Errorf("%q appears %d times in the page, want %d", s, got, n)
		}
	}
	if es, _ := filepath.Glob(filepath.Join(filepath.Dir(page), ".*.tmp")); len(es) > 0 {
		t.Errorf("temporary files left: %v", es)
	}
}
