package crontab

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/*.golden")

const goldenCronlock = "/usr/local/bin/cronlock"

// wrapText wraps a whole file as `cronlock crontab wrap -` does, notes as NUM: text.
func wrapText(text string, o Options) (string, string) {
	out, notes := Wrap(Parse(text, o.System), o)
	s := strings.Join(out, "\n")
	if len(out) > 0 && strings.HasSuffix(text, "\n") {
		s += "\n"
	}
	var b strings.Builder
	for _, n := range notes {
		fmt.Fprintf(&b, "%d: %s\n", n.Line, n.Msg)
	}
	return s, b.String()
}

func lintText(text string, o Options) string {
	var b strings.Builder
	for _, f := range Lint(Parse(text, o.System), o) {
		fmt.Fprintf(&b, "%d: %s\n", f.Line, f.Msg)
	}
	return b.String()
}

// TestGolden wraps and lints each testdata/*.crontab, for Debian's cron and for cronie,
// and compares with testdata/NAME.golden; wrapping the wrapped file again must change
// nothing and leave lint nothing to say about unwrapped lines.
func TestGolden(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/*.crontab")
	if len(inputs) == 0 {
		t.Fatal("no testdata/*.crontab")
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".crontab")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			system := strings.HasPrefix(name, "system_")
			ar := &txtar.Archive{Comment: []byte("wrap and lint of " + filepath.Base(in) + "; regenerate with go test ./crontab -run Golden -update\n")}
			for _, daemon := range []string{"debian", "cronie"} {
				o := Options{Cronlock: goldenCronlock, System: system, Local: system, CronTZ: daemon == "cronie"}
				wrapped, notes := wrapText(text, o)
				lint := lintText(text, o)
				// Lint of the wrapped file: what wrapping leaves to fix (a relative command
				// inside the wrapped line still runs with cron's PATH).
				ar.Files = append(ar.Files,
					txtar.File{Name: daemon + ".wrap", Data: []byte(wrapped)},
					txtar.File{Name: daemon + ".notes", Data: []byte(notes)},
					txtar.File{Name: daemon + ".lint", Data: []byte(lint)},
					txtar.File{Name: daemon + ".lint-wrapped", Data: []byte(lintText(wrapped, o))})

				again, _ := wrapText(wrapped, o)
				if again != wrapped {
					t.Errorf("%s: wrapping the wrapped file changed it:\n%s", daemon, Diff(name, strings.Split(wrapped, "\n"), strings.Split(again, "\n"), false))
				}
				if l := lintText(wrapped, o); strings.Contains(l, "would put it in front") {
					t.Errorf("%s: lint of the wrapped file still finds unwrapped lines:\n%s", daemon, l)
				}
			}
			golden := filepath.Join("testdata", name+".golden")
			got := txtar.Format(ar)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./crontab -run Golden -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs from what wrap and lint give now (go test ./crontab -run Golden -update, then read the diff):\n%s", golden, got)
			}
		})
	}
}
