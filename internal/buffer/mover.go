package buffer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/transfer"
)

// Run migrates pending files and retires migrated ones until ctx is done
// or Close is called; it returns once every migration it started has
// stopped. Call it once.
//
// The mover starts up to Config.Parallel migrations at a time (copies of
// pending files, and pending deletes carried to the targets), oldest
// first, never two of one path at once: what comes next for a path waits
// for the migration in flight to end. A newer version or a DELETE stops
// a copy still sending its body, and waits for the target's answer to
// one that has sent it all (see migration), so an older copy never lands
// on a target after a newer version or a delete. Where the target can
// (endpoint.ConditionalPutter), a copy also commits only on top of what
// the mover saw there before it started: a late or foreign write in
// between makes it fail (and look again) rather than overwrite.
//
// With a lake (Options.Lake), Run first tells it what the journal holds
// (reconcile), and again after Resync, retrying until it can.
func (b *Buffer) Run(ctx context.Context) {
	b.runs.Add(1)
	defer b.runs.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.life, cancel)
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()
	running := 0
	finished := make(chan struct{}, b.cfg.Parallel)
	tick := time.NewTimer(0)
	defer tick.Stop()
	lastSample := time.Time{}
	b.resync.pending.Store(b.opts.Lake != nil)
	// A lake that refused a reconcile or a release is asked again
	// RetryInitial later, not on the loop's next turn: a Redis that
	// refuses connections answers at once, and retrying each turn spun
	// the loop, a warning a time, thousands a second.
	var resyncAt, retireAt time.Time
	for {
		now := time.Now()
		if now.Sub(lastSample) >= historyEvery {
			b.sample(now)
			lastSample = now
		}
		if !now.Before(resyncAt) && b.resync.pending.Swap(false) {
			if err := b.reconcile(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("cannot yet tell the other processes of the lake what this buffer holds", "err", err)
				b.resync.pending.Store(true)
				resyncAt = now.Add(b.cfg.RetryInitial)
			}
		}
		if !now.Before(retireAt) && !b.retireExpired(ctx, now) {
			retireAt = now.Add(b.cfg.RetryInitial)
		}
		var due time.Time
		for running < b.cfg.Parallel {
			e, mctx, next := b.pick(ctx, now)
			if e == nil {
				due = next
				break
			}
			running++
			wg.Go(func() {
				defer func() { finished <- struct{}{} }()
				b.migrate(mctx, e)
			})
		}
		wait := historyEvery
		if !due.IsZero() {
			wait = min(wait, max(time.Until(due), time.Millisecond))
		}
		if d := b.nextRetirement(now); d > 0 {
			wait = min(wait, max(d, time.Until(retireAt)))
		}
		if b.resync.pending.Load() {
			wait = min(wait, max(time.Until(resyncAt), time.Millisecond))
		}
		tick.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-finished:
			running--
		case <-b.wake:
		case <-tick.C:
		}
	}
}

// pick chooses the next pending version (or pending delete) to migrate
// and marks it in flight (with a reference on its file, its path busy,
// and a migration that a newer version or a DELETE aborts), or returns
// nil and the time the earliest waiting one is due (zero: none waits).
// A damaged file is not picked.
func (b *Buffer) pick(ctx context.Context, now time.Time) (*entry, context.Context, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var best *entry
	var due time.Time
	for _, e := range b.cur {
		if e.state == stateMigrated || e.mig != nil || e.damaged != "" || b.moving[e.path] {
			continue
		}
		at := e.nextTry
		if open := b.openAtLocked(e, now); open.After(at) {
			at = open
		}
		if at.After(now) {
			if due.IsZero() || at.Before(due) {
				due = at
			}
			continue
		}
		if best == nil || e.seq < best.seq {
			best = e
		}
	}
	if best == nil {
		return nil, nil, due
	}
	best.refs++
	b.moving[best.path] = true
	mctx, cancel := context.WithCancel(ctx)
	best.mig = &migration{cancel: cancel, handed: best.deleting()}
	return best, mctx, time.Time{}
}

