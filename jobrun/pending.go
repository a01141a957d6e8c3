package jobrun

import (
	"errors"
	"strconv"

	"cronlock/history"
	"cronlock/lockrun"
)

// Completions that never reached the fleet's record (SPEC §10, issue 20 item 17): a run
// whose release, and the retry of its completion after it, got no answer (a failover, a
// stalled server) keeps its completed entry in the local history; the next run of the
// same key on this host sends it inside its own release script, at no extra round trip.
// A short run may end before its history is open: it sends nothing then, and a later run
// does.

// pendingPerRelease bounds the completions one release carries.
const pendingPerRelease = 8

// pendingLease is a lease whose release can carry earlier runs' completions.
type pendingLease interface {
	SetPending([]lockrun.PendingCompletion)
	AcquiredUS() string
}

// readPending asks the recorder for this key's kept completions, ahead of the run's
// other history writes, when the backend keeps a fleet record.
func (r *runner) readPending() {
	if r.rec == nil {
		return
	}
	if _, ok := r.locker.(lockrun.FleetStore); !ok {
		return
	}
	ch := make(chan []history.PendingCompletion, 1)
	r.pendingRead = ch
	key := r.o.Key
	r.rec.do(func(s *history.Store) error {
		p, _ := s.Pending(key, pendingPerRelease) // an error: the next run reads again
		ch <- p
		return nil
	})
}

// sendPending gives the release the kept completions if they have been read by now
// (never waiting for the history); it returns the ones it gave.
func (r *runner) sendPending(lease lockrun.Lease) []history.PendingCompletion {
	pl, ok := lease.(pendingLease)
	if !ok || r.pendingRead == nil {
		return nil
	}
	var ps []history.PendingCompletion
	select {
	case ps = <-r.pendingRead:
	default:
		return nil
	}
	if len(ps) == 0 {
		return nil
	}
	out := make([]lockrun.PendingCompletion, len(ps))
	for i, p := range ps {
		out[i] = lockrun.PendingCompletion{Key: p.Key, RunID: p.RunID, Entry: p.Entry, StartUS: p.StartUS, EndUS: p.EndUS}
	}
	pl.SetPending(out)
	return ps
}

// settlePending forgets the completions the release delivered, and keeps this run's own
// when neither its release nor the retry after it reached the backend.
func (r *runner) settlePending(lease lockrun.Lease, rec *lockrun.RunRecord, sent []history.PendingCompletion, relErr, ferr error) {
	delivered := relErr == nil || errors.Is(relErr, lockrun.ErrLockLost)
	if len(sent) > 0 && delivered && lease.RecordErr() == nil {
		ids := make([]string, len(sent))
		for i, p := range sent {
			ids[i] = p.RunID
		}
		key := r.o.Key
		r.rec.do(func(s *history.Store) error {
			s.DropPending(key, ids) // an error: sent again by the next run, which is harmless
			return nil
		})
	}
	pl, ok := lease.(pendingLease)
	if ferr == nil || !ok || r.rec == nil || lockrun.IsRefusal(ferr) {
		return // delivered, or refused by the server: sending it again would not help
	}
	p := history.PendingCompletion{Key: r.o.Key, RunID: r.runID, Entry: lockrun.EncodeFleetEntry(rec, lease.FencingToken()),
		StartUS: pl.AcquiredUS(), EndUS: strconv.FormatInt(wallNow().UnixMicro(), 10)}
	r.pendingKept = true
	r.rec.do(func(s *history.Store) error { return s.AddPending(p) })
}
