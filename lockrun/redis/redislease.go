package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"cronlock/lockrun"
)

// redisLease is a held Redis lock.
type redisLease struct {
	l        *Locker
	key      string
	token    string
	ttl      time.Duration
	minHold  time.Duration
	fence    uint64
	sent     time.Duration // the clock just before the acquire that took it was sent
	replied  time.Duration // the same clock when the acquire's reply came
	runID    string
	ticked   bool        // the acquire claimed a schedule tick
	giveBack atomic.Bool // Release gives the tick back (GiveBackTick)
	renewed  atomic.Bool // Renew was called: Release may be on a connection made before a failover

	acquiredUS string // Redis TIME at acquire, µs: the run's start in the fleet's record
	attempt    int    // the tick's attempt this run is (0 = 1); takeoverOf the run it took over
	takeoverOf string
	marks      lockrun.FleetEntry // what the claim found (acquire.lua's marks), for the entry
	record     *lockrun.RunRecord // written by Release (SetRecord)
	endUS      string             // Redis TIME at Release, µs; "" before it answered
	recordErr  error              // why Release could not write record
	claimErr   error              // why the acquire could not write the claim's entry
	pending    []lockrun.PendingCompletion
	// unconfirmed: through Sentinel, no majority named the master before the release
	// (confirmMaster): its ledger writes may be lost when the deployment heals.
	unconfirmed bool
	// noAck: the release sends no WAIT (a shortfall's: the replicas are known not to
	// answer, and the tick's waiters must see it given back within its pending window).
	noAck bool
}

// AcquiredUS is Redis TIME when the lock was taken, in µs (the entry's "a").
func (s *redisLease) AcquiredUS() string { return s.acquiredUS }

// SetPending gives Release earlier runs' completions that never reached the server
// (lockrun.PendingCompletion): they travel in the release's own script.
func (s *redisLease) SetPending(p []lockrun.PendingCompletion) { s.pending = p }

// SetRecord makes Release write rec to the fleet's record in its own script: the run's
// entry costs no round trip. Call it before Release, from the goroutine that calls it.
func (s *redisLease) SetRecord(rec *lockrun.RunRecord) { s.record = rec }

// RecordErr is why Release could not write the record given to SetRecord; nil when it
// was written or none was given.
func (s *redisLease) RecordErr() error {
	if s.claimErr != nil {
		return s.claimErr
	}
	return s.recordErr
}

// WriteRecord writes rec to the fleet's record now, in one round trip of its own: for a
// run whose outcome was not final when it let the lock go. Its end is the release's time
// on the server (or now, when the release got no answer).
// After a release whose master no majority of the Sentinels named, it asks them again, and
// a write they still do not confirm is reported unacknowledged (kept for a later run).
func (s *redisLease) WriteRecord(ctx context.Context, rec *lockrun.RunRecord) error {
	if s.unconfirmed {
		s.unconfirmed = !s.l.srv.ConfirmMaster(ctx, 0)
	}
	err := s.l.appendEntry(ctx, s.key, lockrun.EncodeFleetEntry(s.withMarks(rec), s.fence), s.acquiredUS, s.endUS, s.runID)
	if err == nil && s.unconfirmed {
		return &masterUnconfirmedError{key: s.key}
	}
	return err
}

// GiveBackTick makes Release give the tick back and ignore MinHold: the job never started.
func (s *redisLease) GiveBackTick() { s.giveBack.Store(true) }

// FencingToken is max(stored counter + 1, Redis time in µs) at acquisition.
func (s *redisLease) FencingToken() uint64 { return s.fence }

// TTL is the lease length.
func (s *redisLease) TTL() time.Duration { return s.ttl }

// Sent is when the acquire script that took the lock was sent (its first try).
func (s *redisLease) Sent() time.Duration { return s.sent }

// Renew extends the lease by TTL from now, within ctx's deadline and one operation
// time-out. It returns an error wrapping ErrLockLost when the lock is gone or not ours
// (the key is never re-created), and another error when the outcome is unknown.
func (s *redisLease) Renew(ctx context.Context) error {
	s.renewed.Store(true)
	limit := s.l.timeout
	if d, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(d))
	}
	// Through Sentinel, the Sentinels are asked beside the renewal whether the server it
	// goes to is still the master (conn.Client.StartVote); they decide once it is answered.
	vote := s.l.srv.StartVote(ctx)
	res, acks, _, err := s.l.evalAcked(ctx, false, renewScript(), []string{s.l.lockKey(s.key)}, s.token, durMS(s.ttl))
	if err != nil && limit < s.l.timeout && lockrun.IsTimeout(err) && s.l.unreachable() == nil {
		// Cut short by the lease, not by --redis-timeout: raising that would not help.
		return &redisError{err: err, msg: fmt.Sprintf("renew lock %s: %s did not answer within the %s the lease left this try (a renewal is cut short so that the job is stopped while the lease is still ours): the server is stalled or unreachable, or its round trip is too slow for --ttl %s; check the server, or raise --ttl if the network is slow",
			s.key, s.l.target.Server(), limit.Round(time.Millisecond), s.ttl)}
	}
	if err != nil {
		return s.l.userError("renew lock "+s.key, err)
	}
	if n, _ := res.(int64); n == 2 {
		return fmt.Errorf("renew lock %s: cronlock unlock --force revoked it: %w", s.key, lockrun.ErrLockLost)
	} else if n != 1 {
		return fmt.Errorf("renew lock %s: it expired or was taken over: %w", s.key, lockrun.ErrLockLost)
	}
	if vote != nil {
		if err := vote.Confirm(s.key); err != nil {
			return err
		}
	}
	return s.l.renewAcks(s.key, acks)
}

