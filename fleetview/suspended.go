package fleetview

import (
	"context"
	"errors"
	"time"

	"cronlock/lockrun"
)

// AddSuspensions marks the jobs whose key is suspended now on l (read in one batch where
// the backend can: a pipeline on Redis), as Job.Suspend does. A backend that cannot
// suspend keys leaves them all as they are.
func AddSuspensions(ctx context.Context, l lockrun.Locker, jobs []Job, now time.Time) error {
	if len(jobs) == 0 {
		return nil
	}
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		keys[i] = j.Key
	}
	got, err := lockrun.SuspensionsOf(ctx, l, keys)
	if errors.Is(err, lockrun.ErrNoSuspend) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := range jobs {
		s := got[jobs[i].Key]
		if s == nil || s.Lifted(now) {
			continue
		}
		v := Suspension{By: s.By, Since: s.Since, Reason: s.Reason}
		if !s.Until.IsZero() {
			until := s.Until
			v.Until = &until
		}
		jobs[i].Suspend(v)
	}
	return nil
}
