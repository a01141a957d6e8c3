//go:build race

package cmd

func init() { raceEnabled = true }
