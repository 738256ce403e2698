package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

var (
	// errBypass: the block cannot be filled now (every fill slot taken,
	// or the disk refused the write); the reader streams from the origin.
	errBypass = errors.New("cache: disk busy: bypass")
	// errFillFailed: the origin read filling a block failed, and retries
	// did not help.
	errFillFailed = errors.New("cache: fill failed")
)

// fillRetries is how many times a fill reopens the origin at the offset
// reached before it gives up (an origin given as one URL; the federation
// fails over to another replica by itself).
const fillRetries = 3

// slot is one block being fetched. Its fill closes done when the fetch
// ends (present or failed), and hands the block's bytes to the readers
// that claimed it, so that they need not read back from disk what the
// fill has just written.
type slot struct {
	done chan struct{}
	// waiters counts the readers that claimed the block (they wait for
	// it, or will read it next); buf is the block, set before done is
	// closed, with a reference for each of them, when the fill recorded
	// it in its epoch. Both are guarded by the file's mu. A claim ends
	// once, by collect.
	waiters int
	buf     *blockBuf
	// wake is the run's: a claim wakes a run paused for its reader.
	wake chan struct{}
}

// claimLocked adds a claim on s, and wakes its run should it wait for
// one.
func (s *slot) claimLocked() {
	s.waiters++
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// maxClaims bounds the blocks a reader claims beyond the one it waits
// for: a fill faster than its reader keeps that many blocks for it in
// memory, rather than have the reader read them back from disk.
//
// A run is paced to the reader that started it: while that reader
// reads, the run fetches a block only when a reader has claimed it or a
// block after it (pace), so it never gets further ahead than the
// reader's claims reach, and every block the reader will read comes to
// it in the fill's buffer. Without the pace, a run started maxRun
// blocks ahead (the next one, under way while the reader reads this
// one) ran at the origin's speed, wrote its blocks, and the reader read
// them back from disk: 40 % of a cold miss's CPU. So a reader holds at
// most maxClaims blocks, plus the one it sends. Another reader's claim
// or wait moves a paused run on, so a slow reader holds back no other;
// once the reader is done (or gone), or has taken nothing for
// MaxFillPause, its runs go on unpaced to their end, as a prefetch. A paused run holds its origin read open without
// reading it: the idle watch (idleReader) runs only while a Read waits,
// so a pause is not taken for a stalled origin (a pause inside the
// watch would be cancelled as a stall, reopened, paused and cancelled
// again until the fill gave up, breaking the reader's transfer). It
// holds no fill slot while paused (pace). Within a run, the origin read
// of a block overlaps the disk write of the one before (fill).
const maxClaims = 8

// blockBuf is a block's bytes shared by the readers a fill handed it to;
// the last to release it returns the buffer to the pool. Its bytes are
// never changed.
type blockBuf struct {
	bp   *[]byte
	b    []byte
	refs atomic.Int32
}

func (c *Cache) release(bb *blockBuf) {
	if bb != nil && bb.refs.Add(-1) == 0 {
		c.bufs.Put(bb.bp)
	}
}

// await returns once block i of f's epoch is on disk, starting the fills
// it needs: the blocks of the reader's window that are neither there nor
// being fetched, one origin read per run of adjacent missing blocks (at
// most maxRun long), reaching ahead to ahead (the last block the reader
// wants, plus the prefetch of a sequential reader). When the reader
// waited for the fill that recorded the block, it also gets the block's
// bytes (bb, checked and of the epoch: the caller releases it);
// otherwise bb is nil and the block is read from disk. The blocks being
// fetched after i, up to maxClaims of them within ahead, are claimed
// into claims (those not claimed already), for the reader to collect.
// It returns errBypass when the block cannot be filled now, errChanged
// when the epoch is gone.
//
// The runs it starts are paced to the reader's claims until done is
// closed (the reader is done); nil: not paced.
func (c *Cache) await(ctx context.Context, f *file, epoch uint64, i, ahead int64, claims map[int64]*slot, done <-chan struct{}) (bb *blockBuf, err error) {
	for attempt := 0; ; attempt++ {
		f.mu.Lock()
		if f.epoch != epoch || f.gone {
			f.mu.Unlock()
			return nil, errChanged
		}
		if f.have[i] {
			f.mu.Unlock()
			return nil, nil
		}
		if attempt > 0 && errors.Is(f.fillErr, errBypass) {
			f.mu.Unlock()
			return nil, errBypass
		}
		// A fill that failed has retried the origin fillRetries times
		// already: the reader does not start the same wait again.
		if attempt > 0 && errors.Is(f.fillErr, errFillFailed) || attempt > fillRetries {
			err := f.fillErr
			f.mu.Unlock()
			return nil, fmt.Errorf("%w: block %d of %s: %w", errFillFailed, i, f.path, err)
		}
		c.startRunsLocked(f, i, min(ahead, f.hdr.blocks()-1), done)
		s := f.filling[i]
		if s == nil {
			f.mu.Unlock()
			return nil, errBypass
		}
		s.claimLocked()
		claimLocked(f, i, ahead, claims)
		f.mu.Unlock()
		if bb, err = c.collect(ctx, f, s); err != nil || bb != nil {
			return bb, err
		}
	}
}

// claimLocked claims, into claims, the blocks after i being fetched, up
// to maxClaims of them within ahead, that are not claimed already.
func claimLocked(f *file, i, ahead int64, claims map[int64]*slot) {
	for j := i + 1; j <= min(ahead, i+maxClaims); j++ {
		if s := f.filling[j]; s != nil && claims[j] == nil {
			s.claimLocked()
			claims[j] = s
		}
	}
}

// collect ends a claim on s: it waits for the fetch to end, and returns
// the block's bytes when the fill handed them over (the caller releases
// them), else nil. It returns ctx's error, the claim ended, when ctx is
// done first.
func (c *Cache) collect(ctx context.Context, f *file, s *slot) (*blockBuf, error) {
	var err error
	select {
	case <-s.done:
	default:
		c.m.waits.Inc()
		select {
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	f.mu.Lock()
	s.waiters--
	bb := s.buf
	f.mu.Unlock()
	if err != nil {
		c.release(bb)
		return nil, err
	}
	return bb, nil
}

// unclaim ends a claim on s that the reader will not collect, without
// waiting.
func (c *Cache) unclaim(f *file, s *slot) {
	f.mu.Lock()
	s.waiters--
	bb := s.buf
	f.mu.Unlock()
	c.release(bb)
}

// startRunsLocked starts fills for the blocks from i to ahead that are
// missing and not being fetched, within maxRun of i (a run that starts
// there reaches maxRun further, up to ahead): the reader has the next
// run under way while it reads this one. The runs are paced to the
// reader's claims until done is closed (see maxClaims).
func (c *Cache) startRunsLocked(f *file, i, ahead int64, done <-chan struct{}) {
	window := min(ahead, i+maxRun)
	for b := i; b <= window; b++ {
		if f.have[b] || f.filling[b] != nil {
			continue
		}
		last := b
		for last+1 <= ahead && last+1-b < maxRun && !f.have[last+1] && f.filling[last+1] == nil {
			last++
		}
		select {
		case c.fills <- struct{}{}:
		default:
			c.m.fillsRefused.Inc()
			return // every slot taken: the reader of block i bypasses
		}
		d, dd, err := c.openData(f.dataPath())
		if err != nil {
			<-c.fills
			c.log.Warn("cache: cannot open a data file to fill it", "path", f.path, "err", err)
			return
		}
		wake := make(chan struct{}, 1)
		slots := make([]*slot, last-b+1)
		for k := range slots {
			slots[k] = &slot{done: make(chan struct{}), wake: wake}
			f.filling[b+int64(k)] = slots[k]
		}
		r := &run{f: f, epoch: f.epoch, hdr: f.hdr, first: b, last: last, slots: slots, d: d, direct: dd, reader: i,
			readerDone: done, wake: wake, slotHeld: true}
		c.wg.Go(func() { c.fill(r) })
		b = last
	}
}

// run is one origin read filling blocks first..last of an epoch.
type run struct {
	f           *file
	epoch       uint64
	hdr         header
	first, last int64
	slots       []*slot
	d           *os.File
	direct      *os.File // d opened for direct I/O; nil: none
	reader      int64    // the block the reader that started it waits for
	// readerDone is closed when the reader that started the run is
	// done; until then the run is paced to claims (pace). The fill sets
	// it to nil once it is closed.
	readerDone <-chan struct{}
	wake       chan struct{} // a claim on one of its slots
	slotHeld   bool          // it holds one of c.fills (not while paused)
}

// pace returns once block next is to be fetched: a reader claimed it or
// a block after it, or the reader that started the run is done or has
// waited MaxFillPause without reading. It
// returns an error only when the cache closes. While it waits, the run
// gives its fill slot back: MaxFills bounds the origin reads filling
// the disk at once, and a paused one fills nothing, so slow readers'
// runs do not take the slots of other readers' fills (they would
// bypass the cache). It waits for a slot again before it goes on: the
// runs that hold them are fetching, and give them back soon.
func (c *Cache) pace(r *run, next int64) error {
	for r.readerDone != nil {
		r.f.mu.Lock()
		wanted := slices.ContainsFunc(r.slots[next-r.first:], func(s *slot) bool { return s.waiters > 0 })
		r.f.mu.Unlock()
		if wanted {
			return nil
		}
		c.m.fillsPaused.Inc()
		<-c.fills
		r.slotHeld = false
		t := time.NewTimer(c.cfg.MaxFillPause)
		select {
		case <-r.wake:
		case <-r.readerDone:
			r.readerDone = nil
		case <-t.C:
			// The reader stopped reading: fill the run to its end, to
			// disk, as before it was paced, rather than hold the
			// origin's connection for as long as the client holds its
			// own.
			r.readerDone = nil
		case <-c.ctx.Done():
		}
		t.Stop()
		c.m.fillsPaused.Dec()
		select {
		case c.fills <- struct{}{}:
			r.slotHeld = true
		case <-c.ctx.Done():
		}
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", errFillFailed, err)
		}
	}
	return nil
}

// openData opens a data file for a fill: d, and direct, the same file
// for direct I/O when the cache writes that way.
func (c *Cache) openData(p string) (d, direct *os.File, err error) {
	d, err = os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil || !c.direct {
		return d, nil, err
	}
	direct, err = os.OpenFile(p, os.O_WRONLY|oDirect, 0)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, direct, nil
}

// write writes block i: with direct I/O when the run has it and the
// block is whole multiples of dioAlign (every one but a short last),
// else through the page cache.
func (r *run) write(b []byte, i int64) error {
	w := r.d
	if r.direct != nil && len(b)%dioAlign == 0 {
		w = r.direct
	}
	_, err := w.WriteAt(b, i*r.hdr.Block)
	return err
}

// fill reads the run's blocks from the origin and takes each one's
// CRC-32C, and its writer (recordRun, a goroutine of the run) takes its
// adler32, writes it to the data file, records it, and wakes its
// waiters: the disk write of a block overlaps the origin read of the
// next, where a cold miss used to wait on the one and then the other
// (the two checksums split so that the two sides take about as long).
// One block waits between them, so a run holds three buffers at most.
// Every block not recorded is released with the reason in f.fillErr.
func (c *Cache) fill(r *run) {
	f, hdr := r.f, r.hdr
	next := r.first
	var err error
	blocks := make(chan fetched, 1)
	recorded := make(chan recordResult, 1)
	c.wg.Go(func() { recorded <- c.recordRun(r, blocks) })
	var res recordResult
	var stopped bool // res came
	defer func() {
		close(blocks)
		if !stopped {
			res = <-recorded
		}
		for blk := range blocks {
			c.bufs.Put(blk.bp) // left when the writer stopped
		}
		if err == nil {
			err = res.err
		}
		r.d.Close()
		if r.direct != nil {
			r.direct.Close()
		}
		if r.slotHeld {
			<-c.fills
		}
		f.mu.Lock()
		if f.epoch == r.epoch {
			f.fillErr = err
		}
		for b := res.next; b <= r.last; b++ {
			s := r.slots[b-r.first]
			if f.filling[b] == s {
				delete(f.filling, b)
			}
			close(s.done)
		}
		complete := f.epoch == r.epoch && !f.gone && f.present == hdr.blocks() && !f.verified && !f.verifying
		if complete {
			f.verifying = true
		}
		f.mu.Unlock()
		if complete {
			c.wg.Go(func() { c.verify(f, r.epoch) })
		}
	}()
	// bp is the buffer of the next block; the writer has the ones sent.
	bp := c.bufs.Get().(*[]byte)
	defer func() { c.bufs.Put(bp) }()
	var rc io.ReadCloser
	// proven: the bytes rc reads are those of the blocks on disk, because
	// the origin's versions are strong, or a block was read again and
	// matched (prove), or rc's blocks are the first of the epoch.
	var proven bool
	// peer: rc reads from the member that held the path before this
	// node (openPeer); only the run's first open asks it.
	var peer, asked bool
	defer func() {
		if rc != nil {
			rc.Close()
		}
	}()
	for tries := 0; next <= r.last; {
		if rc == nil {
			off := next * hdr.Block
			end := min(hdr.Size, (r.last+1)*hdr.Block)
			rc, proven, peer, err = c.openRun(f.path, hdr, off, end-off, !asked)
			asked = true
			if err != nil && !errors.Is(err, errChanged) {
				c.log.Warn("cache: cannot open the origin; retrying", "path", f.path, "offset", off, "err", err)
			}
			if errors.Is(err, errChanged) {
				c.changed(f, r.epoch)
				return
			}
			if err != nil {
				if tries++; tries > fillRetries || c.ctx.Err() != nil {
					err = fmt.Errorf("%w: %w", errFillFailed, err)
					return
				}
				sleep(c.ctx, time.Duration(tries)*100*time.Millisecond)
				continue
			}
		}
		// Paused between reads of the origin, never within one: the
		// idle watch does not run.
		if err = c.pace(r, next); err != nil {
			return
		}
		b := (*bp)[:hdr.blockLen(next)]
		if _, rerr := io.ReadFull(rc, b); rerr != nil {
			rc.Close()
			rc = nil
			c.log.Warn("cache: origin read broke; reopening at the offset reached", "path", f.path, "offset", next*hdr.Block, "err", rerr)
			if tries++; tries > fillRetries || c.ctx.Err() != nil {
				err = fmt.Errorf("%w: %w", errFillFailed, rerr)
				return
			}
			continue
		}
		tries = 0
		blk := fetched{i: next, bp: bp, b: b, crc: crc32.Checksum(b, castagnoli), proven: proven, peer: peer}
		select {
		case blocks <- blk:
		case res = <-recorded:
			stopped = true
			return
		}
		// The writer proves the first block of an unproven read before
		// it records it, and stops if it cannot: the blocks after it
		// join it.
		proven = true
		bp = c.bufs.Get().(*[]byte)
		next++
	}
}

// fetched is a block a run read from the origin, checked, for its writer.
type fetched struct {
	i   int64
	bp  *[]byte
	b   []byte
	crc uint32
	// proven: the read that brought it is proven of the version on
	// disk (fill); peer: it came from a group member.
	proven, peer bool
}

// recordResult is how far a run's writer recorded (the first block it
// did not) and why it stopped, nil when it ran out of blocks.
type recordResult struct {
	next int64
	err  error
}

// recordRun writes and records the blocks of r as they come, in order,
// until blocks is closed or one cannot be (the disk refused it, or its
// read could not be proven of the version on disk).
func (c *Cache) recordRun(r *run, blocks <-chan fetched) recordResult {
	next := r.first
	for blk := range blocks {
		handed, err := c.recordBlock(r, blk)
		if !handed {
			c.bufs.Put(blk.bp)
		}
		if err != nil {
			return recordResult{next, err}
		}
		next++
	}
	return recordResult{next, nil}
}

// recordBlock writes block blk.i to the data file and records it in the
// epoch, proven first when its read could not say it is of the version
// on disk, and wakes its waiters; handed says they took its buffer.
func (c *Cache) recordBlock(r *run, blk fetched) (handed bool, err error) {
	f, b, next := r.f, blk.b, blk.i
	ah := httpx.NewAdler32()
	ah.Write(b)
	adler := ah.Sum32() // combined into the file's at completion: no re-read to verify it
	if werr := r.write(b, next); werr != nil {
		c.m.diskErrors.Inc()
		c.log.Warn("cache: cannot write a block; readers go to the origin", "path", f.path, "err", werr)
		c.wantPurge()
		return false, fmt.Errorf("%w: %w", errBypass, werr)
	}
	if blk.peer {
		c.m.peerFillBytes.Add(float64(len(b)))
	} else {
		c.m.originBytes.Add(float64(len(b)))
	}
	f.mu.Lock()
	if !blk.proven && f.epoch == r.epoch && f.present > 0 {
		// Blocks of another read are on disk, and nothing says this
		// one is of the same bytes (weak validators, a restarted
		// server): prove it before any of its blocks joins them.
		f.mu.Unlock()
		if _, perr := c.prove(c.ctx, f, r.epoch, next); perr != nil {
			if !errors.Is(perr, errChanged) {
				perr = fmt.Errorf("%w: %w", errFillFailed, perr)
			}
			return false, perr
		}
		f.mu.Lock()
	}
	// Proven, or the first blocks of the epoch: the others are proven
	// against these.
	s := r.slots[next-r.first]
	if f.epoch == r.epoch && !f.gone && !f.have[next] {
		if aerr := f.appendLocked(uint32(next), blk.crc); aerr == nil {
			if s.waiters > 0 {
				// Recorded, proven and of the epoch they wait on: the
				// waiters serve these bytes as they are.
				s.buf = &blockBuf{bp: blk.bp, b: b}
				s.buf.refs.Store(int32(s.waiters))
				handed = true
			}
			f.have[next], f.crcs[next] = true, blk.crc
			f.adlers[next], f.adlerOK[next] = adler, true
			f.present++
			f.bytes += int64(len(b))
			// Under f.mu, so that a drop racing this block takes it off
			// the totals after it was put on them.
			c.account(int64(len(b)), 0)
			if next != r.reader && next > r.reader {
				f.prefetched[next] = true
			}
		}
	}
	if f.filling[next] == s {
		delete(f.filling, next)
	}
	f.mu.Unlock()
	close(s.done)
	return handed, nil
}

// openRun opens n bytes of p at off for a run: from the member that held
// p before this node owned it, when first and it has them (openPeer),
// else from the origin (a read that broke reopens there); peer says
// which.
func (c *Cache) openRun(p string, hdr header, off, n int64, first bool) (rc io.ReadCloser, proven, peer bool, err error) {
	if first {
		if rc := c.openPeer(p, hdr, off, n); rc != nil {
			return rc, true, true, nil
		}
	}
	rc, proven, err = c.openWatched(p, hdr, off, n)
	return rc, proven, false, err
}

// openOrigin opens n bytes of p at off on the origin and checks that the
// reader is of the version hdr describes; errChanged when not. proven
// says the reader proves it reads the bytes of that version
// (endpoint.SameBytes: strong validators, equal); when not, a caller
// that joins its bytes to blocks on disk proves it first (prove).
func (c *Cache) openOrigin(ctx context.Context, p string, hdr header, off, n int64) (rc io.ReadCloser, proven bool, err error) {
	rc, err = c.origin.Open(ctx, p, off, n)
	if err != nil {
		// Gone, or shorter than the cached version says (the cache
		// reads only within it): another version, not a failure.
		if endpoint.Class(err) == endpoint.ErrNotFound || errors.Is(err, endpoint.ErrBeyondEnd) {
			return nil, false, fmt.Errorf("%w: %w", errChanged, err)
		}
		return nil, false, err
	}
	ver, ok := endpoint.VersionOf(rc)
	if ok && !endpoint.SameVersion(hdr.version(), ver) {
		rc.Close()
		return nil, false, fmt.Errorf("%w: cached as %s, origin now %s", errChanged, describe(hdr.version()), describe(ver))
	}
	return rc, ok && endpoint.SameBytes(hdr.version(), ver), nil
}

// openWatched is openOrigin for the cache's own reads: the open is
// bounded by OriginIdleTimeout (a stopped server accepts the connection
// and never answers), and so is each read of the reader it returns.
func (c *Cache) openWatched(p string, hdr header, off, n int64) (io.ReadCloser, bool, error) {
	octx, cancel := context.WithCancelCause(c.ctx)
	ot := time.AfterFunc(c.cfg.OriginIdleTimeout, func() { cancel(errOriginIdle) })
	rc, proven, err := c.openOrigin(octx, p, hdr, off, n)
	ot.Stop()
	if err != nil {
		if errors.Is(context.Cause(octx), errOriginIdle) {
			err = fmt.Errorf("%w: %w", errOriginIdle, err)
		}
		cancel(nil)
		return nil, false, err
	}
	return newIdleReader(rc, c.cfg.OriginIdleTimeout, cancel), proven, nil
}

// prove checks that the origin still holds the bytes of the blocks of
// f's epoch on disk, for a read of it that cannot say so itself (weak
// validators: nginx's ETag is the modification time and the size, which
// a file replaced with its time kept shares). It reads the block on
// disk nearest to block near again, in a read opened after the one to
// prove, and compares its CRC-32C: a file replaced before that read was
// opened differs there. It returns nil when the block matched, or when
// no block is on disk (nothing to join), and errChanged, the epoch
// dropped, when it did not; compared says whether a block was read.
//
// One block is a sample: a new version that differs from the old only
// outside it is not caught here (a complete file still is, by the
// origin's adler32, when the origin gives one).
func (c *Cache) prove(ctx context.Context, f *file, epoch uint64, near int64) (compared bool, err error) {
	f.mu.Lock()
	if f.epoch != epoch || f.gone {
		f.mu.Unlock()
		return false, errChanged
	}
	i := nearestPresent(f.have, near)
	if i < 0 {
		f.mu.Unlock()
		return false, nil
	}
	hdr, want := f.hdr, f.crcs[i]
	f.mu.Unlock()
	c.m.probes.Inc()
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	b := (*bp)[:hdr.blockLen(i)]
	rc, _, err := c.openWatched(f.path, hdr, i*hdr.Block, int64(len(b)))
	if err == nil {
		_, err = io.ReadFull(ctxReader{ctx, rc}, b)
		rc.Close()
	}
	if errors.Is(err, errChanged) {
		c.changed(f, epoch)
		return false, err
	}
	if err != nil {
		return false, fmt.Errorf("cache: %s: reading block %d again to prove the origin unchanged: %w", f.path, i, err)
	}
	if crc32.Checksum(b, castagnoli) != want {
		c.log.Info("cache: origin file replaced under the same validators; dropping its blocks", "path", f.path, "block", i)
		c.changed(f, epoch)
		return true, fmt.Errorf("%w: block %d is not the one on disk", errChanged, i)
	}
	return true, nil
}

// nearestPresent is the index of the present block nearest to i, below
// it first; -1 when none is.
func nearestPresent(have []bool, i int64) int64 {
	for d := int64(0); i-d >= 0 || i+d < int64(len(have)); d++ {
		if j := i - d; j >= 0 && j < int64(len(have)) && have[j] {
			return j
		}
		if j := i + d; j >= 0 && j < int64(len(have)) && have[j] {
			return j
		}
	}
	return -1
}

// ctxReader stops a read when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// changed handles an origin file found changed by a fill: the blocks of
// the epoch are dropped, and the next request looks the file up again.
func (c *Cache) changed(f *file, epoch uint64) {
	f.mu.Lock()
	same := f.epoch == epoch
	f.mu.Unlock()
	if same {
		c.m.changed.Inc()
		c.drop(f)
	}
}

// verify checks a complete file against the origin's adler32, reading it
// back block by block (each block's CRC-32C too). A mismatch drops the
// file: it was filled from bytes the origin does not vouch for.
func (c *Cache) verify(f *file, epoch uint64) {
	defer func() {
		f.mu.Lock()
		f.verifying = false
		f.mu.Unlock()
	}()
	f.mu.Lock()
	hdr, crcs := f.hdr, append([]uint32(nil), f.crcs...)
	adlers, adlerOK := append([]uint32(nil), f.adlers...), append([]bool(nil), f.adlerOK...)
	f.mu.Unlock()
	want := hdr.Adler32
	if want == "" {
		sum, err := endpoint.Checksum(c.ctx, c.origin, f.path, httpx.Adler32)
		if err != nil {
			c.m.unverified.Inc()
			return
		}
		want = sum
	}
	var got string
	if combined, ok := combineAdlers(hdr, adlers, adlerOK); ok {
		got = fmt.Sprintf("%08x", combined)
	} else {
		// Blocks filled by an earlier run have no adler32 in memory:
		// read the file back.
		d, err := os.Open(f.dataPath())
		if err != nil {
			return
		}
		defer d.Close()
		bp := c.bufs.Get().(*[]byte)
		defer c.bufs.Put(bp)
		h := httpx.NewAdler32()
		for i := range hdr.blocks() {
			b, ok, err := readBlock(d, hdr, i, crcs[i], *bp)
			if err != nil || c.ctx.Err() != nil {
				return
			}
			if !ok {
				c.corrupt(f, epoch, i)
				return // the next reader fetches it again; verify runs again then
			}
			h.Write(b)
		}
		got = fmt.Sprintf("%08x", h.Sum32())
	}
	f.mu.Lock()
	same := f.epoch == epoch && !f.gone
	f.mu.Unlock()
	if !same {
		return
	}
	if got != want {
		c.m.sumMismatches.Inc()
		c.log.Error("cache: a complete file does not match the origin's adler32; dropping it", "path", f.path, "cached", got, "origin", want)
		c.drop(f)
		return
	}
	f.mu.Lock()
	if f.epoch == epoch && !f.gone && f.appendLocked(recVerified, 0) == nil {
		f.verified = true
	}
	f.mu.Unlock()
	c.m.verified.Inc()
}

// corrupt forgets block i of the epoch: its bytes on disk do not match
// their CRC-32C. The next reader fetches it again.
func (c *Cache) corrupt(f *file, epoch uint64, i int64) {
	c.m.corruptBlocks.Inc()
	c.log.Error("cache: a block on disk does not match its checksum; fetching it again", "path", f.path, "block", i)
	f.mu.Lock()
	n := int64(0)
	if f.epoch == epoch && !f.gone && f.have[i] {
		f.have[i] = false
		f.present--
		n = f.hdr.blockLen(i)
		f.bytes -= n
		f.verified = false
		c.account(-n, 0)
	}
	f.mu.Unlock()
	if c.ram != nil {
		c.ram.forget(f.key, epoch, i)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// combineAdlers is the adler32 of the whole file from the adler32 of each
// block, computed as the blocks were filled (zlib's adler32_combine); ok
// is false when a block's is not known.
func combineAdlers(hdr header, adlers []uint32, known []bool) (uint32, bool) {
	sum := uint32(1) // the adler32 of nothing
	for i := range hdr.blocks() {
		if !known[i] {
			return 0, false
		}
		sum = adler32Combine(sum, adlers[i], hdr.blockLen(i))
	}
	return sum, true
}

// adler32Combine is the adler32 of A followed by B, from the adler32 of
// each and B's length (zlib's adler32_combine).
func adler32Combine(a1, a2 uint32, len2 int64) uint32 {
	const base = 65521
	rem := uint32(len2 % base)
	sum1 := a1 & 0xffff
	sum2 := (rem * sum1) % base
	sum1 += (a2 & 0xffff) + base - 1
	sum2 += (a1 >> 16) + (a2 >> 16) + base - rem
	if sum1 >= base {
		sum1 -= base
	}
	if sum1 >= base {
		sum1 -= base
	}
	if sum2 >= base<<1 {
		sum2 -= base << 1
	}
	if sum2 >= base {
		sum2 -= base
	}
	return sum1 | sum2<<16
}

// errOriginIdle: the origin sent nothing for OriginIdleTimeout in the
// middle of a body (a stalled or stopped server); the fill reopens at
// the offset reached, and gives up after fillRetries.
var errOriginIdle = errors.New("cache: the origin sent nothing for the idle timeout")

// idleReader cancels its read's context when one Read waits longer than
// idle, so a stalled origin (kill -STOP) fails the read instead of
// holding the fill, its slot and every waiting reader forever. The timer
// runs only while a Read waits.
type idleReader struct {
	r      io.ReadCloser
	t      *time.Timer
	idle   time.Duration
	cancel context.CancelCauseFunc
}

func newIdleReader(r io.ReadCloser, idle time.Duration, cancel context.CancelCauseFunc) *idleReader {
	ir := &idleReader{r: r, idle: idle, cancel: cancel}
	ir.t = time.AfterFunc(idle, func() { cancel(errOriginIdle) })
	ir.t.Stop()
	return ir
}

func (ir *idleReader) Read(p []byte) (int, error) {
	ir.t.Reset(ir.idle)
	n, err := ir.r.Read(p)
	ir.t.Stop()
	return n, err
}

func (ir *idleReader) Close() error {
	ir.t.Stop()
	err := ir.r.Close()
	ir.cancel(nil)
	return err
}
