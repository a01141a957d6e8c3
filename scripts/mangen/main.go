// Command mangen writes cronlock's man pages: cronlock(1) and one page per command,
// rendered from the cobra commands by cobra's doc package, with EXIT STATUS,
// ENVIRONMENT and FILES sections added, and cronlock.conf(5), whose settings list is
// filled in from the settings package. scripts/release.sh runs it; it is a build step,
// so cronlock itself links none of it.
//
//	go run -tags etcd ./scripts/mangen -out DIR [-date 2026-12-02] [-version v0.3.1]
//
// Run it with the etcd tag, so that the etcd flags are documented (they work only in
// cronlock-etcd, as the pages say).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"cronlock/cmd"
)

func main() {
	out := flag.String("out", "", "folder to write the pages into (created)")
	date := flag.String("date", "", "the pages' date, YYYY-MM-DD (default: today, UTC; release.sh gives the commit's)")
	version := flag.String("version", "", "the version the pages name (default: none)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mangen -out DIR [-date YYYY-MM-DD] [-version v0.3.1]")
		os.Exit(2)
	}
	day := time.Now().UTC()
	if *date != "" {
		d, err := time.Parse("2006-01-02", *date)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mangen: -date %q: want YYYY-MM-DD\n", *date)
			os.Exit(2)
		}
		day = d
	}
	if err := generate(*out, day, *version); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
}

// generate writes every page into dir.
func generate(dir string, day time.Time, version string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := cmd.Command()
	root.DisableAutoGenTag = true
	source := strings.TrimSpace("cronlock " + version)
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
				continue
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		c.DisableAutoGenTag = true
		var b bytes.Buffer
		h := &doc.GenManHeader{Title: strings.ToUpper(strings.ReplaceAll(c.CommandPath(), " ", "-")), Section: "1",
			Date: &day, Source: source, Manual: "cronlock manual"}
		if err := doc.GenMan(c, h, &b); err != nil {
			return fmt.Errorf("%s: %w", c.CommandPath(), err)
		}
		page := addSections(b.String(), sectionsFor(c.CommandPath()))
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		return os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644)
	}
	if err := walk(root); err != nil {
		return err
	}
	conf := confPage(day, source)
	return os.WriteFile(filepath.Join(dir, "cronlock.conf.5"), []byte(conf), 0o644)
}

// command is cronlock's command tree, built afresh for each use.
func command() *cobra.Command { return cmd.Command() }

// addSections puts the roff text extra before the page's SEE ALSO section (at the end
// when it has none), where man-pages(7) orders EXIT STATUS, ENVIRONMENT and FILES.
func addSections(page, extra string) string {
	if extra == "" {
		return page
	}
	if i := strings.Index(page, "\n.SH SEE ALSO"); i >= 0 {
		return page[:i+1] + extra + page[i+1:]
	}
	return page + extra
}
