package crontab

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debianVerdicts are user-crontab files and what Debian 12's crontab(1) (3.0pl1-162,
// `crontab -n FILE`) said of each: "" for accepted, else its word for the refusal.
// cmd's TestCrontabLintAgreesWithDebianCrontab asks the installed crontab(1) again.
var debianVerdicts = []struct {
	text, refused string
}{
	{"MAILTO=\n* * * * * true\n", "nothing after the ="}, // newer Debian's cron takes it: see debian12Only
	{"MAILTO=\"\"\n* * * * * true\n", ""},
	{"MAILTO=\"\" # no mail\n* * * * * true\n", "a # after the value starts no comment"},
	{"FOO=\"a\"b\n* * * * * true\n", "text after the closing"},
	{"FOO=\"ab\n* * * * * true\n", "never closed"},
	{"'FOO'=a\n* * * * * true\n", ""},
	{"\"FO=O\"=a\n* * * * * true\n", "quoted name holds an ="},
	{"FOO = bar baz \n* * * * * true\n", ""},
	{"FOO=\"a\" \n* * * * * true\n", ""},
	{"FOO\n* * * * * true\n", `"bad minute"`},
	{"* * * * * true", "missing newline before EOF"},
	{"FOO=bar", "missing newline before EOF"},
	{"* * * * * true\n# no newline after this comment", ""},
	{"* * * * * true\n   ", ""},
	{"", ""},
	{"@HOURLY true\n", `"bad time specifier"`},
	{"@every true\n", `"bad time specifier"`},
	{"@daily true\n@reboot true\n", ""},
	{"* * * * * * true\n", `"bad command"`},
	{"* * * * *\n", ""},
	{"5; * * * * true\n", ""},
	{"*x * * * * true\n", ""},
	{"5/10 * * * * true\n", `"bad minute"`},
	{"*/0 * * * * true\n", `"bad minute"`},
	{"1-5/10 * * * * true\n", ""},
	{"5-1 * * * * true\n", ""},
	{"0 0 * * mon-fri true\n", ""},
	{"0 0 * jan,FEB * true\n", ""},
	{"0 0 * * 7 true\n", ""},
	{"0 0 * * 8 true\n", `"bad day-of-week"`},
	{"0 0 * * sunday true\n", `"bad day-of-week"`},
	{"0 24 * * * true\n", `"bad hour"`},
	{"0 0 0 * * true\n", `"bad day-of-month"`},
	{"0 0 L * * true\n", `"bad day-of-month"`},
	{"1,,2 * * * * true\n", `"bad minute"`},
	{"0x5 * * * * true\n", `"bad minute"`},
	{"4294967301 * * * * true\n", ""}, // atoi wraps it to 5
	{"0 0 1 * true\n", `"bad day-of-week"`},
	{"* * * * * echo " + strings.Repeat("a", MaxCommand-5) + "\n", ""},
	{"* * * * * echo " + strings.Repeat("a", MaxCommand-4) + "\n", `"command too long"`},
	{"* * * * *    echo " + strings.Repeat("a", MaxCommand-5) + "\n", ""},
	{"* * * * * echo " + strings.Repeat("a", MaxCommand-5) + "   \n", `"command too long"`},
	{"FOO=\"" + strings.Repeat("b", maxEnvLine-6) + "\"\n* * * * * true\n", ""},
	{"FOO=\"" + strings.Repeat("b", maxEnvLine-5) + "\"\n* * * * * true\n", "never closed"},
	{"FOO=" + strings.Repeat("b", 1200) + "\n* * * * * true\n", ""},
	{strings.Repeat("* * * * * true\n", maxLines), ""},
	{strings.Repeat("* * * * * true\n", maxLines+1), `"crontab is too long"`},
}

// debian12Only reports whether a refused file is one that Debian's cron takes since
// its 2024 patches (MAILTO= with nothing after it): lint still reports it, for the
// Debian 12 machines of a fleet.
func debian12Only(text string) bool { return strings.HasPrefix(text, "MAILTO=\n") }

// TestDebianRefusal reads each file of debianVerdicts with lint (Debian's cron) and
// finds a refusal exactly where crontab(1) found one, worded with cron's own word. Where
// Debian's crontab(1) with -n (check only) is installed, it is asked too.
func TestDebianRefusal(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	crontab := exec.Command("crontab", "-n", empty).Run() == nil
	t.Logf("asking crontab -n too: %v", crontab)
	for i, tc := range debianVerdicts {
		lint := lintText(tc.text, Options{Cronlock: goldenCronlock})
		got := strings.Contains(lint, refusesFile)
		short := tc.text
		if len(short) > 60 {
			short = short[:60] + "…"
		}
		if crontab {
			f := filepath.Join(dir, fmt.Sprint(i))
			if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("crontab", "-n", f).CombinedOutput()
			if (err != nil) != (tc.refused != "") && !(err == nil && debian12Only(tc.text)) {
				t.Errorf("%q: the table says refused %v, crontab -n says %v: %s", short, tc.refused != "", err != nil, out)
			}
		}
		switch {
		case tc.refused == "" && got:
			t.Errorf("%q: crontab(1) accepts it, lint says\n%s", short, lint)
		case tc.refused != "" && (!got || !strings.Contains(lint, tc.refused)):
			t.Errorf("%q: crontab(1) refuses it (%s), lint says\n%s", short, tc.refused, lint)
		}
	}
}