// migrate copies e to every target that does not hold it yet, verifies
// each copy, records each verified target, and then the file as migrated;
// any failure schedules a retry. mctx is the one pick made for it.
func (b *Buffer) migrate(mctx context.Context, e *entry) {
	b.mu.Lock()
	mig := e.mig
	superseded := e.gone
	todo := make([]string, 0, len(e.targets))
	for _, t := range e.targets {
		if !e.done[t] {
			todo = append(todo, t)
		}
	}
	b.mu.Unlock()
	defer func() {
		mig.cancel()
		b.mu.Lock()
		e.mig = nil
		delete(b.moving, e.path)
		b.mu.Unlock()
		b.release(e)
		b.kick() // a newer version of the path may be waiting for this one
	}()
	if superseded {
		return
	}
	if e.deleting() {
		b.carryDelete(mctx, e, todo)
		return
	}
	var firstErr error
	var failTarget string
	var heldUntil time.Time // the earliest end of a hold that skipped a target
	for _, name := range todo {
		if until := b.heldUntil(name, time.Now()); !until.IsZero() {
			if heldUntil.IsZero() || until.Before(heldUntil) {
				heldUntil = until
			}
			continue
		}
		ep := b.targets[name]
		start := time.Now()
		var err error
		if ep == nil {
			err = fmt.Errorf("target %q is not configured any more: %w", name, endpoint.ErrRefused)
		} else {
			err = b.copyTo(mctx, e, ep, mig)
			mig.answered()
		}
		if mctx.Err() != nil || b.isGone(e) {
			return // superseded, deleted or stopping: not a failure
		}
		if b.isDamaged(e) {
			return // damaged reported it; the file waits for its client
		}
		b.targetAnswered(name, err)
		if err == nil {
			err = b.j.targetDone(context.WithoutCancel(mctx), e.seq, name)
		}
		if err != nil {
			b.m.failures.WithLabelValues(name, reasonOf(err)).Inc()
			b.stats.failure(name, err)
			if firstErr == nil {
				firstErr, failTarget = err, name
			}
			continue
		}
		b.m.bytes.WithLabelValues(name).Add(float64(e.size))
		b.stats.moved(name, e.size, time.Since(start))
		b.mu.Lock()
		e.done[name] = true
		b.mu.Unlock()
	}
	if firstErr != nil {
		b.failed(mctx, e, failTarget, firstErr)
		return
	}
	if !heldUntil.IsZero() {
		// Not a failure of this file: it waits for its targets' holds.
		b.mu.Lock()
		e.nextTry = heldUntil
		b.mu.Unlock()
		return
	}
	now := time.Now()
	if err := b.j.migrated(context.WithoutCancel(mctx), e.seq, now); err != nil {
		b.failed(mctx, e, "", err)
		return
	}
	b.mu.Lock()
	e.state = stateMigrated
	e.migratedAt = now
	e.lastErr, e.failTarget, e.failReason = "", "", ""
	e.failingSince = time.Time{}
	b.mu.Unlock()
	b.m.migrated.Inc()
	b.stats.migrated()
	b.log.Debug("migrated", "path", e.path, "bytes", e.size, "targets", len(e.targets))
	b.kick()
}

// hold is a target found unavailable: no copies to it until until.
type hold struct {
	failures int
	until    time.Time
	err      string
}

// backoff is the wait after the n-th failure in a row: capped
// exponential, with equal jitter (half fixed, half random), so many
// files or targets failing together do not retry in lock step.
func (b *Buffer) backoff(n int) time.Duration {
	d := b.cfg.RetryInitial
	for i := 1; i < n && d < b.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, b.cfg.RetryMax)
	return d/2 + rand.N(d/2+1)
}

// targetDown reports whether err says the target itself could not be
// reached (down, timeout, 5xx), as opposed to this file's copy going
// wrong (a bad copy, a refusal, the local source).
func targetDown(err error) bool {
	var te *transfer.Error
	var se *transfer.SizeError
	if errors.As(err, &te) && te.Side == transfer.Source || errors.As(err, &se) {
		return false
	}
	return errors.Is(err, endpoint.ErrUnavailable)
}

// targetAnswered updates name's hold from a copy's outcome: held off
// with backoff while it is unavailable, released by any answer.
func (b *Buffer) targetAnswered(name string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil || !targetDown(err) {
		if h := b.down[name]; h != nil {
			delete(b.down, name)
			b.log.Info("target answers again", "endpoint", name, "failures", h.failures)
		}
		return
	}
	h := b.down[name]
	if h == nil {
		h = &hold{}
		b.down[name] = h
	}
	h.failures++
	h.until = time.Now().Add(b.backoff(h.failures))
	h.err = short(err.Error())
}

