package cmd

import "cronlock/history"

// historyPath resolves the history file: --history, CRONLOCK_HISTORY (environment or
// config file), then the per-user default. "" with nil error means recording is off.
func historyPath(flag string) (string, error) {
	if flag == "off" {
		return "", nil
	}
	if flag == "" {
		return history.DefaultPath()
	}
	return flag, nil
}
