// Package lockrun is what every lock backend of cronlock shares: the Locker and Lease
// interfaces, the Keeper that renews a lease and alone decides that it is lost, the
// records a backend stores (the holder, the tick, the fleet's entries), the key rules,
// and the errors that mean the same on every backend.
//
// The backends live in packages of their own (redis, etcd, local); this package imports
// none of them, nor anything outside the standard library but the status names of
// runstatus. It reads no flags or settings (cmd resolves those into a Request and each
// backend's options) and knows nothing of child processes or the local history. Its
// errors reach the user as they are, so they name the setting that would change them.
package lockrun

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLockLost reports that the lock is definitely no longer ours: the key is gone, or it
// holds another token, or the local lock file was replaced.
var ErrLockLost = errors.New("lockrun: lock lost")

// Request describes one attempt to take a lock.
type Request struct {
	Key     string        // validated with ValidKey
	TTL     time.Duration // lease length; ignored by backends without leases (local)
	Wait    time.Duration // how long Acquire waits for a held lock; 0 = try once
	MinHold time.Duration // Release keeps the lock until this long after acquisition
	Node    string        // holder metadata
	PID     int
	RunID   string
	// OnTry, when set, is called each time Acquire asks for the lock: once, plus once more
	// for every retry after finding it held while waiting (the run's attempt count).
	OnTry func()
	// Warn, when set, gets what the caller should hear although the lock was taken (an
	// *EvictionCheckError, a *DataLossError, a *ScheduleFlipError); it is called on
	// Acquire's goroutine. nil drops them.
	Warn func(error)

	// Tick is the schedule tick this run is for (--schedule); zero = none. Acquire then
	// claims it together with the lock, and returns *TickError instead when this tick or
	// a later one was claimed by another run. The caller computes it once, at
	// start-up; the backend only compares instants.
	Tick time.Time
	// Schedule and Zone are stored with the claim, for people reading the record.
	Schedule, Zone string
	// MaxSkew: with a Tick, a backend with a server clock (Redis) refuses with
	// *SkewError when Now differs from it by more than this; 0 = no check.
	MaxSkew time.Duration
	// Now is this host's wall clock (the skew check, the holder's "since"); nil =
	// time.Now.
	Now func() time.Time

	// StartDeadline is --start-deadline. With a Tick and MaxSkew > 0, a backend with a
	// server clock (Redis TIME) judges it on that clock: past Tick + StartDeadline there
	// it claims the tick as missed, takes no lock and returns *MissedError; and before
	// Tick has come there it writes nothing and returns *EarlyError, for the caller to
	// sleep and ask again. With MaxSkew 0 the caller judges both on its own clock.
	StartDeadline time.Duration
	// PrevTick is the schedule's tick before Tick (zero = none). A claim that finds the
	// key's last claimed (or held) tick of the same Canonical schedule older than it
	// marks the ticks in between as never fired.
	PrevTick time.Time
	// Canonical is the schedule in canonical form with its zone, "0 0 * * * Europe/Berlin"
	// (@daily and 0 0 * * * are one schedule): a claim whose Canonical differs from the
	// key's previous claim is marked as a schedule change, and a change back to one the
	// key had within 24 hours as a flip (*ScheduleFlipError through Warn).
	Canonical string
	// Known: this host has claimed the key on this backend before (its lock file or
	// history says so). A claim that then finds the key's fencing counter missing reports
	// *DataLossError through Warn: the backend lost its data, and the tick may be run a
	// second time.
	Known bool
	// CmdHash is a hash of the command, stored with the claim: two runs of one command
	// between two ticks, one of them without --schedule, are a roll-out's DUPLICATE.
	CmdHash string
	// Entry is the run's entry in the fleet's record, which a backend that writes it at
	// the claim (ClaimsEntry) writes in the same call: Status running for Acquire, the
	// missed run's status, exit and error for ClaimMissed. nil = an entry of RunID,
	// Node and Tick alone.
	Entry *RunRecord
	// Standby is what a run with --standby asks for besides (standby.go).
	Standby StandbyRequest
}

// WallNow is the request's wall clock: Now, or time.Now when Now is nil.
func (r *Request) WallNow() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// TickError is returned by Acquire and ClaimMissed when the run's tick, or a later one,
// was already claimed by another run: the tick was run (or missed) elsewhere.
type TickError struct {
	Key     string
	Tick    time.Time // the tick this run was for
	Claimed time.Time // the tick the claim is for: Tick or later
	Node    string    // who claimed it
	RunID   string
	Missed  bool // the claim was a missed run's: the job did not run for it
	Skips   int  // runs skipped for the claimed tick so far, this one included
}