// heldUntil returns when name's hold ends, or zero when it is not held
// at now. A hold that has ended lets one copy through (the probe) and
// is renewed by its failure.
func (b *Buffer) heldUntil(name string, now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.down[name]
	if h == nil || !h.until.After(now) {
		return time.Time{}
	}
	return h.until
}

// openAtLocked returns when e has a target it still needs that is not
// held: now or earlier when one is open, else the earliest end of their
// holds.
func (b *Buffer) openAtLocked(e *entry, now time.Time) time.Time {
	var at time.Time
	for _, t := range e.targets {
		if e.done[t] {
			continue
		}
		h := b.down[t]
		if h == nil || !h.until.After(now) {
			return time.Time{}
		}
		if at.IsZero() || h.until.Before(at) {
			at = h.until
		}
	}
	return at
}

// failed schedules e's next attempt with backoff.
func (b *Buffer) failed(ctx context.Context, e *entry, target string, err error) {
	b.mu.Lock()
	e.attempts++
	d := b.backoff(e.attempts)
	e.nextTry = time.Now().Add(d)
	e.lastErr = short(err.Error())
	e.failTarget = target
	e.failReason = reasonOf(err)
	e.failedAt = time.Now()
	if e.failingSince.IsZero() {
		e.failingSince = e.failedAt
	}
	attempts, msg, since := e.attempts, e.lastErr, e.failingSince
	b.mu.Unlock()
	// A target down for an hour fails every pending file every few
	// minutes: warn on the first failures of a file, then rarely.
	lvl := slog.LevelDebug
	if attempts <= 3 || attempts%20 == 0 {
		lvl = slog.LevelWarn
	}
	b.log.Log(ctx, lvl, "migration failed", "path", e.path, "endpoint", target, "attempts", attempts, "retry_in", d, "err", err)
	// The journal keeps failures across restarts, but each write costs a
	// WAL fsync: record the 1st, 2nd, 4th, 8th... only.
	if attempts&(attempts-1) != 0 {
		return
	}
	if jerr := b.j.failed(context.WithoutCancel(ctx), e.seq, attempts, msg, since); jerr != nil {
		b.log.Error("journal a failure", "path", e.path, "err", jerr)
	}
}

// VerifyError says a target holds other than the buffered file after a
// copy it accepted: Kind "size" or "adler32".
type VerifyError struct {
	Target    string
	Kind      string
	Got, Want string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("verify on %s: %s is %s, want %s", e.Target, e.Kind, e.Got, e.Want)
}

// isGone reports whether e is no longer its path's version (a newer one,
// or a delete, took its place while its copy ran on).
func (b *Buffer) isGone(e *entry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return e.gone
}

// isDamaged reports whether e's spool file was found damaged.
func (b *Buffer) isDamaged(e *entry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return e.damaged != ""
}

// copyTo copies e to ep with transfer.Copy (which checks the bytes read
// against the journal's adler32 as they stream, and ep's own adler32
// after, when ep offers one) and verifies the result: ep's size always,
// and its adler32 by reading the file back when ep offered none.
//
// The copy is conditional on what ep held at the path just before
// (transfer.Options.Cond): the file seen there, by its ETag, or nothing.
// Where ep evaluates that with its commit (a lakefed storage role, a
// local directory), a write that lands on the path in between (a copy of
// an older version whose answer was lost, a DELETE, a foreign writer)
// makes this one fail with endpoint.ErrPrecondition instead of being
// overwritten or undone; the next attempt looks again.
func (b *Buffer) copyTo(ctx context.Context, e *entry, ep endpoint.Endpoint, mig *migration) error {
	cond, err := condOf(ctx, ep, e.path)
	if err != nil {
		return err
	}
	src := &spoolSource{b: b, e: e, mig: mig}
	info := e.info()
	res, err := transfer.Copy(ctx, src, ep, e.path, e.path, transfer.Options{SourceInfo: &info, Cond: cond})
	if err != nil {
		return err
	}
	st, err := ep.Stat(ctx, e.path)
	if err != nil {
		return fmt.Errorf("verify on %s: stat: %w", ep.Name(), err)
	}
	if st.Size != e.size {
		return b.badCopy(ctx, ep, e, &VerifyError{Target: ep.Name(), Kind: "size", Got: fmt.Sprint(st.Size), Want: fmt.Sprint(e.size)})
	}
	if res.DestSum != "" {
		return nil // transfer compared it with the bytes sent
	}
	rc, err := ep.Open(ctx, e.path, 0, -1)
	if err != nil {
		return fmt.Errorf("verify on %s: read back: %w", ep.Name(), err)
	}
	defer rc.Close()
	h := httpx.NewAdler32()
	n, err := io.Copy(h, rc)
	if err != nil {
		return fmt.Errorf("verify on %s: read back: %w", ep.Name(), err)
	}
	if n != e.size {
		return b.badCopy(ctx, ep, e, &VerifyError{Target: ep.Name(), Kind: "size", Got: fmt.Sprint(n), Want: fmt.Sprint(e.size)})
	}
	if got := httpx.SumString(h); got != e.adler {
		return b.badCopy(ctx, ep, e, &VerifyError{Target: ep.Name(), Kind: "adler32", Got: got, Want: e.adler})
	}
	return nil
}

