package settings

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
)

// Entry is one setting in force, as `cronlock config` shows it.
type Entry struct {
	Name   string
	Value  string // masked where it holds a secret
	Origin Origin
}

// Write prints entries as git config --show-origin does, the origin first and NAME=value
// after it (a line that can be pasted into the config file), or with asJSON one object
// per line: {"name", "value", "origin", and "file", "line" or "flag" where they apply}.
func Write(w io.Writer, entries []Entry, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, e := range entries {
			v := struct {
				Name   string `json:"name"`
				Value  string `json:"value"`
				Origin Kind   `json:"origin"`
				File   string `json:"file,omitempty"`
				Line   int    `json:"line,omitempty"`
				Flag   string `json:"flag,omitempty"`
			}{e.Name, e.Value, e.Origin.Kind, e.Origin.Path, e.Origin.Line, e.Origin.Flag}
			if v.Origin == "" {
				v.Origin = Default
			}
			if v.Flag != "" {
				v.Flag = "--" + v.Flag
			}
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s=%s\n", e.Origin, e.Name, e.Value)
	}
	return tw.Flush()
}

// MaskPingURL hides what makes a ping URL a secret: its path (Healthchecks' check UUID
// or project ping key), its user info and its query, but for {key} and ?create=1, which
// say how the URL is built. A URL that does not parse is hidden whole.
func MaskPingURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "xxxxx"
	}
	out := u.Scheme + "://"
	if u.User != nil {
		out += "xxxxx@"
	}
	out += u.Host
	for _, seg := range strings.Split(strings.TrimPrefix(u.Path, "/"), "/") {
		if seg == "" {
			continue
		}
		if seg != "{key}" {
			seg = "xxxxx"
		}
		out += "/" + seg
	}
	switch {
	case u.RawQuery == "create=1":
		out += "?create=1"
	case u.RawQuery != "":
		out += "?xxxxx"
	}
	return out
}