// TestDebianSystemUser: a system line needs a user field that names a user, and a blank
// after it; in a system file the blanks after that one count in the command.
func TestDebianSystemUser(t *testing.T) {
	exists := func(u string) bool { return u == "root" }
	for _, tc := range []struct{ line, want string }{
		{"* * * * * root true", ""},
		{"* * * * * nobody-here true", `"bad username"`},
		{"* * * * * root", `"bad username"`},
		{"@daily root true", ""},
		{"* * * * * root " + strings.Repeat("a", MaxCommand), ""},
		{"* * * * * root  " + strings.Repeat("a", MaxCommand), `"command too long"`},
	} {
		l := Parse(tc.line+"\n", true)[0]
		got := DebianRefusal(&l, true, exists)
		if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%.40q: %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestWrapKeepsCommandsCronReads grows a command until its wrapped form no longer fits:
// the last one wrapped has a command of exactly MaxCommand bytes (in a system file,
// counted from the byte after the one blank that ends the user name), the next is left
// as it is with a note, and the rest of the file is still wrapped.
func TestWrapKeepsCommandsCronReads(t *testing.T) {
	for _, system := range []bool{false, true} {
		o := Options{Cronlock: goldenCronlock, System: system, User: "alice"}
		head := "* * * * * "
		if system {
			head = "* * * * * root  " // the second blank is part of the command
		}
		cmdStart := len(head)
		if system {
			cmdStart--
		}
		last := ""
		for n := 700; n < MaxCommand; n++ {
			line := head + "echo " + strings.Repeat("a", n)
			text := line + "\n" + head + "echo short\n"
			out, notes := wrapText(text, o)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if !strings.Contains(lines[1], " run --key ") {
				t.Fatalf("system %v: the short line was not wrapped:\n%s", system, out)
			}
			if lines[0] != line {
				last = lines[0]
				continue
			}
			if last == "" {
				t.Fatalf("system %v: a %d-byte command was not wrapped", system, n+5)
			}
			if got := len(last) - cmdStart; got != MaxCommand {
				t.Errorf("system %v: the longest wrapped command is %d bytes, want %d", system, got, MaxCommand)
			}
			if !strings.Contains(notes, "1: wrapped, the command would be 999 bytes") {
				t.Errorf("system %v: notes %q", system, notes)
			}
			for i, l := range Parse(out, system) {
				if r := DebianRefusal(&l, system, nil); r != "" {
					t.Errorf("system %v: line %d of the output is refused: %s", system, i+1, r)
				}
			}
			break
		}
	}
}

// TestBackground finds what starts a service or leaves work behind, and nothing in
// lines that only look alike (&&, 2>&1, quoted &, comments, a test of an init script).
func TestBackground(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"sleep 300 &", "with &"},
		{"sleep 300& echo x", "with &"},
		{"(cd /tmp && sleep 300 &)", "with &"},
		{"a >/dev/null 2>&1 &", "with &"},
		{"[ -x /etc/init.d/anacron ] && if [ ! -d /run/systemd/system ]; then /usr/sbin/invoke-rc.d anacron start >/dev/null; fi", "`/usr/sbin/invoke-rc.d anacron start`"},
		{"service nginx restart", "`service nginx restart`"},
		{"systemctl --no-block start foo.service", "`systemctl --no-block start foo.service`"},
		{"/etc/init.d/apache2 reload > /dev/null", "`/etc/init.d/apache2 reload`"},
		{"nohup ./worker.sh", "`nohup ./worker.sh`"},
		{"FOO=1 setsid worker", "`setsid worker`"},
		{"start-stop-daemon --start --background --exec /usr/bin/x", "`start-stop-daemon"},
		{"screen -dmS w ./w.sh", "`screen -dmS w ./w.sh`"},
		{"screen -d -m ./w.sh", "`screen -d -m ./w.sh`"},
		{"tmux new -d -s w ./w.sh", "`tmux new -d -s w ./w.sh`"},
		{"true && echo ok", ""},
		{"a 2>&1 | b", ""},
		{"a >&2; b &>/dev/null; c |& d", ""},
		{"echo 'a & b' \"c & d\" e\\&f", ""},
		{"echo x # sleep 300 &", ""},
		{"[ -x /etc/init.d/anacron ] && echo start", ""},
		{"systemctl status foo", ""},
		{"service nginx status", ""},
		{"screen -ls", ""},
		{"command -v debian-sa1 > /dev/null && debian-sa1 1 1", ""},
	} {
		got := background(tc.cmd)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// TestLintLooksInsideWrapped: a wrapped line still runs its command with cron's PATH,
// so lint names a relative command inside `SHELL -c 'LINE'` (or after --), and a line
// that went under cronlock though it leaves work in the background.
func TestLintLooksInsideWrapped(t *testing.T) {
	o := Options{Cronlock: goldenCronlock, System: true}
	for _, tc := range []struct{ line, want string }{
		{"*/5 * * * * www-data /usr/local/bin/cronlock run --key k --schedule '*/5 * * * *' -- /bin/sh -c 'php /usr/share/cacti/site/poller.php 2>&1 >/dev/null | cat'", `relative command "php"`},
		{"*/5 * * * * root /usr/local/bin/cronlock run --key k --schedule '*/5 * * * *' -- php x.php", `relative command "php"`},
		{"*/5 * * * * root /usr/local/bin/cronlock run --key k --schedule '*/5 * * * *' -- /bin/sh -c '/usr/bin/php x.php'", ""},
		{"*/5 * * * * root /usr/local/bin/cronlock run --key k --schedule '*/5 * * * *' -- /bin/sh -c 'sleep 300 &'", "leaves work in the background"},
	} {
		got := lintText(tc.line+"\n", o)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%q: lint %q, want %q", tc.line, got, tc.want)
		}
		if with := lintText("PATH=/usr/bin:/bin\n"+tc.line+"\n", o); strings.Contains(with, "relative command") {
			t.Errorf("%q under a PATH= line: %q", tc.line, with)
		}
	}
}

// TestDebianRefusalGenerated asks Debian's crontab(1) -n, where installed, about
// generated files (job lines from pieces of fields, env lines from pieces of names,
// quotes and values, descriptors, with and without a final newline) and checks that
// lint finds a refusal exactly where crontab(1) does. The seed is fixed, so a failure
// comes back.
func TestDebianRefusalGenerated(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "crontab")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if exec.Command("crontab", "-n", f).Run() != nil {
		t.Skip("no crontab(1) with -n (Debian 12's) to ask")
	}
	r := rand.New(rand.NewSource(1))
	pick := func(xs ...string) string { return xs[r.Intn(len(xs))] }
	field := func() string {
		var b strings.Builder
		for k := 1 + r.Intn(3); k > 0; k-- {
			b.WriteString(pick("*", "5", "0", "59", "60", "23", "24", "1", "31", "32", "12", "13", "7", "8", "-", "/", ",", "jan", "MON", "sun", "x", "L", "1-5", "*/2", "2-1", "/0", "00"))
		}
		return b.String()
	}
	for i := 0; i < 300; i++ {
		var b strings.Builder
		switch r.Intn(3) {
		case 0:
			b.WriteString(pick("", " ", "\t"))
			for k := 0; k < 5; k++ {
				b.WriteString(field() + pick(" ", "\t", "  "))
			}
			b.WriteString(pick("true", "*", "echo a &", "", " x", "%", "a=b c"))
		case 1:
			b.WriteString(pick("", " ") + pick("FOO", "'FOO'", `"F=O"`, `"FOO`, "F OO", "") + pick("=", " = ", "= ", "") +
				pick("", "a", `"a"`, "'a'", `"a`, `"a"b`, `"" # c`, "a b ", `"'a'"`, `'"`, `"`) + pick("", " ", "\t", "\r"))
		default:
			b.WriteString(pick("@daily", "@reboot", "@HOURLY", "@", "@ daily", "@yearly", "@every") + pick(" ", "\t", "") + pick("true", "", "*", "x y"))
		}
		b.WriteString("\n* * * * * true" + pick("\n", "", "\n# c", "\n  "))
		text := b.String()
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("crontab", "-n", f).CombinedOutput()
		lint := lintText(text, Options{Cronlock: goldenCronlock})
		if strings.Contains(lint, refusesFile) != (err != nil) {
			t.Errorf("%q: crontab -n refuses it: %v (%s); lint:\n%s", text, err != nil, bytes.TrimSpace(out), lint)
		}
	}
}

// TestLintUnsafeMailto: Debian's cron mails no one at a MAILTO it finds unsafe (a blank
// after a comma, a leading dash); lint says so, and not of addresses cron takes.
func TestLintUnsafeMailto(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{
		{"MAILTO=ops@example.com, dev@example.com", true},
		{"MAILTO=-oops", true},
		{`MAILFROM="cron <cron@example.com>"`, true},
		{"MAILTO=ops@example.com,dev@example.com", false},
		{"MAILTO=root", false},
		{`MAILTO=""`, false},
	} {
		lint := lintText(tc.env+"\n", Options{Cronlock: goldenCronlock})
		if got := strings.Contains(lint, "cron sends no mail"); got != tc.want {
			t.Errorf("%s: lint %q", tc.env, lint)
		}
	}
}