// condOf is the condition of a copy to ep's path p: what is there now,
// by its ETag (none when ep gives none), or nothing there.
func condOf(ctx context.Context, ep endpoint.Endpoint, p string) (*endpoint.Cond, error) {
	in, err := ep.Stat(ctx, p)
	switch {
	case errors.Is(err, endpoint.ErrNotFound):
		return &endpoint.Cond{IfNoneMatch: true}, nil
	case err != nil:
		return nil, fmt.Errorf("look at %s before the copy: %w", ep.Name(), err)
	case in.IsDir || in.ETag == "":
		return nil, nil // the Put refuses a directory; no ETag, no condition
	}
	return &endpoint.Cond{IfMatch: in.ETag}, nil
}

// carryDelete deletes the pending delete e's path on each target in todo
// not held off (a missing file counts as deleted), records each, and
// once every target is done removes e's row: the path is then what the
// targets say (nothing). A failure schedules a retry, as for a copy.
func (b *Buffer) carryDelete(ctx context.Context, e *entry, todo []string) {
	var firstErr error
	var failTarget string
	var heldUntil time.Time
	for _, name := range todo {
		if until := b.heldUntil(name, time.Now()); !until.IsZero() {
			if heldUntil.IsZero() || until.Before(heldUntil) {
				heldUntil = until
			}
			continue
		}
		var err error
		if ep := b.targets[name]; ep == nil {
			err = fmt.Errorf("target %q is not configured any more: %w", name, endpoint.ErrRefused)
		} else if err = ep.Delete(ctx, e.path); errors.Is(err, endpoint.ErrNotFound) {
			err = nil
		}
		if ctx.Err() != nil {
			return // stopping
		}
		b.targetAnswered(name, err)
		if err == nil {
			err = b.j.targetDone(context.WithoutCancel(ctx), e.seq, name)
		}
		if err != nil {
			b.m.failures.WithLabelValues(name, reasonOf(err)).Inc()
			b.stats.failure(name, err)
			if firstErr == nil {
				firstErr, failTarget = err, name
			}
			continue
		}
		b.mu.Lock()
		e.done[name] = true
		b.mu.Unlock()
	}
	switch {
	case firstErr != nil:
		b.failed(ctx, e, failTarget, firstErr)
		return
	case !heldUntil.IsZero():
		b.mu.Lock()
		e.nextTry = heldUntil
		b.mu.Unlock()
		return
	}
	// The hold goes first: the path is then what the targets say
	// (nothing), which is what this buffer says until its row goes.
	if lake := b.opts.Lake; lake != nil {
		if err := lake.Release(context.WithoutCancel(ctx), e.path, e.seq); err != nil {
			b.failed(ctx, e, "", err)
			return
		}
	}
	if err := b.j.remove(context.WithoutCancel(ctx), e.seq); err != nil {
		b.failed(ctx, e, "", err)
		return
	}
	b.mu.Lock()
	if b.cur[e.path] == e {
		delete(b.cur, e.path)
	}
	e.gone = true
	b.mu.Unlock()
	b.log.Debug("deleted on every target", "path", e.path, "targets", len(e.targets))
	if err := b.wrote(ctx, e.path); err != nil {
		b.log.Warn("a delete carried out could not be shown to the other processes of the lake", "path", e.path, "err", err)
	}
}

