package releasetest

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cronlock/internal/redistest"
)

// inRoot is a command that runs args with root as its /, as root of a new user namespace
// (unshare -r chroot), with env alone: the installed binaries find their files at the
// paths an install on a real host gives them (/etc/cronlock, /var/lib/cronlock,
// /run/cronlock), and nothing of the machine's own is read or written.
func inRoot(t *testing.T, root string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("unshare", append([]string{"-r", chroot, root}, args...)...)
	c.Env = env
	return c
}

// installDeb installs the release's amd64 .deb into a new private root with dpkg --root,
// as `dpkg -i` does on a host, and returns the root and a dpkg that acts on it.
func installDeb(t *testing.T) (string, func(args ...string)) {
	t.Helper()
	need(t, "dpkg")
	debs, _ := filepath.Glob(filepath.Join(built(t), "cronlock_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one amd64 .deb, have %v", debs)
	}
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644)
	dpkg := func(args ...string) {
		t.Helper()
		if code, out := run(t, exec.Command("dpkg", append([]string{"--root=" + root, "--log=/dev/null"}, args...)...)); code != 0 {
			t.Fatalf("dpkg %v: exit %d\n%s", args, code, out)
		}
	}
	dpkg("-i", debs[0])
	return root, dpkg
}

// manIn runs man with the man pages installed under root alone, rendered as plain text.
func manIn(t *testing.T, root string, args ...string) (int, string) {
	t.Helper()
	c := exec.Command("man", args...)
	c.Env = []string{"MANPATH=" + filepath.Join(root, "usr/share/man"), "PATH=" + os.Getenv("PATH"), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat", "LANG=C.UTF-8"}
	return run(t, c)
}

// historyRow is what these tests read of a `cronlock history --json` row.
type historyRow struct {
	Key          string  `json:"key"`
	Node         string  `json:"node"`
	Status       string  `json:"status"`
	ScheduledFor *string `json:"scheduled_for"`
	Holder       string  `json:"holder"`
	Backend      string  `json:"backend"`
}

// historyIn is the history of key on the host whose / is root, newest run first.
func historyIn(t *testing.T, root string, env []string, key string) []historyRow {
	t.Helper()
	code, out := run(t, inRoot(t, root, env, "/usr/bin/cronlock", "history", "--key", key, "--json"))
	if code != 0 {
		t.Fatalf("cronlock history --key %s --json in %s: exit %d\n%s", key, root, code, out)
	}
	var rows []historyRow
	d := json.NewDecoder(strings.NewReader(out))
	for d.More() {
		var r historyRow
		if err := d.Decode(&r); err != nil {
			t.Fatalf("cronlock history --json: %v\n%s", err, out)
		}
		rows = append(rows, r)
	}
	return rows
}

// shellQuote is s as one word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fleetRecipe is the README's fleet set-up: the ```sh block that writes
// /etc/cronlock/cronlock.conf.
func fleetRecipe(t *testing.T, readme string) string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], ">/etc/cronlock/cronlock.conf") {
			return m[1]
		}
	}
	t.Fatalf("%s has no ```sh block that writes /etc/cronlock/cronlock.conf (the fleet recipe)", readme)
	return ""
}

// hereDoc is a line that starts a here-document; its word ends it.
var hereDoc = regexp.MustCompile(`<<-?'?(\w+)'?\s*$`)

