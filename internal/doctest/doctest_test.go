package doctest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"cronlock/internal/redistest"
)

// root is the repository's top folder, seen from this package's folder.
const root = "../.."

// cronlockBin is the cronlock built for these tests (the default build, as a user makes it).
var cronlockBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cronlock-doctest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cronlockBin = filepath.Join(dir, "cronlock")
	build := exec.Command("go", "build", "-o", cronlockBin, root)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build cronlock for the doc tests: %v\n", err)
		return 1
	}
	return m.Run()
}

// docFile is one Markdown file of the documentation.
type docFile struct {
	name string // relative to the repository's top, e.g. docs/run.md
	text string
}

// docFiles reads README.md, CONTRIBUTING.md and every docs/*.md.
func docFiles(t *testing.T) []docFile {
	t.Helper()
	names := []string{"README.md", "CONTRIBUTING.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		names = append(names, filepath.ToSlash(strings.TrimPrefix(m, root+string(filepath.Separator))))
	}
	if len(names) < 10 {
		t.Fatalf("docs: only %v; the reference lives in docs/*.md", names)
	}
	var files []docFile
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, docFile{n, string(b)})
	}
	return files
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lineOf is the 1-based line of offset i in text.
func lineOf(text string, i int) int { return strings.Count(text[:i], "\n") + 1 }

// TestReadmeIsShort: the README is a sysadmin's first ten minutes, at most 20 KB; the
// reference lives in docs/.
func TestReadmeIsShort(t *testing.T) {
	const limit = 20_000
	readme := readDoc(t, "README.md")
	if len(readme) > limit {
		t.Errorf("README.md is %d bytes, over %d: move the detail into docs/", len(readme), limit)
	}
	// The README speaks to users: no test names, no round-trip counts, no maintainer's log.
	for _, re := range []string{`\bTest[A-Z]\w+`, `_test\.go`, `(?i)round[- ]trips?`} {
		if loc := regexp.MustCompile(re).FindStringIndex(readme); loc != nil {
			t.Errorf("README.md line %d: %q belongs in CONTRIBUTING.md or BENCHMARKS.md", lineOf(readme, loc[0]), readme[loc[0]:loc[1]])
		}
	}
}

// TestDocsSpeakOfTheProjectOnly: the docs are the user's whole documentation; they must
// not send readers to a document the repository does not have (a "SPEC", its § numbers,
// "the contract", an issue number) instead of saying what it says.
func TestDocsSpeakOfTheProjectOnly(t *testing.T) {
	for _, f := range docFiles(t) {
		for _, re := range []string{`\bSPEC\b`, `§`, `(?i)\bthe contract\b`, `(?i)\bthe spec(ification)?\b`, `(?i)\bissues? #?\d+`} {
			if loc := regexp.MustCompile(re).FindStringIndex(f.text); loc != nil {
				t.Errorf("%s line %d cites %q, which is not in the repository: say what it says instead", f.name, lineOf(f.text, loc[0]), f.text[loc[0]:loc[1]])
			}
		}
	}
}

// TestHistoryShowExampleIsInTheTable: the history page's `history show` example names a
// run by an ID that its `history` example table shows, and shows that run.
func TestHistoryShowExampleIsInTheTable(t *testing.T) {
	b := readDoc(t, "docs/history.md")
	m := regexp.MustCompile(`(?s)\n    \$ cronlock history +(?:#[^\n]*)?\n(    ID .*?)\n\n    \$ cronlock history show (\S+)\n    run: +(\S+)\n    key: +(\S+)\n`).FindStringSubmatch(b)
	if m == nil {
		t.Fatal("docs/history.md: no `cronlock history` example table followed by a `cronlock history show` example")
	}
	id, full, key := m[2], m[3], m[4]
	var row string
	for _, l := range strings.Split(m[1], "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == id {
			row = l
		}
	}
	if row == "" || !strings.HasPrefix(full, id) || !strings.Contains(row, " "+key+" ") {
		t.Errorf("docs/history.md: `history show %s` shows run %s of %s, but the table above has no such ID in its first column (row %q)", id, full, key, row)
	}
}

// TestNoPingURLOnACrontabLine: no crontab line in the docs carries a ping URL, a secret
// that cron would show in its log and in the Subject of its mail; the URL goes in the
// config file, with {key}.
func TestNoPingURLOnACrontabLine(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\s*(\S+ ){5}\S*cronlock run .*--ping https?://`)
	for _, f := range docFiles(t) {
		if loc := re.FindStringIndex(f.text); loc != nil {
			t.Errorf("%s line %d: a crontab line with the ping URL on it: %q", f.name, lineOf(f.text, loc[0]), f.text[loc[0]:loc[1]])
		}
	}
}

