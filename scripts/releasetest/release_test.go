package releasetest

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// release is what one run of scripts/release.sh made, shared by every test of the run.
var release struct {
	once    sync.Once
	dir     string // its --out folder
	version string // the version it stamped, from the binaries' names
	err     error
	took    time.Duration
	cleanup func()
}

// need skips (fails under CI=true, where scripts/test.sh has installed them) when one of
// the tools the release or its tests use is missing.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing (scripts/test.sh installs the release toolchain with apt-get)", tool)
			}
			t.Skipf("%s is missing: the release tests need the release toolchain (apt-get install musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static man-db)", tool)
		}
	}
}

// arm64 reports whether the release tests build and check the arm64 binaries too.
func arm64() bool { return os.Getenv("CRONLOCK_TEST_RELEASE_ARM64") == "1" }

// built runs scripts/release.sh once (both architectures when the arm64 cross compiler is
// there) and returns its output folder.
func built(t *testing.T) string {
	t.Helper()
	need(t, "musl-gcc", "dpkg", "unshare", "chroot", "git")
	release.once.Do(func() {
		dir, err := os.MkdirTemp("", "cronlock-release-")
		if err != nil {
			release.err = err
			return
		}
		release.dir = dir
		arch := "amd64"
		if arm64() {
			arch = "all"
		}
		start := time.Now()
		c := exec.Command("scripts/release.sh", "--out", dir, "--arch", arch, "--allow-dirty")
		c.Dir = "../.."
		out, err := c.CombinedOutput()
		release.took = time.Since(start)
		if err != nil {
			release.err = fmt.Errorf("scripts/release.sh: %v\n%s", err, out)
			return
		}
		m, _ := filepath.Glob(filepath.Join(dir, "cronlock-v*-linux-amd64"))
		if len(m) != 1 {
			release.err = fmt.Errorf("scripts/release.sh made no single cronlock-VERSION-linux-amd64 in %s: %v\n%s", dir, m, out)
			return
		}
		release.version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "cronlock-"), "-linux-amd64")
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	t.Logf("scripts/release.sh took %s (once per test run)", release.took.Round(time.Second))
	return release.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if release.dir != "" {
		os.RemoveAll(release.dir)
	}
	os.Exit(code)
}

// binary is the path of one of the release's binaries: name "cronlock" or
// "cronlock-etcd", arch "amd64" or "arm64".
func binary(t *testing.T, name, arch string) string {
	p := filepath.Join(built(t), name+"-"+release.version+"-linux-"+arch)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the release has no %s: %v", filepath.Base(p), err)
	}
	return p
}

// run runs a command and returns its exit code and combined output.
func run(t *testing.T, c *exec.Cmd) (int, string) {
	t.Helper()
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), b.String()
	}
	if err != nil {
		t.Fatalf("%v: %v", c.Args, err)
	}
	return 0, b.String()
}

// checkStatic fails unless path is an ELF executable of machine with no interpreter and
// no shared library: it needs no libc at all.
func checkStatic(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s is for %s; want %s", filepath.Base(path), f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a dynamic loader: not static", filepath.Base(path))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v: not static", filepath.Base(path), libs)
	}
}

// TestStaticBinaryEmptyRoot: the release binaries run in a root that holds nothing but
// themselves (no libc, no /etc/passwd, no /bin/sh, no /proc), as on a host whose libc is
// older than the build machine's or in a distroless image: version, and a run with a
// local lock whose history is the root's own file.
func TestStaticBinaryEmptyRoot(t *testing.T) {
	for _, c := range []struct{ name, etcd string }{{"cronlock", "no"}, {"cronlock-etcd", "yes"}} {
		bin := binary(t, c.name, "amd64")
		checkStatic(t, bin, elf.EM_X86_64)
		root := t.TempDir()
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "cronlock"), data, 0o755); err != nil {
			t.Fatal(err)
		}
		inRoot := func(args ...string) *exec.Cmd {
			return inRoot(t, root, []string{"PATH=/"}, append([]string{"/cronlock"}, args...)...)
		}
		want := fmt.Sprintf("cronlock %s (commit ", release.version)
		code, out := run(t, inRoot("version"))
		if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "linux/amd64, etcd backend: "+c.etcd+")") {
			t.Errorf("%s version in an empty root: exit %d %q; want %q… etcd backend: %s", c.name, code, out, want, c.etcd)
		}
		code, out = run(t, inRoot("run", "--key", "empty-root", "--history", "/history.db", "--", "/cronlock", "--version"))
		if code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("%s run in an empty root: exit %d %q; want 0 and the job's version line", c.name, code, out)
		}
		code, out = run(t, inRoot("history", "--history", "/history.db", "--json"))
		if code != 0 || !strings.Contains(out, `"key":"empty-root"`) || !strings.Contains(out, `"status":"succeeded"`) {
			t.Errorf("%s history in an empty root: exit %d %q; want the succeeded run", c.name, code, out)
		}
	}
}

