package history

import (
	"encoding/json"
	"syscall"
)

func syscallUmask(m int) int { return syscall.Umask(m) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