func (e *TickError) Error() string {
	what := "already run"
	if e.Missed {
		what = "already missed"
	}
	later := ""
	if !e.Claimed.IsZero() && e.Claimed.After(e.Tick) {
		later = fmt.Sprintf(" (a later tick, %s, was claimed)", e.Claimed.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("tick %s of %s %s by %s%s", e.Tick.UTC().Format(time.RFC3339), e.Key, what, e.Claimer(), later)
}

// Claimer names who claimed the tick: "node (run R)".
func (e *TickError) Claimer() string {
	if e.RunID == "" {
		return e.Node
	}
	return fmt.Sprintf("%s (run %s)", e.Node, e.RunID)
}

// SkewError is returned by Acquire when this host's wall clock is too far from the
// server's: a fast clock would claim the next tick early and make the fleet skip it.
type SkewError struct {
	Key    string
	Server string
	Skew   time.Duration // this host's clock minus the server's (+ = ahead)
	Max    time.Duration
}

// Refusal marks a skew as the server's refusal (IsRefusal).
func (e *SkewError) Refusal() {}

func (e *SkewError) Error() string {
	dir := "ahead of"
	d := e.Skew
	if d < 0 {
		dir, d = "behind", -d
	}
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond)
	}
	return fmt.Sprintf("%s: this host's clock is %s %s %s's, more than the %s allowed (--max-skew, and at most a quarter of the time between ticks), so it could claim the wrong tick; sync the clock with NTP (timedatectl timesync-status, chronyc tracking)",
		e.Key, d, dir, e.Server, e.Max)
}

// EarlyError is returned by Acquire when the run's tick has not come yet on the
// backend's clock (this host's clock is ahead, within --max-skew): nothing was written;
// sleep Early and ask again. A host 25 s fast would otherwise run the 09:00 job at
// 08:59:35, or call the tick missed before it came and leave it to nobody.
type EarlyError struct {
	Key   string
	Early time.Duration
}

func (e *EarlyError) Error() string {
	return fmt.Sprintf("%s: the tick has not come yet on the backend's clock (%s early)", e.Key, e.Early)
}

// MissedError is returned by Acquire when the backend's clock says the run starts more
// than StartDeadline after its tick: the tick was claimed as missed for this run, and no
// lock was taken.
type MissedError struct {
	Key  string
	Late time.Duration // how long after the tick, on the backend's clock
}

func (e *MissedError) Error() string {
	return fmt.Sprintf("%s: %s after its tick on the backend's clock: missed", e.Key, e.Late)
}

// DataLossError is passed to Request.Warn when a claim found the key's persistent state
// gone (Redis restarted without persistence, FLUSHALL, an eviction; a local lock file
// lost with /run at a reboot) although this host had claimed the key there before: the
// tick records went with it, so this tick may have run already.
type DataLossError struct {
	Key     string
	Backend string // "redis 127.0.0.1:6379/0"
	What    string // what is missing: "its fencing counter cronlock:{billing}:fence"
	Cause   string // what may have done it: "a restart without persistence, FLUSHALL or an eviction"
	Marked  bool   // the claim's entry in the fleet's record is marked
}

func (e *DataLossError) Error() string {
	marked := ""
	if e.Marked {
		marked = "; the claim is marked data loss in the fleet's record"
	}
	return fmt.Sprintf("%s: %s lost its data (%s is gone, although this host claimed the key there before: %s?): this tick may have run already, and fencing tokens go on from the clock%s",
		e.Key, e.Backend, e.What, e.Cause, marked)
}

// ScheduleFlipError is passed to Request.Warn when a claim's schedule or zone differs from
// the key's previous claim and goes back to one the key had within 24 hours: hosts
// disagree on the schedule (one VM with another /etc/localtime, --tz on some), and such
// a job runs twice a day.
type ScheduleFlipError struct {
	Key      string
	Was, Now string // "EXPR ZONE"
}

func (e *ScheduleFlipError) Error() string {
	return fmt.Sprintf("%s: the schedule flipped back from %q to %q within 24 hours: the hosts disagree on --schedule or the zone (--tz, CRON_TZ, /etc/localtime), so the job runs at both times; make them agree",
		e.Key, e.Was, e.Now)
}

