package cmd

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X cronlock/cmd.version=v1.2.3"; without
// it, the module version or VCS revision recorded by the Go toolchain is shown.
var version = ""

func versionString() string {
	return fmt.Sprintf("cronlock %s %s %s/%s", shortVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// shortVersion is cronlock's version alone ("v1.2.3", "devel (0123456789ab)"), as the
// fleet's ledger records it with each claim.
func shortVersion() string {
	v := version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " (" + s.Value[:12] + ")"
				}
			}
		}
	}
	return v
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cronlock's version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(stdout, versionString())
			return err
		},
	}
}