// TestArm64Build: the arm64 binaries are static for aarch64, and run under Debian's
// qemu-user-static where it is installed (else they are build-only here).
func TestArm64Build(t *testing.T) {
	if !arm64() {
		t.Skip("the arm64 build runs with CRONLOCK_TEST_RELEASE_ARM64=1 (scripts/test.sh --long): five minutes more on two cores")
	}
	need(t, "aarch64-linux-gnu-gcc")
	for _, name := range []string{"cronlock", "cronlock-etcd"} {
		bin := binary(t, name, "arm64")
		checkStatic(t, bin, elf.EM_AARCH64)
		if _, err := exec.LookPath("qemu-aarch64-static"); err != nil {
			t.Logf("no qemu-aarch64-static: %s is checked as a static aarch64 file only", name)
			continue
		}
		code, out := run(t, exec.Command("qemu-aarch64-static", bin, "version"))
		if code != 0 || !strings.Contains(out, "cronlock "+release.version) || !strings.Contains(out, "linux/arm64") {
			t.Errorf("%s version under qemu: exit %d %q", name, code, out)
		}
		dir := t.TempDir()
		code, out = run(t, exec.Command("qemu-aarch64-static", bin, "run", "--key", "arm", "--history", dir+"/h.db", "--lock-dir", dir, "--", "true"))
		if code != 0 {
			t.Errorf("%s run under qemu: exit %d %q", name, code, out)
		}
	}
}

// TestNothingExtraLinked: the man page generator (cobra's doc package, go-md2man) and
// nfpm are build tools: the release binary links neither. It is built with the tags that
// keep glibc's NSS out, and stamped with the version.
func TestNothingExtraLinked(t *testing.T) {
	need(t, "go")
	for _, name := range []string{"cronlock", "cronlock-etcd"} {
		code, out := run(t, exec.Command("go", "version", "-m", binary(t, name, "amd64")))
		if code != 0 || !strings.Contains(out, "github.com/mattn/go-sqlite3") {
			t.Fatalf("go version -m %s: exit %d %s", name, code, out)
		}
		for _, banned := range []string{"go-md2man", "blackfriday", "go.yaml.in/yaml", "goreleaser", "nfpm"} {
			if strings.Contains(out, banned) {
				t.Errorf("%s links %s:\n%s", name, banned, out)
			}
		}
		// (-trimpath keeps -ldflags out of this list: the stamp is checked by running it.)
		if !regexp.MustCompile(`(?m)^\s*build\s+-tags=osusergo,netgo,`).MatchString(out) {
			t.Errorf("%s: not built with -tags osusergo,netgo:\n%s", name, out)
		}
	}
}

// TestChecksums: SHA256SUMS covers every binary and package, and they match.
func TestChecksums(t *testing.T) {
	dir := built(t)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	all, _ := filepath.Glob(filepath.Join(dir, "cronlock*"))
	for _, f := range all {
		if !strings.Contains(string(sums), "  "+filepath.Base(f)+"\n") {
			t.Errorf("SHA256SUMS lacks %s:\n%s", filepath.Base(f), sums)
		}
	}
	c := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	c.Dir = dir
	if code, out := run(t, c); code != 0 {
		t.Errorf("sha256sum --check: exit %d\n%s", code, out)
	}
}

