package jobrun

import (
	"context"

	"cronlock/child"
	"cronlock/lockrun"
)

// keeperWatch hands the keeper's verdict to the child package, which knows no lock: one
// per run, so that the keeper's single LockLoss reaches whichever try, or wait between
// tries, is under way when it comes.
type keeperWatch struct {
	k    *lockrun.Keeper
	lost chan child.Stop
}

var _ child.Watch = (*keeperWatch)(nil)

// watchKeeper starts k and passes its loss on until ctx ends.
func watchKeeper(ctx context.Context, k *lockrun.Keeper) *keeperWatch {
	w := &keeperWatch{k: k, lost: make(chan child.Stop, 1)}
	lost := k.Run(ctx)
	go func() {
		select {
		case l := <-lost:
			w.lost <- child.Stop(l)
		case <-ctx.Done():
		}
	}()
	return w
}

// Lost delivers the keeper's one loss.
func (w *keeperWatch) Lost() <-chan child.Stop { return w.lost }

// Check asks the keeper whether the lease has run out by now.
func (w *keeperWatch) Check() (child.Stop, bool) {
	l, lost := w.k.Check()
	return child.Stop(l), lost
}
