package cmd

import (
	"os"

	"github.com/spf13/cobra"
)

// Command is cronlock's whole command tree, for the man page generator
// (scripts/mangen), which renders it at release time so that the binary itself links no
// documentation code.
func Command() *cobra.Command { return newRootCmd(os.Stdout, os.Stderr) }
