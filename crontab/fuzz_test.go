package crontab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzWrap: any text, in either format and for either daemon, wraps without a panic into
// as many lines as it had, wrapping the result again changes nothing, and lint (its next
// ticks too, before and after wrapping) and Diff take it too.
func FuzzWrap(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*.crontab")
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), strings.HasPrefix(filepath.Base(in), "system_"), false)
	}
	f.Add("CRON_TZ=UTC\n@daily a%b\n* * * * * 'x\n", false, true)
	f.Fuzz(func(t *testing.T, text string, system, cronTZ bool) {
		o := Options{Cronlock: goldenCronlock, System: system, Local: system, CronTZ: cronTZ}
		lines := Parse(text, system)
		out, _ := Wrap(lines, o)
		if len(out) != len(lines) {
			t.Fatalf("%d lines became %d", len(lines), len(out))
		}
		wrapped, _ := wrapText(text, o)
		again, _ := wrapText(wrapped, o)
		if again != wrapped {
			t.Fatalf("wrapping twice changed the text:\n%q\n%q", wrapped, again)
		}
		Lint(lines, o)
		NextTicks(lines, o, time.Date(2026, 3, 29, 0, 10, 0, 0, time.UTC))
		NextTicks(Parse(wrapped, system), o, time.Date(2026, 10, 25, 0, 10, 0, 0, time.UTC))
		old := make([]string, len(lines))
		for i := range lines {
			old[i] = lines[i].Text
		}
		Diff("f", old, out, false)
	})
}