// badCopy removes a copy that failed verification (best effort: the
// next attempt replaces it anyway), so that nobody reading the target
// directly gets it meanwhile, and returns err.
func (b *Buffer) badCopy(ctx context.Context, ep endpoint.Endpoint, e *entry, err *VerifyError) error {
	if derr := ep.Delete(context.WithoutCancel(ctx), e.path); derr != nil && !errors.Is(derr, endpoint.ErrNotFound) {
		b.log.Warn("remove a bad copy", "path", e.path, "endpoint", ep.Name(), "err", derr)
	}
	return err
}

// reasonOf labels a migration failure for metrics and /api/buffer, from
// a small fixed set.
func reasonOf(err error) string {
	var ve *VerifyError
	var ce *transfer.ChecksumError
	var se *transfer.SizeError
	switch {
	case errors.As(err, &ve):
		return "verify_" + ve.Kind
	case errors.As(err, &ce):
		if ce.Side == transfer.Source {
			return "local_checksum"
		}
		return "verify_adler32"
	case errors.As(err, &se):
		return "local_size"
	case errors.Is(err, endpoint.ErrPrecondition):
		return "changed_on_target"
	case errors.Is(err, endpoint.ErrNotFound):
		return "not_found"
	case errors.Is(err, endpoint.ErrRefused):
		return "refused"
	case errors.Is(err, endpoint.ErrUnavailable):
		return "unavailable"
	}
	return "other"
}

// retireExpired retires migrated versions kept longer than
// KeepAfterMigration. It reports false, having stopped there, when one
// could not be retired (the lake refused its release).
func (b *Buffer) retireExpired(ctx context.Context, now time.Time) bool {
	var old []*entry
	b.mu.Lock()
	for _, e := range b.cur {
		if e.state == stateMigrated && !now.Before(e.migratedAt.Add(b.cfg.KeepAfterMigration)) {
			old = append(old, e)
		}
	}
	b.mu.Unlock()
	for _, e := range old {
		if b.startRetire(e) && !b.retire(ctx, e, "expired") {
			return false // the others would be refused alike: later
		}
	}
	return true
}

// nextRetirement is how long until the next migrated version expires,
// or 0 when none is held.
func (b *Buffer) nextRetirement(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var d time.Duration
	for _, e := range b.cur {
		if e.state != stateMigrated {
			continue
		}
		left := max(e.migratedAt.Add(b.cfg.KeepAfterMigration).Sub(now), time.Millisecond)
		if d == 0 || left < d {
			d = left
		}
	}
	return d
}

// spoolSource is the buffered file as the source endpoint of a copy: it
// can only describe and read that one file. A whole read is checked
// against the journal's adler32 and asks the migration before it hands
// over the last bytes (sumCheck).
type spoolSource struct {
	b   *Buffer
	e   *entry
	mig *migration
}

func (s *spoolSource) Name() string { return "buffer" }

func (s *spoolSource) Stat(context.Context, string) (endpoint.Info, error) { return s.e.info(), nil }

func (s *spoolSource) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	f, err := os.Open(s.b.spoolPath(s.e))
	if err != nil {
		return nil, &endpoint.OpError{Kind: "buffer", Op: "open", Path: p, Err: fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)}
	}
	if n < 0 || off+n > s.e.size {
		n = s.e.size - off
	}
	r := &spoolReader{f: f, r: io.NewSectionReader(f, off, n), ver: s.e.info()}
	if off == 0 && n == s.e.size {
		r.check = s.b.newSumCheck(s.e, s.mig.handOver)
	}
	return r, nil
}

func (s *spoolSource) List(context.Context, string) ([]endpoint.Info, error) {
	return nil, endpoint.ErrUnsupported
}
func (s *spoolSource) Put(context.Context, string, io.Reader, int64) error {
	return endpoint.ErrUnsupported
}
func (s *spoolSource) Delete(context.Context, string) error { return endpoint.ErrUnsupported }
func (s *spoolSource) Mkdir(context.Context, string) error  { return endpoint.ErrUnsupported }
func (s *spoolSource) Probe(context.Context) error          { return nil }