// Release deletes the lock if it is still ours and announces it to waiters; with MinHold it
// keeps the lock until MinHold after acquisition instead. It returns an error wrapping
// ErrLockLost when the lock was no longer ours (nothing is removed then).
func (s *redisLease) Release(ctx context.Context) error {
	minHold, giveBack := s.minHold, s.ticked && s.giveBack.Load()
	if giveBack {
		minHold = 0 // the next host is to run the tick now, not be held off
	}
	a := releaseArgs{minHold: minHold, runID: s.runID, giveBack: giveBack, pending: s.pending, sentUS: s.sentUS()}
	if s.record != nil && s.acquiredUS != "" {
		a.entry, a.startUS = lockrun.EncodeFleetEntry(s.withMarks(s.record), s.fence), s.acquiredUS
	}
	fresh := releaseFresh
	if s.renewed.Load() {
		fresh = 0
	}
	s.unconfirmed = !s.l.srv.ConfirmMaster(ctx, fresh)
	a.noAck = s.noAck
	res, acks, err := s.l.releaseAcked(ctx, s.key, s.token, a)
	if err != nil {
		return s.l.userError("release lock "+s.key, err)
	}
	if acks.n >= 0 && acks.n < int64(s.l.minReplicas) {
		s.recordErr = s.l.unackedRecord(s.key, acks)
	}
	if s.unconfirmed && s.recordErr == nil && (a.entry != "" || len(a.pending) > 0) {
		s.recordErr = &masterUnconfirmedError{key: s.key}
	}
	r, _ := res.([]any)
	if len(r) == 0 {
		return fmt.Errorf("release lock %s: unexpected reply %v from %s", s.key, res, s.l.target.Server())
	}
	if len(r) > 3 {
		s.endUS, _ = r[2].(string)
		if e, _ := r[3].(string); e != "" && s.recordErr == nil {
			s.recordErr = &recordRefusedError{key: s.key, server: s.l.target.Server(), reply: e}
		}
	}
	if code, _ := r[0].(int64); code == 0 {
		s.endUS = earlierUS(s.endUS, a.sentUS) // for WriteRecord, as release.lua did
		return fmt.Errorf("release lock %s: it had already expired or been taken over: %w", s.key, lockrun.ErrLockLost)
	}
	return nil
}

// withMarks is rec with what the claim found (a data loss, a schedule change) copied in,
// so that the run's entry in the fleet's record carries them.
func (s *redisLease) withMarks(rec *lockrun.RunRecord) *lockrun.RunRecord {
	r := *rec
	r.DataLoss = r.DataLoss || s.marks.DataLoss
	r.ScheduleWas, r.Flip = s.marks.ScheduleWas, s.marks.Flip
	return &r
}

// TickAttempt is the tick's attempt this run is, and the lost run it took over.
func (le *redisLease) TickAttempt() (int, string) { return max(le.attempt, 1), le.takeoverOf }

// sentUS is now on the Redis clock, measured from the acquire: its Redis TIME plus the
// time since its reply came ("" when the acquire sent no time). It is at most the
// server's time when the release is sent (the acquire ran before its reply came), so a
// run whose lock is gone when a late release arrives (a paused or stalled server, a slow
// link: the lock expired and another run took it meanwhile) ends in the fleet's record
// before that run started, not at the late arrival, which would read as DUPLICATE.
func (s *redisLease) sentUS() string {
	a, err := strconv.ParseInt(s.acquiredUS, 10, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(a+int64(lockrun.ClockOr(s.l.now)()-s.replied)/int64(time.Microsecond), 10)
}

// earlierUS is the earlier of two decimal µs times; an empty or bad one loses.
func earlierUS(a, b string) string {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errB != nil:
		return a
	case errA != nil || y < x:
		return b
	}
	return a
}

// releaseFresh is how old the Sentinels' last answer may be for a release to trust it
// (conn.Client.ConfirmMaster).
const releaseFresh = time.Second

// masterUnconfirmedError says that a ledger write through Sentinel went to a server that
// no majority of the Sentinels named: it may be lost once the deployment heals.
type masterUnconfirmedError struct{ key string }

func (e *masterUnconfirmedError) Error() string {
	return fmt.Sprintf("record the run of %s in the fleet's record: no majority of the Sentinels named the master it was written to (a partition may have cut this host off from them); it is sent again by this host's next run", e.key)
}

// Unwrap makes it an unacknowledged write (lockrun.ErrUnacknowledged): kept and sent again.
func (e *masterUnconfirmedError) Unwrap() error { return lockrun.ErrUnacknowledged }
