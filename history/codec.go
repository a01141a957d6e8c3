package history

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"cronlock/procfs"
	"cronlock/runstatus"
)

// runColumns are the columns of runs, in the order of rowArgs and scanRun.
const runColumns = `id, key, node, pid, command, status, exit_code, signal, started_at,
	finished_at, error, holder, fencing_token, backend, attempt, boot_id, pid_start, exit,
	scheduled_for, first_try, try, tick_attempt, takeover_of`

// runValues is the placeholder list for runColumns.
const runValues = `(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// selfStart is when this process started (procfs.Stat.StartTime), read once; 0 when
// /proc cannot tell.
var selfStart = sync.OnceValue(func() uint64 {
	st, _ := procfs.ReadStat(os.Getpid())
	return st.StartTime
})

// prepare fills in defaults and checks what would otherwise corrupt a row or a path.
func prepare(r *Run) error {
	if r.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("history: new run id: %w", err)
		}
		r.ID = id.String()
	}
	// The id names a file in the runs folder: keep it to UUID characters.
	for _, c := range r.ID {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-') || len(r.ID) > 64 {
			return fmt.Errorf("history: invalid run id %q", r.ID)
		}
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now()
	}
	if r.Attempt < 1 {
		r.Attempt = 1
	}
	if r.Try < 1 {
		r.Try = 1
	}
	if r.RunID == "" {
		r.RunID = r.ID // a run of one try, or the first try of a run: stored as NULL
	}
	// A row of this very process names this boot and this process's start, so that Reap
	// never mistakes a later process with the same pid for it.
	if r.PID == os.Getpid() {
		if r.BootID == nil {
			r.BootID = procfs.BootID()
		}
		if r.PIDStart == 0 {
			r.PIDStart = selfStart()
		}
	}
	if r.Status != "" && !runstatus.Valid(r.Status) {
		return fmt.Errorf("history: run %s: unknown status %q", r.ID, r.Status)
	}
	if r.Status == "" && r.FinishedAt.IsZero() {
		r.Status = runstatus.Running
	}
	if r.Status == "" {
		return fmt.Errorf("history: run %s: no status", r.ID)
	}
	return nil
}

func rowArgs(r *Run) []any {
	var exit, fin, cronExit, sched, runID any
	if r.RunID != "" && r.RunID != r.ID {
		runID = r.RunID
	}
	var tickAttempt any
	if !r.ScheduledFor.IsZero() {
		sched = r.ScheduledFor.UnixNano()
		tickAttempt = int64(max(r.TickAttempt, 1))
	}
	if r.ExitCode != nil {
		exit = int64(*r.ExitCode)
	}
	if r.Exit != nil {
		cronExit = int64(*r.Exit)
	}
	if !r.FinishedAt.IsZero() {
		fin = r.FinishedAt.UnixNano()
	}
	return []any{r.ID, r.Key, r.Node, int64(r.PID), encodeArgv(r.Command), r.Status, exit, r.Signal,
		r.StartedAt.UnixNano(), fin, r.Error, r.Holder,
		int64(r.FencingToken), // bit for bit: database/sql refuses uint64 ≥ 2^63
		r.Backend, int64(r.Attempt), nonNil(r.BootID), int64(r.PIDStart), cronExit, sched,
		runID, int64(max(r.Try, 1)), tickAttempt, r.TakeoverOf}
}

// nonNil keeps NOT NULL blob columns from receiving NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// encodeSegments stores segments as pairs of uvarints (stream, length).
func encodeSegments(segs []Segment) []byte {
	b := []byte{}
	for _, sg := range segs {
		b = binary.AppendUvarint(b, uint64(sg.Stream))
		b = binary.AppendUvarint(b, uint64(sg.Len))
	}
	return b
}

// decodeSegments reads what encodeSegments wrote. Segments that run past total bytes, or
// bytes of a damaged list, are dropped: the tail then shows as unmarked from there on.
func decodeSegments(b []byte, total int) []Segment {
	var segs []Segment
	sum := 0
	for len(b) > 0 {
		st, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		ln, m := binary.Uvarint(b[n:])
		if m <= 0 || ln > uint64(total-sum) {
			break
		}
		b = b[n+m:]
		segs = append(segs, Segment{Stream: Stream(st), Len: int(ln)})
		sum += int(ln)
	}
	return segs
}

// encodeArgv stores argv binary-safe: every argument followed by a NUL byte, which no
// argument of exec can contain. JSON would turn invalid UTF-8 into U+FFFD.
func encodeArgv(argv []string) []byte {
	var b []byte
	for _, a := range argv {
		b = append(append(b, a...), 0)
	}
	if b == nil {
		b = []byte{} // NOT NULL
	}
	return b
}

func decodeArgv(b []byte) []string {
	argv := []string{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			argv = append(argv, string(b)) // a row written by hand without the final NUL
			break
		}
		argv = append(argv, string(b[:i]))
		b = b[i+1:]
	}
	return argv
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner, extra ...any) (Run, error) {
	var (
		r         Run
		pid       int64
		cmd       []byte
		exit, fin sql.NullInt64
		cronExit  sql.NullInt64
		sched     sql.NullInt64
		runID     sql.NullString
		try       int64
		tickAtt   sql.NullInt64
		started   int64
		token     int64
		attempt   int64
		pidStart  int64
	)
	dest := append([]any{&r.ID, &r.Key, &r.Node, &pid, &cmd, &r.Status, &exit, &r.Signal,
		&started, &fin, &r.Error, &r.Holder, &token, &r.Backend, &attempt, &r.BootID, &pidStart, &cronExit, &sched,
		&runID, &try, &tickAtt, &r.TakeoverOf}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	r.PID = int(pid)
	r.Command = decodeArgv(cmd)
	if exit.Valid {
		c := int(exit.Int64)
		r.ExitCode = &c
	}
	if cronExit.Valid {
		c := int(cronExit.Int64)
		r.Exit = &c
	}
	if sched.Valid {
		r.ScheduledFor = time.Unix(0, sched.Int64).UTC()
	}
	r.StartedAt = time.Unix(0, started)
	if fin.Valid {
		r.FinishedAt = time.Unix(0, fin.Int64)
	}
	r.FencingToken = uint64(token)
	r.Attempt = int(attempt)
	r.Try = max(int(try), 1)
	r.TickAttempt = int(tickAtt.Int64)
	r.RunID = r.ID
	if runID.Valid && runID.String != "" {
		r.RunID = runID.String
	}
	r.PIDStart = uint64(pidStart)
	if len(r.BootID) == 0 {
		r.BootID = nil
	}
	return r, nil
}