// TestDocLinks: every link from one doc file to another names a file that exists and,
// with a #fragment, a heading that file has (as GitHub makes anchors from headings).
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(name, text string) map[string]bool {
		if a, ok := anchors[name]; ok {
			return a
		}
		a := map[string]bool{}
		for _, h := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(stripFences(text), -1) {
			a[slug(h[1])] = true
		}
		anchors[name] = a
		return a
	}
	for _, f := range docFiles(t) {
		for _, m := range link.FindAllStringSubmatchIndex(f.text, -1) {
			target := f.text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			name := f.name
			if path != "" {
				name = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f.name), path)))
			}
			b, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				if st, serr := os.Stat(filepath.Join(root, name)); serr == nil && st.IsDir() {
					continue
				}
				t.Errorf("%s line %d: link %q: no file %s", f.name, lineOf(f.text, m[0]), target, name)
				continue
			}
			if frag != "" && strings.HasSuffix(name, ".md") && !anchorsOf(name, string(b))[frag] {
				t.Errorf("%s line %d: link %q: %s has no heading with the anchor #%s", f.name, lineOf(f.text, m[0]), target, name, frag)
			}
		}
	}
}

// slug is GitHub's anchor for a heading: lower case, each space a '-', and of the rest
// only letters, digits, marks, '-' and '_' kept.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stripFences removes fenced code blocks, whose '#' lines are no headings.
func stripFences(text string) string {
	return regexp.MustCompile("(?ms)^```.*?^```").ReplaceAllString(text, "")
}

// A block is a fenced code block marked runnable: the line before its opening fence is
//
//	<!-- runnable -->               run it; it must exit 0
//	<!-- runnable redis -->         it needs a Redis server (a private one is started)
//	<!-- runnable exit=N -->        a ```sh block that must exit N
//
// A ```sh block is one script, run with `sh -e`. A ```console block is commands after
// "$ " (a trailing "\" continues one on the next line, and a here-document's lines up to
// its end word belong to the command), each run with `sh -c`, and what
// they print: each shown line must come, in order, among the lines of the command's
// stdout and stderr, with runs of spaces counting as one and "…" standing for anything; a
// command shown with nothing after it must print nothing.
// A command must exit 0, or N when it ends with the comment "# exit N".
type block struct {
	file  string
	line  int    // of the opening fence
	lang  string // sh or console
	redis bool
	exit  int
	body  string
}

var runnableMark = regexp.MustCompile(`^<!-- runnable((?: [a-z]+(?:=\d+)?)*) -->$`)

// runnableBlocks finds the blocks marked runnable in f, and fails on a mark that does not
// stand right before a ```sh or ```console fence.
func runnableBlocks(t *testing.T, f docFile) []block {
	t.Helper()
	lines := strings.Split(f.text, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		m := runnableMark.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.HasPrefix(lines[i], "<!-- runnable") {
				t.Errorf("%s line %d: a runnable mark must be `<!-- runnable [redis] [exit=N] -->` alone on its line", f.name, i+1)
			}
			continue
		}
		if i+1 >= len(lines) || (lines[i+1] != "```sh" && lines[i+1] != "```console") {
			t.Errorf("%s line %d: a runnable mark must stand right before a ```sh or ```console block", f.name, i+1)
			continue
		}
		b := block{file: f.name, line: i + 2, lang: strings.TrimPrefix(lines[i+1], "```")}
		for _, opt := range strings.Fields(m[1]) {
			switch name, val, _ := strings.Cut(opt, "="); name {
			case "redis":
				b.redis = true
			case "exit":
				b.exit, _ = strconv.Atoi(val)
			default:
				t.Errorf("%s line %d: unknown runnable option %q", f.name, i+1, opt)
			}
		}
		j := i + 2
		for j < len(lines) && lines[j] != "```" {
			j++
		}
		b.body = strings.Join(lines[i+2:j], "\n") + "\n"
		blocks = append(blocks, b)
		i = j
	}
	return blocks
}

// TestRunnableBlocks runs every block the docs mark runnable, each in a private folder of
// its own with the local backend's lock folder, the history and the config file in it:
// /etc/cronlock in a block means that folder's etc/cronlock, /usr/local/bin/cronlock and
// ./cronlock the binary built for the test, redis.internal:6379 a private redis-server
// with the docs' ACL user cronlock (password PASSWORD).
func TestRunnableBlocks(t *testing.T) {
	var blocks []block
	for _, f := range docFiles(t) {
		blocks = append(blocks, runnableBlocks(t, f)...)
	}
	if len(blocks) < 12 {
		t.Fatalf("only %d runnable blocks in the docs; README.md and troubleshooting.md alone have more", len(blocks))
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			t.Parallel()
			runBlock(t, b)
		})
	}
}

