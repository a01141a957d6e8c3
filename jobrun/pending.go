package jobrun

import (
	"context"
	"errors"
	"strconv"

	"cronlock/history"
	"cronlock/lockrun"
)

// Completions that never reached the fleet's record: a run
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
		r.pendingSeen = true
	default:
		return nil
	}
	if len(ps) == 0 {
		return nil
	}
	pl.SetPending(toLockrun(ps))
	return ps
}

func toLockrun(ps []history.PendingCompletion) []lockrun.PendingCompletion {
	out := make([]lockrun.PendingCompletion, len(ps))
	for i, p := range ps {
		out[i] = lockrun.PendingCompletion{Key: p.Key, RunID: p.RunID, Entry: p.Entry, StartUS: p.StartUS, EndUS: p.EndUS}
	}
	return out
}

// pendingSender is a backend that delivers kept completions on their own.
type pendingSender interface {
	SendPending(ctx context.Context, key string, ps []lockrun.PendingCompletion) error
}

// sendLatePending delivers the kept completions that were read too late for the release
// (a run shorter than the history's opening): one round trip, only when there are any,
// after the run's own rows are written. Delivered, they are forgotten.
func (r *runner) sendLatePending() {
	if r.pendingRead == nil || r.pendingSeen {
		return
	}
	var ps []history.PendingCompletion
	select {
	case ps = <-r.pendingRead: // the recorder has ended: its answer is there, or none will come
	default:
	}
	ps2 := ps[:0:0]
	for _, p := range ps {
		if p.RunID != r.runID { // this run's own, kept just now, goes with a later run
			ps2 = append(ps2, p)
		}
	}
	ps = ps2
	sender, ok := r.locker.(pendingSender)
	if len(ps) == 0 || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.o.OpTimeout)
	err := sender.SendPending(ctx, r.o.Key, toLockrun(ps))
	cancel()
	if err != nil {
		return // kept: a later run sends them again
	}
	st, err := history.Open(r.histPath)
	if err != nil {
		return // sent again later, which is harmless
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.RunID
	}
	st.DropPending(r.o.Key, ids)
	// Not closed, as the recorder's store is not: closing checkpoints the WAL.
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
	end := r.releaseAt
	if end.IsZero() {
		end = wallNow()
	}
	p := history.PendingCompletion{Key: r.o.Key, RunID: r.runID, Entry: lockrun.EncodeFleetEntry(rec, lease.FencingToken()),
		StartUS: pl.AcquiredUS(), EndUS: strconv.FormatInt(end.UnixMicro(), 10)}
	r.pendingKept = true
	r.rec.do(func(s *history.Store) error { return s.AddPending(p) })
}
