package xroot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"go-hep.org/x/hep/xrootd/xrdfs"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// openFile opens rp for reading (kXR_open kXR_open_read|kXR_retstat) and
// returns the session it lives on, its handle and its size.
func (e *Endpoint) openFile(ctx context.Context, op, p, rp string) (*session, xrdfs.File, int64, error) {
	s, err := e.session(ctx)
	if err != nil {
		return nil, nil, 0, wrapErr(op, p, err)
	}
	var f xrdfs.File
	err = e.await(ctx, s, e.timeout, func() error {
		var err error
		f, err = s.cli.FS().Open(s.sctx, rp, 0, xrdfs.OpenOptionsOpenRead|xrdfs.OpenOptionsReturnStatus)
		return err
	})
	if err != nil {
		if serverCode(err) == codeIsDirectory {
			return nil, nil, 0, opErr(op, p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
		}
		return nil, nil, 0, wrapErr(op, p, err)
	}
	if st := f.Info(); st != nil {
		if st.Flags&xrdfs.StatIsDir != 0 {
			e.closeFile(s, f)
			return nil, nil, 0, opErr(op, p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
		}
		return s, f, st.EntrySize, nil
	}
	var st xrdfs.EntryStat
	err = e.await(ctx, s, e.timeout, func() error {
		var err error
		st, err = f.Stat(s.sctx)
		return err
	})
	if err != nil {
		e.closeFile(s, f)
		return nil, nil, 0, wrapErr(op, p, err)
	}
	return s, f, st.EntrySize, nil
}

// closeFile sends kXR_close for f in the background, bounded by Timeout,
// once the calls in pending (reads still in flight) have ended.
func (e *Endpoint) closeFile(s *session, f xrdfs.File, pending ...<-chan error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		ctx := context.Background()
		for _, ch := range pending {
			if e.wait(ctx, s, e.timeout, ch) != nil && !s.alive() {
				return
			}
		}
		if !s.alive() {
			return // the handle died with the session
		}
		_ = e.await(ctx, s, e.timeout, func() error { return f.Close(s.sctx) })
	}()
}

// Open reads n bytes of p from off (n < 0: to the end). It opens the file
// (kXR_open, which also gives its size), then streams it with a few
// large kXR_read requests in flight, on a connection of its own (direct.go
// explains why); for servers that need authentication or redirect it goes
// through the shared go-hep session instead, with ReadAhead kXR_reads of
// ChunkSize in flight. The
// server must send something at least every Timeout. off beyond the
// size, and a directory, wrap ErrRefused; a range running past the end
// is cut at the end (the size at open). A file that shrinks while it is
// read gives a reader error wrapping io.ErrUnexpectedEOF. The reader
// honours ctx.
func (e *Endpoint) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, opErr("open", p, fmt.Errorf("%w: negative offset", endpoint.ErrRefused))
	}
	rp, err := e.remote(p)
	if err != nil {
		return nil, wrapErr("open", p, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapErr("open", p, ctxErr(ctx))
	}
	if e.isClosed() {
		return nil, opErr("open", p, fmt.Errorf("%w: endpoint closed", endpoint.ErrUnavailable))
	}
	if !e.noDirect.Load() {
		rc, err := e.openDirect(ctx, p, rp, off, n)
		switch {
		case errors.Is(err, errFallback):
			e.noDirect.Store(true)
			e.log.Debug("xroot direct reads off: server needs authentication or redirects", "addr", e.addr)
		case !errors.Is(err, errTryGoHEP):
			return rc, err
		}
	}
	s, f, size, err := e.openFile(ctx, "open", p, rp)
	if err != nil {
		return nil, err
	}
	if off > size {
		e.closeFile(s, f)
		return nil, opErr("open", p, endpoint.BeyondEnd(off, size))
	}
	end := size
	if n >= 0 && off+n < size {
		end = off + n
	}
	return &reader{e: e, ctx: ctx, s: s, f: f, p: p, next: off, end: end, size: size}, nil
}

// reader streams one file. It is not safe for concurrent use (io.Reader).
type reader struct {
	e    *Endpoint
	ctx  context.Context
	s    *session
	f    xrdfs.File
	p    string
	next int64 // offset of the next chunk to ask for
	end  int64 // where the caller wants to stop
	size int64 // the file's size at open

	inflight []*chunk // asked for, in file order
	cur      []byte   // received, not yet returned
	err      error    // sticky
	closed   bool
}

// Version is the size of the file the open found.
func (r *reader) Version() endpoint.Info { return endpoint.Info{Size: r.size} }