// onHost is the README's recipe as run on the host whose / is root, from this machine's
// shell: the recipe's own commands write into root's /etc/cronlock, and its cronlock is
// root's installed /usr/bin/cronlock run in root as node. What the recipe writes into
// files (a here-document) stays as printed: that is what the installed cronlock reads.
// The Redis the README names is addr.
func onHost(t *testing.T, recipe, root, node, addr string) string {
	t.Helper()
	c := inRoot(t, root, []string{"PATH=/usr/bin:/bin", "CRONLOCK_NODE=" + node}, "/usr/bin/cronlock")
	var b strings.Builder
	b.WriteString("cronlock() { env -i")
	for _, w := range slices.Concat(c.Env, []string{c.Path}, c.Args[1:]) {
		b.WriteString(" " + shellQuote(w))
	}
	b.WriteString(" \"$@\"; }\n")
	end := ""
	for _, l := range strings.Split(recipe, "\n") {
		l = strings.ReplaceAll(l, "redis.internal:6379", addr)
		switch {
		case end != "":
			if l == end {
				end = ""
			}
		default:
			if m := hereDoc.FindStringSubmatch(l); m != nil {
				end = m[1]
			}
			l = strings.ReplaceAll(l, "/etc/cronlock", root+"/etc/cronlock")
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// aclLineIn is the docs' ACL SETUSER line for cronlock (password PASSWORD, as the README's
// fleet recipe writes it), read from the docs the package installed.
func aclLineIn(t *testing.T, doc string) []string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "ACL" && f[1] == "SETUSER" && f[2] == "cronlock" {
			return f
		}
	}
	t.Fatalf("%s has no line ACL SETUSER cronlock …", doc)
	return nil
}

// TestDebFleetRecipe: the README's fleet recipe, as the README installed by the .deb
// prints it, on two hosts that each installed the .deb (two private roots, each the / of
// its installed binary): the world-readable /etc/cronlock/cronlock.conf with
// CRONLOCK_BACKEND=redis and the URL, the password in a 0600 file, against a private Redis
// whose default user has a password and whose ACL user cronlock is the docs' own.
// `cronlock config check` passes on each host; the README's first crontab line, run on
// both hosts for one tick, runs the job on one and skips on the other, naming it;
// `cronlock check` on the host that skipped sees the fleet's success; cronlock.conf(5)
// documents every setting the recipe writes, and cronlock-run(1) the line's flags.
func TestDebFleetRecipe(t *testing.T) {
	need(t, "dpkg", "man", "sh")
	hosts := []struct{ node, root string }{{"vmA", ""}, {"vmB", ""}}
	for i := range hosts {
		hosts[i].root, _ = installDeb(t)
	}
	doc := filepath.Join(hosts[0].root, "usr/share/doc/cronlock")
	recipe := fleetRecipe(t, filepath.Join(doc, "README.md"))
	if !strings.Contains(recipe, "redis.internal:6379") {
		t.Fatalf("the README's fleet recipe names no redis.internal:6379 for the test to replace with its own Redis:\n%s", recipe)
	}
	srv := redistest.Start(t, "--requirepass", "releasetest-admin")
	if out, err := srv.Do(aclLineIn(t, filepath.Join(doc, "docs/backends-redis.md"))...); err != nil {
		t.Fatalf("the docs' ACL line: %v %s", err, out)
	}

	for _, h := range hosts {
		c := exec.Command("sh", "-e", "-c", onHost(t, recipe, h.root, h.node, srv.Addr))
		c.Dir, c.Env = t.TempDir(), []string{"PATH=" + os.Getenv("PATH")}
		code, out := run(t, c)
		if code != 0 || !strings.Contains(out, "ok: runs lock on redis "+srv.Addr) {
			t.Fatalf("the README's fleet recipe on %s: exit %d; want 0 and config check's \"ok: runs lock on redis %s\":\n%s", h.node, code, srv.Addr, out)
		}
		etc := filepath.Join(h.root, "etc/cronlock")
		for file, mode := range map[string]os.FileMode{"cronlock.conf": 0o644, "redis-password": 0o600} {
			if st, err := os.Stat(filepath.Join(etc, file)); err != nil || st.Mode().Perm() != mode {
				t.Errorf("%s: /etc/cronlock/%s: %v %v; want mode %#o as the README says", h.node, file, st, err, mode)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(etc, "cronlock.conf")); !strings.Contains(string(b), "CRONLOCK_BACKEND=redis\n") {
			t.Errorf("%s: /etc/cronlock/cronlock.conf lacks CRONLOCK_BACKEND=redis:\n%s", h.node, b)
		}
	}

	// The README's first crontab line on both hosts for one tick: vmA's cron fires first.
	// A run whose tick differs from the other's (they straddled 09:00 UTC) is tried again
	// with another key.
	envOf := func(node string) []string { return []string{"PATH=/usr/bin:/bin", "CRONLOCK_NODE=" + node} }
	var key string
	for attempt := 1; ; attempt++ {
		key = fmt.Sprintf("daily-billing-%d", attempt)
		outs := make([]string, len(hosts))
		for i, h := range hosts {
			code, out := run(t, inRoot(t, h.root, envOf(h.node), "/usr/bin/cronlock", "run", "--key", key,
				"--schedule", "0 9 * * *", "--standby", "--", "/usr/bin/cronlock", "version"))
			if code != 0 {
				t.Fatalf("%s: cronlock run: exit %d; want 0 (the job's own, or a skip)\n%s", h.node, code, out)
			}
			outs[i] = out
		}
		a, b := historyIn(t, hosts[0].root, envOf("vmA"), key), historyIn(t, hosts[1].root, envOf("vmB"), key)
		if len(a) != 1 || len(b) != 1 || a[0].ScheduledFor == nil || b[0].ScheduledFor == nil {
			t.Fatalf("want one run of %s with a tick on each host; vmA has %+v, vmB %+v", key, a, b)
		}
		if *a[0].ScheduledFor != *b[0].ScheduledFor && attempt == 1 {
			continue
		}
		if a[0].Status != "succeeded" || a[0].Node != "vmA" || !strings.HasPrefix(a[0].Backend, "redis ") ||
			!strings.HasPrefix(outs[0], "cronlock "+release.version+" ") {
			t.Errorf("vmA: %+v, printed %q; want the job run (its version line), succeeded on redis", a[0], outs[0])
		}
		if b[0].Status != "skipped" || !strings.HasPrefix(b[0].Holder, "vmA ") || strings.Contains(outs[1], "cronlock "+release.version) {
			t.Errorf("vmB: %+v, printed %q; want the job not run, skipped with vmA as the holder", b[0], outs[1])
		}
		if *a[0].ScheduledFor != *b[0].ScheduledFor {
			t.Fatalf("the two hosts' runs were for ticks %s and %s twice: want one tick", *a[0].ScheduledFor, *b[0].ScheduledFor)
		}
		break
	}
	code, out := run(t, inRoot(t, hosts[1].root, envOf("vmB"), "/usr/bin/cronlock", "check", "--key", key))
	if code != 0 || !strings.HasPrefix(out, "CRONLOCK OK - "+key+":") {
		t.Errorf("cronlock check --key %s on vmB, which skipped: exit %d %q; want OK from the fleet's record", key, code, out)
	}

	// The installed man pages explain what the recipe uses.
	conf, _ := os.ReadFile(filepath.Join(hosts[0].root, "etc/cronlock/cronlock.conf"))
	code, page := manIn(t, hosts[0].root, "5", "cronlock.conf")
	for _, m := range regexp.MustCompile(`(?m)^(CRONLOCK_\w+)=`).FindAllStringSubmatch(string(conf), -1) {
		if code != 0 || !strings.Contains(page, m[1]) {
			t.Errorf("man 5 cronlock.conf: exit %d; it does not explain %s, which the README's recipe sets", code, m[1])
		}
	}
	code, page = manIn(t, hosts[0].root, "cronlock-run")
	for _, flag := range []string{"--key", "--schedule", "--standby"} {
		if code != 0 || !strings.Contains(page, flag) {
			t.Errorf("man cronlock-run: exit %d; it does not explain %s, which the README's crontab line uses", code, flag)
		}
	}
}

// TestRpmInstall installs the amd64 .rpm into a throwaway root with Debian's rpm
// (--nodeps --noscripts: there is no Red Hat system in it to satisfy either): rpm -V
// finds every file as packaged; the files on disk are the ones rpm lists and the .deb
// installs, with the same modes (0755 binaries, 0644 the rest), zsh's completion where
// Red Hat's zsh looks; the conffile is marked as one; the installed binaries are static
// and run, a local-lock run recording its history at the package's default paths.
func TestRpmInstall(t *testing.T) {
	need(t, "rpm")
	rpms, _ := filepath.Glob(filepath.Join(built(t), "cronlock-*.x86_64.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("want one x86_64 .rpm, have %v", rpms)
	}
	root := t.TempDir()
	// rpm as root of a user namespace (it sets owners), its database inside the root: the
	// machine's own (Debian's rpm keeps one in ~/.rpmdb) is not touched.
	rpm := func(args ...string) (int, string) {
		return run(t, exec.Command("unshare", append([]string{"-r", "rpm", "--root", root, "--dbpath", "/var/lib/rpm"}, args...)...))
	}
	if code, out := rpm("-i", "--nodeps", "--noscripts", rpms[0]); code != 0 {
		t.Fatalf("rpm -i %s: exit %d\n%s", filepath.Base(rpms[0]), code, out)
	}
	if code, out := rpm("-V", "cronlock"); code != 0 || out != "" {
		t.Errorf("rpm -V cronlock: exit %d; want every file as packaged:\n%s", code, out)
	}
	if code, out := rpm("-qc", "cronlock"); code != 0 || out != "/etc/cronlock/cronlock.conf\n" {
		t.Errorf("rpm -qc cronlock: exit %d %q; want the conffile alone", code, out)
	}
	code, out := rpm("-ql", "cronlock")
	if code != 0 {
		t.Fatalf("rpm -ql cronlock: exit %d\n%s", code, out)
	}
	listed := strings.Fields(out)
	installed := filesUnder(t, root, "var/lib/rpm")
	if on := slices.Sorted(maps.Keys(installed)); !slices.Equal(on, slices.Sorted(slices.Values(listed))) {
		t.Errorf("the files in the root are not the ones rpm -ql lists:\non disk %v\nlisted  %v", on, listed)
	}

	want := map[string]os.FileMode{
		"/usr/bin/cronlock":                                  0o755,
		"/usr/bin/cronlock-etcd":                             0o755,
		"/etc/cronlock/cronlock.conf":                        0o644,
		"/usr/share/bash-completion/completions/cronlock":    0o644,
		"/usr/share/zsh/site-functions/_cronlock":            0o644,
		"/usr/share/fish/vendor_completions.d/cronlock.fish": 0o644,
		"/usr/share/man/man1/cronlock.1.gz":                  0o644,
		"/usr/share/man/man1/cronlock-run.1.gz":              0o644,
		"/usr/share/man/man5/cronlock.conf.5.gz":             0o644,
		"/usr/share/doc/cronlock/README.md":                  0o644,
		"/usr/share/doc/cronlock/LICENSE":                    0o644,
	}
	for f, mode := range want {
		if got, ok := installed[f]; !ok {
			t.Errorf("%s: not installed by the .rpm", f)
		} else if got != mode {
			t.Errorf("%s: mode %v; want %v", f, got, mode)
		}
	}
	for f, mode := range installed {
		if _, ok := want[f]; !ok && mode != 0o644 {
			t.Errorf("%s: mode %v; want 0644", f, mode)
		}
	}
	// The .deb installs the same files with the same modes, but for zsh's completion.
	debRoot, _ := installDeb(t)
	deb := filesUnder(t, debRoot, "var/lib/dpkg")
	deb["/usr/share/zsh/site-functions/_cronlock"] = deb["/usr/share/zsh/vendor-completions/_cronlock"]
	delete(deb, "/usr/share/zsh/vendor-completions/_cronlock")
	for f, mode := range deb {
		if got, ok := installed[f]; !ok {
			t.Errorf("%s: the .deb installs it, the .rpm does not", f)
		} else if got != mode {
			t.Errorf("%s: mode %v in the .rpm, %v in the .deb", f, got, mode)
		}
	}
	for f := range installed {
		if _, ok := deb[f]; !ok {
			t.Errorf("%s: the .rpm installs it, the .deb does not", f)
		}
	}

	env := []string{"PATH=/usr/bin:/bin"}
	for _, c := range []struct{ bin, etcd string }{{"cronlock", "no"}, {"cronlock-etcd", "yes"}} {
		path := filepath.Join(root, "usr/bin", c.bin)
		if _, err := os.Stat(path); err != nil {
			continue // reported above
		}
		checkStatic(t, path, elf.EM_X86_64)
		code, out := run(t, inRoot(t, root, env, "/usr/bin/"+c.bin, "version"))
		if code != 0 || !strings.HasPrefix(out, "cronlock "+release.version+" ") || !strings.Contains(out, "etcd backend: "+c.etcd+")") {
			t.Errorf("installed %s version: exit %d %q", c.bin, code, out)
		}
	}
	// The shipped conffile sets nothing: a run locks locally, at the default paths.
	code, out = run(t, inRoot(t, root, env, "/usr/bin/cronlock", "run", "--key", "rpm-local", "--", "/usr/bin/cronlock", "version"))
	if code != 0 || !strings.HasPrefix(out, "cronlock "+release.version+" ") {
		t.Fatalf("cronlock run with the .rpm's conffile: exit %d %q; want 0 and the job's version line", code, out)
	}
	rows := historyIn(t, root, env, "rpm-local")
	if len(rows) != 1 || rows[0].Status != "succeeded" || rows[0].Backend != "local /run/cronlock" {
		t.Errorf("history of the local run: %+v; want one succeeded run on the local backend in /run/cronlock", rows)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/cronlock/history.db")); err != nil {
		t.Errorf("root's history is not at /var/lib/cronlock/history.db: %v", err)
	}
	if code, out := manIn(t, root, "-w", "cronlock-run"); code != 0 || strings.TrimSpace(out) != filepath.Join(root, "usr/share/man/man1/cronlock-run.1.gz") {
		t.Errorf("man -w cronlock-run: exit %d %q; want the .rpm's page", code, out)
	}
}

// filesUnder maps every file and symlink under root, but those under skip (the package
// manager's database), as an absolute path on the installed host, to its permission bits.
func filesUnder(t *testing.T, root, skip string) map[string]os.FileMode {
	t.Helper()
	files := map[string]os.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == skip {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files["/"+rel] = info.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
