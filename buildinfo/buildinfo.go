// Package buildinfo says which cronlock this binary is: the release version stamped in by
// scripts/release.sh (-ldflags -X), else what the Go toolchain recorded about the build
// (the VCS revision and whether the tree had uncommitted changes), the Go version and
// whether the etcd backend is built in. A fleet's sysadmin compares these lines across
// hosts, and the fleet's ledger records the short form with each claim.
//
// It reads nothing but the binary itself: no file, no network, no git.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info describes one build.
type Info struct {
	// Version is the release tag ("v0.3.1"); "" for a build that release.sh did not make.
	Version string
	// Commit is the full VCS revision; "" when the build recorded none (go build
	// -buildvcs=false, a tree outside git).
	Commit string
	// Modified says the tree had uncommitted changes when it was built.
	Modified bool
	// GoVersion and Platform are the toolchain ("go1.26.8") and "GOOS/GOARCH".
	GoVersion, Platform string
	// Etcd says the etcd backend is built in (the etcd build tag).
	Etcd bool
}

// Read describes this binary. version and commit are the values stamped in with
// -ldflags -X ("" when not stamped); a commit that was not stamped comes from the build
// info the toolchain embeds (vcs.revision, vcs.modified).
func Read(version, commit string, etcd bool) Info {
	var settings []debug.BuildSetting
	// A stamped release needs nothing more (every run records the version: parse no
	// more than it must).
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			settings = bi.Settings
		}
	}
	return FromSettings(version, commit, etcd, settings)
}

// FromSettings is Read with the toolchain's build settings given, for tests.
func FromSettings(version, commit string, etcd bool, settings []debug.BuildSetting) Info {
	in := Info{Version: version, Commit: commit, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Etcd: etcd}
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			if in.Commit == "" {
				in.Commit = s.Value
			}
		case "vcs.modified":
			// Only when the commit is the toolchain's: a stamped release names its tag's
			// commit, and release.sh refuses a modified tree.
			in.Modified = s.Value == "true" && commit == ""
		}
	}
	return in
}

// Short is the version alone, as the fleet's ledger records it: "v0.3.1", or for a
// build that release.sh did not make "devel (0123456789ab)", "devel (0123456789ab,
// modified)", or "devel" when nothing was recorded.
func (in Info) Short() string {
	if in.Version != "" {
		return in.Version
	}
	switch {
	case in.Commit == "":
		return "devel"
	case in.Modified:
		return "devel (" + abbrev(in.Commit) + ", modified)"
	}
	return "devel (" + abbrev(in.Commit) + ")"
}

// String is the one line `cronlock version` prints:
// "cronlock v0.3.1 (commit 0123456789ab, go1.26.8, linux/amd64, etcd backend: no)".
// One line, so that a monitoring plugin's -V and a fleet-wide ssh loop read it whole.
func (in Info) String() string {
	commit := "unknown"
	if in.Commit != "" {
		commit = abbrev(in.Commit)
		if in.Modified {
			commit += "+modified"
		}
	}
	etcd := "no"
	if in.Etcd {
		etcd = "yes"
	}
	version := in.Version
	if version == "" {
		version = "devel"
	}
	return fmt.Sprintf("cronlock %s (commit %s, %s, %s, etcd backend: %s)", version, commit, in.GoVersion, in.Platform, etcd)
}

// abbrev shortens a revision to the 12 characters git shows and people paste.
func abbrev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