// Holder describes who holds a lock, as the backend recorded it when it was acquired.
type Holder struct {
	Node         string    `json:"node"`
	PID          int       `json:"pid"`
	RunID        string    `json:"run_id"`
	Since        time.Time `json:"since"`   // acquisition time (holder's wall clock)
	Renewed      time.Time `json:"renewed"` // last confirmed renewal; zero when unknown
	FencingToken uint64    `json:"fencing_token"`
	// TTLLeft is the remaining lease as the backend reports it; 0 for backends without leases.
	TTLLeft time.Duration `json:"ttl_left_ms"`
	// Revoked: `unlock --force` took the lock from a live holder; it frees itself when its
	// lease ends, after the holder stopped its job.
	Revoked bool `json:"revoked,omitempty"`
	// NoExpiry: the lock has no TTL at all (a key set or PERSISTed by hand), so it never
	// frees itself; every run skips until someone removes it.
	NoExpiry bool `json:"no_expiry,omitempty"`
}

// String names the holder for messages and history rows: "node (pid P, run R)", or
// only what is known of a holder cronlock did not write (no pid 0, no empty run).
func (h Holder) String() string {
	if h.PID == 0 && h.RunID == "" {
		return h.Node
	}
	return fmt.Sprintf("%s (pid %d, run %s)", h.Node, h.PID, h.RunID)
}

// HeldError is returned by Acquire when another holder has the lock (after Wait ran out).
type HeldError struct {
	Key    string
	Holder *Holder // nil when the holder could not be read
}

func (e *HeldError) Error() string {
	if e.Holder == nil {
		return fmt.Sprintf("%s is held by another run", e.Key)
	}
	if e.Holder.Since.IsZero() {
		return fmt.Sprintf("%s held by %s", e.Key, e.Holder) // not "since 0001-01-01"
	}
	return fmt.Sprintf("%s held by %s since %s", e.Key, e.Holder, e.Holder.Since.Format(time.RFC3339))
}

// Locker is one lock backend.
type Locker interface {
	// Acquire takes req.Key, waiting up to req.Wait for a holder to let go.
	// It returns *HeldError when the lock stays held; any other error means the
	// backend could not be asked (unreachable, refused, misconfigured).
	Acquire(ctx context.Context, req Request) (Lease, error)
	// Inspect returns the current holder of key, or nil when the key is free.
	Inspect(ctx context.Context, key string) (*Holder, error)
	// List returns every lock held right now, by key.
	List(ctx context.Context) (map[string]Holder, error)
	// ClaimMissed claims req.Tick as missed without taking the lock: a run past its
	// start deadline does not start, and a second such run must find the tick claimed.
	// It returns *TickError when the tick (or a later one) was already claimed.
	ClaimMissed(ctx context.Context, req Request) error
	// Unlock force-releases key and returns the holder it removed (nil: nothing held).
	// Backends that cannot remove another process's lock return an error naming the holder.
	Unlock(ctx context.Context, key string, force bool) (*Holder, error)
	// Name names the backend that issues the fencing tokens, for the job's
	// CRONLOCK_TOKEN_BACKEND: "redis", "etcd", "local". Tokens of different backends are
	// not comparable (etcd revisions are far below Redis's microsecond tokens), so a job
	// that stores the last token it saw must start over when this name changes.
	Name() string
	// Describe names the backend for people and history rows, with no secret in it:
	// "redis 127.0.0.1:6379/0", "local /run/cronlock".
	Describe() string
	// Close frees the backend's connections.
	Close() error
}

// Lease is a held lock.
type Lease interface {
	// FencingToken is strictly greater than every token handed out before for this key
	// by this backend.
	FencingToken() uint64
	// TTL is the lease length; 0 means the lock never expires while its holder lives.
	TTL() time.Duration
	// Sent is when the request that took the lock was sent, on the Boottime clock (or
	// the locker's test clock). The lease counts from there, never from when the reply
	// came: a holder that counted from a later instant would believe in its lease past
	// the moment the server let it go. A wait for a busy lock comes before it, never
	// inside it.
	Sent() time.Duration
	// Renew extends the lease by TTL from now. ErrLockLost means the lock is no longer
	// ours; any other error means the outcome is unknown and the caller may retry.
	Renew(ctx context.Context) error
	// Release lets the lock go (honouring MinHold). It never removes another holder's lock.
	Release(ctx context.Context) error
	// GiveBackTick makes Release give the run's tick claim back (and not honour MinHold):
	// its job never started, so the next host may run the tick.
	GiveBackTick()
	// SetRecord gives Release the run's entry for the fleet's record, written in the
	// release's own script (Redis); RecordErr then says why it could not be. Backends
	// without a fleet record ignore it.
	SetRecord(rec *RunRecord)
	RecordErr() error
	// WriteRecord writes the run's entry after Release, at the cost of its own round trip:
	// for a run whose outcome was not known yet when the lock had to go. Backends without
	// a fleet record return nil.
	WriteRecord(ctx context.Context, rec *RunRecord) error
}

