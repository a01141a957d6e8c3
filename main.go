// Command cronlock runs a cron job while holding a lock, so that it never runs twice at
// once across a fleet, and keeps a history of every run. See README.md.
package main

import (
	"os"

	"cronlock/cmd"
)

func main() { os.Exit(cmd.Main()) }