func runBlock(t *testing.T, b block) {
	dir := t.TempDir()
	for _, d := range []string{"etc/cronlock", "home", "tmp", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "etc/cronlock/cronlock.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// ./cronlock and cronlock on the PATH are the binary under test.
	for _, l := range []string{filepath.Join(dir, "cronlock"), filepath.Join(dir, "bin/cronlock")} {
		if err := os.Symlink(cronlockBin, l); err != nil {
			t.Fatal(err)
		}
	}
	rewrite := []string{
		"/usr/local/bin/cronlock", cronlockBin,
		"/etc/cronlock", filepath.Join(dir, "etc/cronlock"),
	}
	if b.redis {
		srv := redistest.Start(t)
		acl := aclLine(t)
		if out, err := redistest.Do(srv.Addr, acl...); err != nil {
			t.Fatalf("the docs' ACL line on a private redis-server: %v %s", err, out)
		}
		rewrite = append(rewrite, "redis.internal:6379", srv.Addr)
	}
	body := strings.NewReplacer(rewrite...).Replace(b.body)
	env := []string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin",
		"HOME=" + filepath.Join(dir, "home"),
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"TZ=UTC", "NO_COLOR=1", "LANG=C.UTF-8",
		"CRONLOCK_CONFIG=" + conf,
		"CRONLOCK_HISTORY=" + filepath.Join(dir, "history.db"),
		"CRONLOCK_LOCK_DIR=" + filepath.Join(dir, "locks"),
	}
	at := fmt.Sprintf("%s line %d", b.file, b.line)
	switch b.lang {
	case "sh":
		out, code := runShell(t, dir, env, []string{"-e", "-c", body})
		if code != b.exit {
			t.Errorf("%s: the block exited %d, want %d; it printed:\n%s", at, code, b.exit, out)
		}
	case "console":
		for _, c := range consoleCommands(body) {
			out, code := runShell(t, dir, env, []string{"-c", c.cmd})
			if code != c.exit {
				t.Errorf("%s: `%s` exited %d, want %d; it printed:\n%s", at, c.cmd, code, c.exit, out)
				continue
			}
			if len(c.want) == 0 && out != "" {
				t.Errorf("%s: `%s` printed:\n%s\nwhere the docs show nothing", at, c.cmd, out)
			}
			if miss := firstMissing(c.want, out); miss != "" {
				t.Errorf("%s: `%s` printed:\n%s\nwhere the docs show %q (in order, … for anything)", at, c.cmd, out, miss)
			}
		}
	}
}

// aclLine is the docs' ACL SETUSER line for cronlock, with the password PASSWORD as the
// README's fleet recipe writes it.
func aclLine(t *testing.T) []string {
	t.Helper()
	for _, line := range strings.Split(readDoc(t, "docs/backends-redis.md"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "ACL" && f[1] == "SETUSER" && f[2] == "cronlock" {
			return f
		}
	}
	t.Fatal("docs/backends-redis.md has no line ACL SETUSER cronlock …")
	return nil
}

// runShell runs sh with args in dir, with env only, and returns what it printed (stdout
// and stderr together) and its exit code. A block that hangs fails after a minute.
func runShell(t *testing.T, dir string, env, args []string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("sh %q did not end within a minute; it printed:\n%s", args, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

type consoleCommand struct {
	cmd  string
	exit int
	want []string
}

var (
	exitComment = regexp.MustCompile(`\s+#\s*exit (\d+)\s*$`)
	// hereDoc is a command that ends with a here-document (<<'END'): its lines, up to
	// END, are the command's, not what it prints.
	hereDoc = regexp.MustCompile(`<<-?'?(\w+)'?\s*$`)
)

// consoleCommands splits a console block into its commands and the lines each shows.
func consoleCommands(body string) []consoleCommand {
	var cmds []consoleCommand
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "$ ") {
			if n := len(cmds); n > 0 {
				cmds[n-1].want = append(cmds[n-1].want, l)
			}
			continue
		}
		c := strings.TrimPrefix(l, "$ ")
		for strings.HasSuffix(c, `\`) && i+1 < len(lines) {
			i++
			c = strings.TrimSuffix(c, `\`) + "\n" + lines[i]
		}
		if m := hereDoc.FindStringSubmatch(c); m != nil {
			for i+1 < len(lines) {
				i++
				c += "\n" + lines[i]
				if lines[i] == m[1] {
					break
				}
			}
		}
		cc := consoleCommand{cmd: c}
		if m := exitComment.FindStringSubmatch(c); m != nil {
			cc.exit, _ = strconv.Atoi(m[1])
		}
		cmds = append(cmds, cc)
	}
	return cmds
}

// firstMissing is the first of want's lines not found, in order, among out's lines, or "".
func firstMissing(want []string, out string) string {
	got := strings.Split(out, "\n")
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		found := false
		for len(got) > 0 && !found {
			found = lineMatches(w, got[0])
			got = got[1:]
		}
		if !found {
			return w
		}
	}
	return ""
}

// lineMatches: got holds want's parts between "…" in order (runs of spaces count as one);
// without "…" the two lines are equal.
func lineMatches(want, got string) bool {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	want, got = norm(want), norm(got)
	parts := strings.Split(want, "…")
	if len(parts) == 1 {
		return want == got
	}
	if !strings.HasPrefix(got, strings.TrimSpace(parts[0])) {
		return false
	}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		i := strings.Index(got, p)
		if i < 0 {
			return false
		}
		got = got[i+len(p):]
	}
	return strings.TrimSpace(parts[len(parts)-1]) == "" || got == ""
}