// ErrUnacknowledged: a write reached the server but fewer replicas than --min-replicas
// acknowledged it, so a failover may still lose it (a ledger completion is then sent
// again later; it is idempotent).
var ErrUnacknowledged = errors.New("not acknowledged by enough replicas")

// ErrUnlockReplyLost: an unlock whose first reply was lost was sent again and found no
// lock, most likely because that first try removed it; who held it is not known.
var ErrUnlockReplyLost = errors.New("an earlier try, whose reply was lost, most likely removed it (its holder is not known)")

// FleetStore is a backend that keeps the fleet's record and tick record readable from
// any host: Redis, etcd. The local backend has only this machine's history instead.
type FleetStore interface {
	Locker
	// Fleet returns key's newest runs, newest first, at most limit (0 = all kept),
	// marked with MarkDuplicates; a run that claimed and whose lock is gone without a
	// completed entry reads as abandoned (DeriveAbandoned on Redis).
	Fleet(ctx context.Context, key string, limit int) ([]FleetEntry, error)
	// FleetAll is Fleet for several keys, by key.
	FleetAll(ctx context.Context, keys []string, limit int) (map[string][]FleetEntry, error)
	// FleetKeys returns the keys that have a record, sorted (on Redis also those with
	// only a lock or a tick record).
	FleetKeys(ctx context.Context) ([]string, error)
	// TickRecord returns key's last claimed tick; nil, nil when none was ever claimed.
	TickRecord(ctx context.Context, key string) (*TickRecord, error)
	// RecordRun adds the entry of a run that never held the lock (missed, error).
	RecordRun(ctx context.Context, key string, rec *RunRecord) error
}

// ServerClock is a backend with a clock of its own (Redis TIME) on which Acquire judges
// a request's tick and StartDeadline (see Request.StartDeadline). The caller then leaves
// both to Acquire instead of judging them on the host's clock.
type ServerClock interface {
	HasServerClock() bool
}

// ClaimsEntry is a FleetStore that writes a run's entry in the fleet's record with the
// claim itself (Request.Entry), so a missed claim needs no RecordRun after it.
type ClaimsEntry interface {
	ClaimsEntry() bool
}

// Expiring is a backend whose locks free themselves when their lease ends (Redis, etcd).
type Expiring interface {
	// FreedBy says, for a message about a release that failed, what frees the lock
	// anyway: " (the Redis key expires by itself within --ttl 1m0s)".
	FreedBy(ttl time.Duration) string
}

// Refusal is implemented by the errors with which a backend refuses to take a lock
// although it could be asked (a clock skew, an evicting server, a fencing counter that
// cannot rise): the server is up, and the fleet's record should show the run.
type Refusal interface {
	error
	Refusal()
}

// IsRefusal reports whether err is, or wraps, a Refusal.
func IsRefusal(err error) bool {
	var r Refusal
	return errors.As(err, &r)
}

// Diagnoser is a backend that can be tried without taking a lock (cronlock config
// check): whether it is reachable, and whatever on its side would keep a lock from being
// safe or a run from working. Backends without it are tried with Inspect.
type Diagnoser interface {
	Diagnose(ctx context.Context, o DiagnoseOptions) Diagnosis
}

// DiagnoseOptions are what a diagnosis judges against.
type DiagnoseOptions struct {
	// MaxSkew is the largest distance allowed between this host's clock and the
	// server's (--max-skew); 0 = the skew is reported, never a problem.
	MaxSkew time.Duration
	// Now is this host's wall clock; nil = time.Now.
	Now func() time.Time
}

// Diagnosis is what a backend found when it was tried.
type Diagnosis struct {
	Facts    []string // what was found fine, for people
	Problems []string // one line each, with what to do
}
