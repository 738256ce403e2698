package buffer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// Lake is how a buffer tells the other processes of a lake that share
// state (Options.Lake) which paths it answers for: a version it took and
// has not retired, or a delete it took and has not carried to every
// target. Their federators send the readers and writers of those paths
// here until then (package federation, held.go), so a file this buffer
// acknowledged is read everywhere at once, and a write elsewhere never
// lands on a target where this buffer's migration would undo it. Its
// methods may block on a round trip to the shared state, and may be
// called concurrently.
type Lake interface {
	// Claim is asked before a write of p is taken, under p's lock. False:
	// another process of the lake holds p, and the write goes on to the
	// federator, which sends it there. An error refuses the write (503):
	// the others could not be told of it.
	Claim(ctx context.Context, p string) (bool, error)
	// Hold says this buffer answers for p from now on with its version
	// seq: the file v, or a delete (deleted). ErrHeldElsewhere: another
	// process holds p.
	Hold(ctx context.Context, p string, seq int64, v endpoint.Info, deleted bool) error
	// Release says this buffer answers for p's version seq no more: 0
	// for a claim that took no write, -1 for whatever it held.
	Release(ctx context.Context, p string, seq int64) error
	// Held lists the paths the lake says this buffer holds or claimed.
	Held(ctx context.Context) ([]string, error)
}

// ErrHeldElsewhere: another process of the lake holds the path (Lake).
var ErrHeldElsewhere = errors.New("buffer: another process of the lake holds the path")

// claim asks the lake whether this buffer may take a write of p (true
// without a lake). p's lock is held.
func (b *Buffer) claim(ctx context.Context, p string) (bool, error) {
	if b.opts.Lake == nil {
		return true, nil
	}
	return b.opts.Lake.Claim(ctx, p)
}

// unclaim drops a claim of p that took no write; a version this buffer
// holds stays held. p's lock is held.
func (b *Buffer) unclaim(ctx context.Context, p string) {
	if b.opts.Lake == nil {
		return
	}
	if err := b.opts.Lake.Release(context.WithoutCancel(ctx), p, 0); err != nil {
		b.log.Debug("drop a claim that took no write", "path", p, "err", err)
	}
}

// publish shows e, just journaled (a version, or with deleted a pending
// delete), to the lake (its hold) and to the roles of the process (the
// write hook), in that order: a reader told to drop the path finds the
// hold. Its error, when the others could not be told, is the writer's
// answer.
func (b *Buffer) publish(ctx context.Context, e *entry, deleted bool) error {
	if lake := b.opts.Lake; lake != nil {
		if err := lake.Hold(context.WithoutCancel(ctx), e.path, e.seq, e.info(), deleted); err != nil {
			return err
		}
	}
	return b.wrote(ctx, e.path)
}

// notTold is the error a writer gets when its write was taken here but
// the other processes of the lake could not be told.
func notTold(p string, err error) error {
	return fmt.Errorf("buffer: %s: stored here, but the other processes of the lake could not be told (%v); write again: %w",
		p, err, endpoint.ErrUnavailable)
}

// resync is set when the lake's holds must be made to agree with the
// journal (reconcile): at the start of Run, and when the shared state
// may have lost them (Resync).
type resync struct{ pending atomic.Bool }

// Resync makes Run tell the lake again what this buffer holds: the
// shared state may have lost it (Redis restarted) or missed its end.
func (b *Buffer) Resync() {
	b.resync.pending.Store(true)
	b.kick()
}

// reconcile makes the lake's holds agree with the journal, after a start
// or when the shared state came back (Resync):
//
//   - every pending version and pending delete is held again;
//   - a migrated version is retired at once: while this buffer was away
//     its hold sent nobody here, and readers elsewhere may read the
//     targets' copy (verified, the same bytes) or a newer one written
//     since;
//   - a version another process holds the path over has been replaced
//     through it (its write was taken while this one's hold was lost):
//     it goes, and is never migrated over the newer one;
//   - a hold the journal does not have (a claim left by a stop before
//     its write was taken) is dropped.
func (b *Buffer) reconcile(ctx context.Context) error {
	lake := b.opts.Lake
	if lake == nil {
		return nil
	}
	type held struct {
		e                  *entry
		migrated, deleting bool
	}
	b.mu.Lock()
	ents := make([]held, 0, len(b.cur))
	for _, e := range b.cur {
		ents = append(ents, held{e: e, migrated: e.state == stateMigrated, deleting: e.deleting()})
	}
	b.mu.Unlock()
	for _, h := range ents {
		e := h.e
		if h.migrated {
			// Each is marked as it is retired, never all up front: a
			// return at the first that cannot be must leave the rest to
			// the next try and to expiry.
			if b.startRetire(e) && !b.retire(ctx, e, "restart") && !b.isGone(e) {
				return fmt.Errorf("buffer: retire %s: not yet", e.path)
			}
			continue
		}
		err := lake.Hold(ctx, e.path, e.seq, e.info(), h.deleting)
		switch {
		case errors.Is(err, ErrHeldElsewhere):
			b.superseded(ctx, e)
		case err != nil:
			return err
		}
		if err := b.wrote(ctx, e.path); err != nil {
			return err
		}
	}
	paths, err := lake.Held(ctx)
	if err != nil {
		return err
	}
	for _, p := range paths {
		unlock := b.paths.lock(p) // no write of p between the look and the drop
		b.mu.Lock()
		e := b.cur[p]
		b.mu.Unlock()
		if e == nil {
			err = lake.Release(ctx, p, -1)
		}
		unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// superseded drops e, whose path another process of the lake holds: a
// write of it was taken there while this buffer's hold was lost, and is
// newer than e.
func (b *Buffer) superseded(ctx context.Context, e *entry) {
	b.log.Error("a buffered version is dropped: another process of the lake took a newer write of its path", "path", e.path, "seq", e.seq)
	if err := b.j.remove(context.WithoutCancel(ctx), e.seq); err != nil {
		b.log.Error("journal a drop", "path", e.path, "err", err)
		return
	}
	b.mu.Lock()
	rm := b.dropLocked(e)
	b.mu.Unlock()
	if rm {
		b.removeSpool(e)
	}
}