// TestDebInstall installs the .deb into a private root with dpkg --root: the binaries
// run, man finds cronlock(1) and cronlock.conf(5), the completions and the 0644 conffile
// are where bash, zsh, fish and dpkg look; dpkg -r keeps the conffile, --purge removes
// it; and the machine itself has no cronlock before or after.
func TestDebInstall(t *testing.T) {
	need(t, "dpkg", "dpkg-query", "man")
	hostBefore := hostState()
	root, dpkg := installDeb(t)

	for _, c := range []struct{ bin, etcd string }{{"cronlock", "no"}, {"cronlock-etcd", "yes"}} {
		code, out := run(t, exec.Command(filepath.Join(root, "usr/bin", c.bin), "version"))
		if code != 0 || !strings.HasPrefix(out, "cronlock "+release.version+" ") || !strings.Contains(out, "etcd backend: "+c.etcd) {
			t.Errorf("installed %s version: exit %d %q", c.bin, code, out)
		}
	}
	man := func(args ...string) (int, string) { return manIn(t, root, args...) }
	for page, want := range map[string]string{"cronlock": "man1/cronlock.1.gz", "cronlock.conf": "man5/cronlock.conf.5.gz", "cronlock-run": "man1/cronlock-run.1.gz"} {
		if code, out := man("-w", page); code != 0 || strings.TrimSpace(out) != filepath.Join(root, "usr/share/man", want) {
			t.Errorf("man -w %s: exit %d %q; want %s in the private root", page, code, out, want)
		}
	}
	if code, out := man("cronlock-run"); code != 0 || !strings.Contains(out, "EXIT STATUS") || !strings.Contains(out, "ENVIRONMENT") ||
		!strings.Contains(out, "FILES") || !strings.Contains(out, "CRONLOCK_FENCING_TOKEN") {
		t.Errorf("man cronlock-run: exit %d; want EXIT STATUS, ENVIRONMENT (with what the job gets) and FILES:\n%s", code, out)
	}
	if code, out := man("5", "cronlock.conf"); code != 0 || !strings.Contains(out, "GRAMMAR") || !strings.Contains(out, "CRONLOCK_REDIS_URL") {
		t.Errorf("man 5 cronlock.conf: exit %d\n%s", code, out)
	}
	for file, want := range map[string]string{
		"usr/share/bash-completion/completions/cronlock":    "complete -o default -F __start_cronlock cronlock",
		"usr/share/zsh/vendor-completions/_cronlock":        "#compdef cronlock",
		"usr/share/fish/vendor_completions.d/cronlock.fish": "complete -c cronlock",
		"usr/share/doc/cronlock/LICENSE":                    "MIT License",
		"usr/share/doc/cronlock/README.md":                  "# cronlock",
		"usr/share/doc/cronlock/docs/troubleshooting.md":    "#",
	} {
		if b, err := os.ReadFile(filepath.Join(root, file)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("/%s: %v; want it to hold %q", file, err, want)
		}
	}
	conf := filepath.Join(root, "etc/cronlock/cronlock.conf")
	if st, err := os.Stat(conf); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("conffile: %v %v; want mode 0644", st, err)
	}
	c := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Conffiles}", "cronlock")
	if code, out := run(t, c); code != 0 || !strings.Contains(out, "/etc/cronlock/cronlock.conf ") {
		t.Errorf("dpkg-query Conffiles: exit %d %q; want /etc/cronlock/cronlock.conf marked as a conffile", code, out)
	}
	// The shipped file is all comments: the installed binary reads it without complaint.
	config := func() *exec.Cmd {
		c := exec.Command(filepath.Join(root, "usr/bin/cronlock"), "config")
		c.Env = []string{"CRONLOCK_CONFIG=" + conf, "PATH=/usr/bin:/bin"}
		return c
	}
	if code, out := run(t, config()); code != 0 {
		t.Errorf("cronlock config with the shipped conffile: exit %d\n%s", code, out)
	}

	// A shell habit the grammar refuses (cronlock.conf(5)): one line naming file and line.
	os.WriteFile(conf, []byte("# fleet\nexport CRONLOCK_TTL=90s\n"), 0o644)
	bad := exec.Command(filepath.Join(root, "usr/bin/cronlock"), "run", "--key", "x", "--history", "off", "--", "true")
	bad.Env = []string{"CRONLOCK_CONFIG=" + conf, "PATH=/usr/bin:/bin"}
	if code, out := run(t, bad); code != 125 || out != "cronlock: config file "+conf+" line 2: drop the word export: this file is read by cronlock, not by a shell, and is not a script (write NAME=value)\n" {
		t.Errorf("cronlock run with export in the conffile: exit %d %q; want 125 and one line naming the file and line 2", code, out)
	}

	// An admin's edit, then remove: the binary goes, the edited conffile stays.
	os.WriteFile(conf, []byte("CRONLOCK_TTL=90s\n"), 0o644)
	dpkg("-r", "cronlock")
	if _, err := os.Stat(filepath.Join(root, "usr/bin/cronlock")); err == nil {
		t.Errorf("dpkg -r left /usr/bin/cronlock")
	}
	if b, err := os.ReadFile(conf); err != nil || string(b) != "CRONLOCK_TTL=90s\n" {
		t.Errorf("dpkg -r: conffile %q, %v; want it kept with the admin's edit", b, err)
	}
	dpkg("--purge", "cronlock")
	if _, err := os.Stat(conf); err == nil {
		t.Errorf("dpkg --purge left the conffile")
	}
	if after := hostState(); after != hostBefore {
		t.Errorf("the machine changed: before %q, after %q", hostBefore, after)
	}
}