// chunk is one kXR_read in flight.
type chunk struct {
	off  int64
	buf  []byte
	n    int // valid once done has delivered
	done <-chan error
}

// fill keeps ReadAhead chunks in flight.
func (r *reader) fill() {
	for len(r.inflight) < ReadAhead && r.next < r.end {
		want := min(int64(ChunkSize), r.end-r.next)
		c := &chunk{off: r.next, buf: make([]byte, want)}
		s, f := r.s, r.f
		c.done = start(func() error {
			n, err := f.ReadAtContext(s.sctx, c.buf, c.off)
			c.n = n
			return err
		})
		r.inflight = append(r.inflight, c)
		r.next += want
	}
}

// Read returns the next bytes of the range.
func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, opErr("read", r.p, fmt.Errorf("reader closed"))
	}
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.fill()
		if len(r.inflight) == 0 {
			r.err = io.EOF
			return 0, io.EOF
		}
		c := r.inflight[0]
		// Whatever wait returns, c.done is consumed or watched now.
		r.inflight = r.inflight[1:]
		if err := r.e.wait(r.ctx, r.s, r.e.timeout, c.done); err != nil {
			r.err = wrapErr("read", r.p, err)
			return 0, r.err
		}
		r.cur = c.buf[:c.n]
		if c.n < len(c.buf) {
			// Deliver what came, then fail: the file shrank since open.
			r.err = opErr("read", r.p, fmt.Errorf("%w: %w: file ends at %d, range ends at %d", endpoint.ErrUnavailable, io.ErrUnexpectedEOF, c.off+int64(c.n), r.end))
			r.inflight = nil
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// Close releases the file handle (in the background, after the reads in
// flight end). It always returns nil.
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	pending := make([]<-chan error, 0, len(r.inflight))
	for _, c := range r.inflight {
		pending = append(pending, c.done)
	}
	r.inflight, r.cur = nil, nil
	r.e.closeFile(r.s, r.f, pending...)
	return nil
}

// Range is one piece of a vector read: Len bytes from Off.
type Range struct {
	Off, Len int64
}

// maxReadV bounds the reads of one ReadV in flight at once.
const maxReadV = 16

// ReadV reads several ranges of p in one go and returns their bytes in
// order: the vector read ROOT's TTreeCache and the block cache use. It
// opens p once and sends one kXR_read per range (up to maxReadV in flight,
// on one connection), so many small ranges cost about one round trip.
// (go-hep's client has no kXR_readv; a server sees the same reads an
// xrdcp would send without it.) The whole call is bounded by Timeout.
// A range past the end of the file wraps ErrRefused.
//
// The cache and proxy find this power by type assertion on
// interface{ ReadV(context.Context, string, []xroot.Range) ([][]byte, error) }.
func (e *Endpoint) ReadV(ctx context.Context, p string, ranges []Range) ([][]byte, error) {
	rp, err := e.remote(p)
	if err != nil {
		return nil, wrapErr("readv", p, err)
	}
	for _, rg := range ranges {
		if rg.Off < 0 || rg.Len < 0 || rg.Len > math.MaxInt32 {
			return nil, opErr("readv", p, fmt.Errorf("%w: bad range %d+%d", endpoint.ErrRefused, rg.Off, rg.Len))
		}
	}
	s, f, size, err := e.openFile(ctx, "readv", p, rp)
	if err != nil {
		return nil, err
	}
	for _, rg := range ranges {
		if rg.Off+rg.Len > size {
			e.closeFile(s, f)
			return nil, opErr("readv", p, fmt.Errorf("%w: range %d+%d beyond size %d", endpoint.ErrRefused, rg.Off, rg.Len, size))
		}
	}
	out := make([][]byte, len(ranges))
	for i, rg := range ranges {
		out[i] = make([]byte, rg.Len)
	}
	done := start(func() error {
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			firstErr error
		)
		sem := make(chan struct{}, maxReadV)
		for i, rg := range ranges {
			if rg.Len == 0 {
				continue
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				n, err := f.ReadAtContext(s.sctx, out[i], rg.Off)
				if err == nil && n != len(out[i]) {
					err = fmt.Errorf("%w: short read at %d: %d of %d bytes", endpoint.ErrUnavailable, rg.Off, n, rg.Len)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return firstErr
	})
	if err := e.wait(ctx, s, e.timeout, done); err != nil {
		e.closeFile(s, f)
		return nil, wrapErr("readv", p, err)
	}
	e.closeFile(s, f)
	return out, nil
}
