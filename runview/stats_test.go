package runview

import (
	"strings"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/runstatus"
)

// TestSparklineMarks: without colour, a run with no duration to draw (abandoned) is x, a
// running one ?, an interrupted one !, right-aligned in history.RecentRuns cells.
// TestHistoryStatsSparkline (cmd) shows the bars and colours through the command.
func TestSparklineMarks(t *testing.T) {
	if got := Sparkline([]history.Outcome{{Status: runstatus.Abandoned}, {Status: runstatus.Running},
		{Status: runstatus.Interrupted, Duration: time.Second, Finished: true}}, false); got != strings.Repeat(" ", 17)+"x?!" {
		t.Errorf("marks: %q", got)
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want string
	}{
		{849600 * time.Microsecond, "850ms"},
		{12345 * time.Millisecond, "12.3s"},
		{245400 * time.Millisecond, "4m5s"},
	} {
		if got := Duration(c.in); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
