package xroot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// Put stores r as p. XRootD writes in place, so Put writes a hidden
// temporary file beside p (kXR_open kXR_new|kXR_mkpath, which also makes
// the missing parents), streams r into it in ChunkSize kXR_writes (one in
// flight while the next chunk is read from r), closes it and renames it
// onto p (kXR_mv, which replaces a file there). A failed Put removes the
// temporary file, so nothing new is visible and the old p, if any, is
// untouched. size, when not -1, must equal the bytes in r; a mismatch
// wraps ErrRefused. p being a directory wraps ErrRefused.
func (e *Endpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	rp, err := e.remote(p)
	if err != nil {
		return wrapErr("put", p, err)
	}
	if rp == e.base {
		return opErr("put", p, fmt.Errorf("%w: the endpoint root", endpoint.ErrRefused))
	}
	tmp := tempName(rp)
	// The open goes through doSession, which retries it on a fresh
	// session when the current one dies under it: nothing of r is read
	// before the open succeeds.
	var f xrdfs.File
	s, err := e.doSession(ctx, e.timeout, func(s *session) error {
		var err error
		f, err = s.cli.FS().Open(s.sctx, tmp, 0o644, xrdfs.OpenOptionsNew|xrdfs.OpenOptionsMkPath)
		return err
	})
	if err != nil {
		if serverCode(err) == codeNotFile || serverCode(err) == codeIsDirectory ||
			serverCode(err) == codeFSError || serverCode(err) == codeIOError {
			// The parent path runs into a file.
			if in, serr := e.Stat(ctx, parent(p)); serr == nil && !in.IsDir {
				return opErr("put", p, fmt.Errorf("%w: parent is a file", endpoint.ErrRefused))
			}
		}
		return wrapErr("put", p, err)
	}
	written, err := e.write(ctx, s, f, r, size)
	if err == nil && size >= 0 && written != size {
		err = fmt.Errorf("%w: got %d bytes, size says %d", endpoint.ErrRefused, written, size)
	}
	if err == nil {
		err = e.await(ctx, s, e.timeout, func() error { return f.Close(s.sctx) })
		f = nil
	}
	if err == nil {
		err = e.await(ctx, s, e.timeout, func() error { return s.cli.FS().Rename(s.sctx, tmp, rp) })
		if err != nil && serverCode(err) != 0 {
			if in, serr := e.Stat(ctx, p); serr == nil && in.IsDir {
				err = fmt.Errorf("%w: is a directory", endpoint.ErrRefused)
			}
		}
	}
	if err != nil {
		e.discard(s, f, tmp)
		return wrapErr("put", p, err)
	}
	return nil
}

// write streams r into f and returns how many bytes it wrote.
func (e *Endpoint) write(ctx context.Context, s *session, f xrdfs.File, r io.Reader, size int64) (int64, error) {
	if size >= 0 {
		r = io.LimitReader(r, size+1) // one byte more tells a too-long body
	}
	bufs := [2][]byte{make([]byte, ChunkSize), nil}
	var (
		off     int64
		pending <-chan error
	)
	for i := 0; ; i++ {
		buf := bufs[i%2]
		if buf == nil {
			buf = make([]byte, ChunkSize)
			bufs[i%2] = buf
		}
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if pending != nil {
				if err := e.wait(ctx, s, e.timeout, pending); err != nil {
					return off, err
				}
			}
			data, at := buf[:n], off
			pending = start(func() error { return f.WriteAtContext(s.sctx, data, at) })
			off += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			if pending != nil {
				e.watch(s, time.NewTimer(e.timeout), pending)
			}
			return off, fmt.Errorf("%w: reading the data: %w", endpoint.ErrRefused, rerr)
		}
	}
	if pending != nil {
		if err := e.wait(ctx, s, e.timeout, pending); err != nil {
			return off, err
		}
	}
	return off, nil
}

// discard closes f (when open) and removes tmp, in the background with its
// own deadline: the caller's ctx may be why the Put failed.
func (e *Endpoint) discard(s *session, f xrdfs.File, tmp string) {
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
		if f != nil && s.alive() {
			_ = e.await(ctx, s, e.timeout, func() error { return f.Close(s.sctx) })
		}
		err := e.do(ctx, e.timeout, func(s *session) error { return s.cli.FS().RemoveFile(s.sctx, tmp) })
		if err != nil && !errors.Is(err, endpoint.ErrNotFound) && serverCode(err) != codeNotFound {
			e.log.Warn("xroot temporary file left behind", "path", tmp, "err", err)
		}
	}()
}

// parent returns the endpoint path of p's directory.
func parent(p string) string {
	c := mustClean(p)
	for i := len(c) - 1; i > 0; i-- {
		if c[i] == '/' {
			return c[:i]
		}
	}
	return "/"
}