// hostState is what a real install on this machine would change: the files, and dpkg's
// own record of the package.
func hostState() string {
	var b strings.Builder
	for _, f := range []string{"/usr/bin/cronlock", "/usr/bin/cronlock-etcd", "/etc/cronlock/cronlock.conf", "/usr/share/man/man1/cronlock.1.gz"} {
		_, err := os.Stat(f)
		fmt.Fprintf(&b, "%s:%v ", f, err == nil)
	}
	out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", "cronlock").CombinedOutput()
	b.Write(out)
	return b.String()
}

// TestGetentUser: the static binary, which reads only /etc/passwd itself, finds the home
// folder of a user that only NSS knows (LDAP, SSSD) through getent, and keeps that user's
// history there; without getent's answer the job runs unrecorded, with a warning that
// names CRONLOCK_HISTORY.
func TestGetentUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the binary as a uid that /etc/passwd does not have")
	}
	const uid = 3999123
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), fmt.Sprintf(":%d:", uid)) {
		t.Skipf("uid %d is in /etc/passwd", uid)
	}
	// A world-searchable folder the user can reach (t.TempDir's parents are 0700).
	dir, err := os.MkdirTemp("", "cronlock-getent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "cronlock")
	data, _ := os.ReadFile(binary(t, "cronlock", "amd64"))
	os.WriteFile(bin, data, 0o755)
	home, fake := filepath.Join(dir, "home"), filepath.Join(dir, "nss")
	for _, d := range []string{home, fake} {
		os.Mkdir(d, 0o755)
	}
	os.Chown(home, uid, uid)
	getent := fmt.Sprintf("#!/bin/sh\n[ \"$1 $2\" = 'passwd %d' ] || exit 2\necho 'ldapuser:*:%d:%d:LDAP user:%s:/bin/sh'\n", uid, uid, uid, home)
	os.WriteFile(filepath.Join(fake, "getent"), []byte(getent), 0o755)

	runAs := func(path string) (int, string) {
		c := exec.Command(bin, "run", "--key", "ldap", "--lock-dir", home, "--", "/bin/true")
		c.Env = []string{"PATH=" + path, "CRONLOCK_CONFIG=" + filepath.Join(dir, "none.conf")}
		os.WriteFile(filepath.Join(dir, "none.conf"), nil, 0o644)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		return run(t, c)
	}
	const noHome = "find the home folder of uid"
	if code, out := runAs("/usr/bin:/bin"); code != 0 || !strings.Contains(out, noHome) || !strings.Contains(out, "CRONLOCK_HISTORY") {
		t.Errorf("a user that neither /etc/passwd nor getent knows: exit %d %q; want 0 and a warning naming CRONLOCK_HISTORY", code, out)
	}
	if code, out := runAs(fake + ":/usr/bin:/bin"); code != 0 || out != "" {
		t.Fatalf("a user that getent knows: exit %d %q; want 0 and no warning", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, ".local/state/cronlock/history.db")); err != nil {
		t.Errorf("no history in the home folder getent gave: %v", err)
	}
}
