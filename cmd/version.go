package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"cronlock/buildinfo"
)

// version and commit are stamped in by scripts/release.sh with
// -ldflags "-X cronlock/cmd.version=v0.3.1 -X cronlock/cmd.commit=<sha>"; without them
// the revision the Go toolchain recorded is shown (package buildinfo).
var version, commit string

// versionString is the one line of `cronlock version`, --version and check's -V.
func versionString() string { return buildinfo.Read(version, commit, etcdBuilt).String() }

// shortVersion is cronlock's version alone ("v0.3.1", "devel (0123456789ab)"), as the
// fleet's ledger records it with each claim.
func shortVersion() string { return buildinfo.Read(version, commit, etcdBuilt).Short() }

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cronlock's version, commit, Go version and whether etcd is built in",
		Example: `  cronlock version
  cronlock --version`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(stdout, versionString())
			return err
		},
	}
}
