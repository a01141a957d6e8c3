// Package locktest is a fake lock backend for tests: a Locker and a Lease whose every
// method calls the func field of the same name, so that a test says what the backend
// answers and sees what it was asked, in-process, without Redis, etcd or a lock folder.
// A nil field gives the answer of a healthy backend on which nobody else holds anything;
// each field says which.
//
// It deliberately keeps no lock state: two Acquires of one key both succeed unless
// AcquireFunc says otherwise. A test of locking itself uses a real backend. The funcs are
// called from whatever goroutine calls the method (jobrun renews on the keeper's and
// acquires on one of its own), so a func that records its calls guards them itself.
package locktest

import (
	"context"
	"time"

	"cronlock/lockrun"
)

// Locker is a lockrun.Locker whose methods call its func fields.
type Locker struct {
	// AcquireFunc answers Acquire. nil: one try (req.OnTry, when set, is called once)
	// that takes the lock, as a new zero *Lease: it renews and releases fine.
	AcquireFunc func(ctx context.Context, req lockrun.Request) (lockrun.Lease, error)
	// InspectFunc answers Inspect. nil: nil, nil (the key is free).
	InspectFunc func(ctx context.Context, key string) (*lockrun.Holder, error)
	// ListFunc answers List. nil: an empty map (nothing is held).
	ListFunc func(ctx context.Context) (map[string]lockrun.Holder, error)
	// ClaimMissedFunc answers ClaimMissed. nil: nil (the tick is claimed as missed).
	ClaimMissedFunc func(ctx context.Context, req lockrun.Request) error
	// UnlockFunc answers Unlock. nil: nil, nil (nothing was held).
	UnlockFunc func(ctx context.Context, key string, force bool) (*lockrun.Holder, error)
	// DescribeFunc answers Describe. nil: "fake".
	DescribeFunc func() string
	// NameFunc answers Name, the backend's name for CRONLOCK_TOKEN_BACKEND. nil: "fake".
	NameFunc func() string
	// CloseFunc answers Close. nil: nil.
	CloseFunc func() error
}

var _ lockrun.Locker = (*Locker)(nil)

// Acquire calls AcquireFunc.
func (l *Locker) Acquire(ctx context.Context, req lockrun.Request) (lockrun.Lease, error) {
	if l.AcquireFunc == nil {
		if req.OnTry != nil {
			req.OnTry()
		}
		return &Lease{}, nil
	}
	return l.AcquireFunc(ctx, req)
}

// Inspect calls InspectFunc.
func (l *Locker) Inspect(ctx context.Context, key string) (*lockrun.Holder, error) {
	if l.InspectFunc == nil {
		return nil, nil
	}
	return l.InspectFunc(ctx, key)
}

// List calls ListFunc.
func (l *Locker) List(ctx context.Context) (map[string]lockrun.Holder, error) {
	if l.ListFunc == nil {
		return map[string]lockrun.Holder{}, nil
	}
	return l.ListFunc(ctx)
}

// ClaimMissed calls ClaimMissedFunc.
func (l *Locker) ClaimMissed(ctx context.Context, req lockrun.Request) error {
	if l.ClaimMissedFunc == nil {
		return nil
	}
	return l.ClaimMissedFunc(ctx, req)
}

// Unlock calls UnlockFunc.
func (l *Locker) Unlock(ctx context.Context, key string, force bool) (*lockrun.Holder, error) {
	if l.UnlockFunc == nil {
		return nil, nil
	}
	return l.UnlockFunc(ctx, key, force)
}

// Describe calls DescribeFunc.
func (l *Locker) Describe() string {
	if l.DescribeFunc == nil {
		return "fake"
	}
	return l.DescribeFunc()
}

// Name calls NameFunc.
func (l *Locker) Name() string {
	if l.NameFunc == nil {
		return "fake"
	}
	return l.NameFunc()
}

// Close calls CloseFunc.
func (l *Locker) Close() error {
	if l.CloseFunc == nil {
		return nil
	}
	return l.CloseFunc()
}

// Lease is a lockrun.Lease whose methods call its func fields. The zero Lease is a lock
// that never expires (as the local backend's), renews and releases fine, and keeps no
// fleet record.
type Lease struct {
	// FencingTokenFunc answers FencingToken. nil: 1.
	FencingTokenFunc func() uint64
	// TTLFunc answers TTL. nil: 0 (the lock never expires while its holder lives).
	TTLFunc func() time.Duration
	// SentFunc answers Sent. nil: CLOCK_BOOTTIME at the call, the clock lockrun.Keeper
	// reads by default: a lease taken just now, however late it is asked. A test whose
	// lease with a TTL must age sets it to a fixed reading.
	SentFunc func() time.Duration
	// RenewFunc answers Renew. nil: nil (renewed).
	RenewFunc func(ctx context.Context) error
	// ReleaseFunc answers Release. nil: nil (released).
	ReleaseFunc func(ctx context.Context) error
	// GiveBackTickFunc is called by GiveBackTick. nil: nothing happens.
	GiveBackTickFunc func()
	// SetRecordFunc is called by SetRecord. nil: the record is dropped.
	SetRecordFunc func(rec *lockrun.RunRecord)
	// RecordErrFunc answers RecordErr. nil: nil.
	RecordErrFunc func() error
	// WriteRecordFunc answers WriteRecord. nil: nil (as a backend without a fleet record).
	WriteRecordFunc func(ctx context.Context, rec *lockrun.RunRecord) error
}

var _ lockrun.Lease = (*Lease)(nil)

// FencingToken calls FencingTokenFunc.
func (l *Lease) FencingToken() uint64 {
	if l.FencingTokenFunc == nil {
		return 1
	}
	return l.FencingTokenFunc()
}

// TTL calls TTLFunc.
func (l *Lease) TTL() time.Duration {
	if l.TTLFunc == nil {
		return 0
	}
	return l.TTLFunc()
}

// Sent calls SentFunc.
func (l *Lease) Sent() time.Duration {
	if l.SentFunc == nil {
		return lockrun.Boottime()
	}
	return l.SentFunc()
}

// Renew calls RenewFunc.
func (l *Lease) Renew(ctx context.Context) error {
	if l.RenewFunc == nil {
		return nil
	}
	return l.RenewFunc(ctx)
}

// Release calls ReleaseFunc.
func (l *Lease) Release(ctx context.Context) error {
	if l.ReleaseFunc == nil {
		return nil
	}
	return l.ReleaseFunc(ctx)
}

// GiveBackTick calls GiveBackTickFunc.
func (l *Lease) GiveBackTick() {
	if l.GiveBackTickFunc != nil {
		l.GiveBackTickFunc()
	}
}

// SetRecord calls SetRecordFunc.
func (l *Lease) SetRecord(rec *lockrun.RunRecord) {
	if l.SetRecordFunc != nil {
		l.SetRecordFunc(rec)
	}
}

// RecordErr calls RecordErrFunc.
func (l *Lease) RecordErr() error {
	if l.RecordErrFunc == nil {
		return nil
	}
	return l.RecordErrFunc()
}

// WriteRecord calls WriteRecordFunc.
func (l *Lease) WriteRecord(ctx context.Context, rec *lockrun.RunRecord) error {
	if l.WriteRecordFunc == nil {
		return nil
	}
	return l.WriteRecordFunc(ctx, rec)
}
