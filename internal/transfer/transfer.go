// Package transfer copies one file from an endpoint to another and proves
// the copy: the adler32 of the bytes moved is computed on the way and
// checked against the checksum the source offers before the destination
// commits, and against the one the destination reports after. `lakefed cp`
// and bench's IO test use it; the buffer's mover and HTTP third-party copy
// are next, which is why it lives here and not in the command.
//
//	res, err := transfer.Copy(ctx, src, dst, "/a/f.root", "/b/f.root", transfer.Options{})
//	var ce *transfer.ChecksumError
//	if errors.As(err, &ce) { /* the bytes are not the source's, or dst holds others */ }
package transfer

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync/atomic"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Side says which end of a copy an error is about.
type Side int

const (
	// Source is the endpoint read from.
	Source Side = iota
	// Destination is the endpoint written to.
	Destination
)

func (s Side) String() string {
	if s == Destination {
		return "destination"
	}
	return "source"
}

// Options shape one copy. The zero value asks both ends for their adler32.
type Options struct {
	// Progress, when set, is called as bytes move with the count moved so
	// far and the source's size (-1 unknown). A destination that sends the
	// body again (a redirected PUT) starts the count from zero.
	Progress func(moved, total int64)
	// SourceInfo is the source's Stat when the caller has it already (it
	// chose the destination by it): Copy does not ask again.
	SourceInfo *endpoint.Info
	// SkipSourceSum does not ask the source for its checksum: for a local
	// source, which the copy reads anyway (asking would read it twice).
	SkipSourceSum bool
	// SkipDestSum does not ask the destination after the copy: for a local
	// destination, which holds what was written and summed on the way.
	SkipDestSum bool
	// Cond, when set, makes the destination commit only if it holds
	// (endpoint.PutIf: atomically where the kind can): a copy that saw
	// what was at dstPath does not replace something newer. A failed
	// condition is an *Error wrapping endpoint.ErrPrecondition.
	Cond *endpoint.Cond
}

// Result describes a finished copy.
type Result struct {
	// Size is the number of bytes copied.
	Size int64
	// Adler32 is the checksum of the bytes copied (8 hex digits).
	Adler32 string
	// SourceSum and DestSum are the adler32 each end reported, "" when it
	// offered none or was not asked.
	SourceSum string
	DestSum   string
}

// Error is an endpoint operation of a copy that failed: Op is "stat",
// "checksum", "open" or "copy" (the copy itself), Side the end it failed
// at. It wraps the endpoint's error, so its class (endpoint.ErrNotFound,
// ErrUnavailable, ...) shows through errors.Is.
type Error struct {
	Op   string
	Side Side
	Err  error
}

func (e *Error) Error() string { return e.Op + " " + e.Side.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ChecksumError says the bytes that arrived are not the bytes the source
// holds (Side Source: the destination committed nothing), or the
// destination holds other bytes than were sent (Side Destination: Copy
// removed them). It has no endpoint class: nothing was unavailable.
type ChecksumError struct {
	Side Side
	Got  string // the adler32 of the bytes copied
	Want string // what Side says
}

func (e *ChecksumError) Error() string {
	verb := "received"
	if e.Side == Destination {
		verb = "sent"
	}
	return fmt.Sprintf("adler32 mismatch: %s %s, %s has %s", verb, e.Got, e.Side, e.Want)
}

// SizeError says the source gave other than the size it stated: a
// connection cut short, or a file replaced while it was read. Its class is
// endpoint.ErrUnavailable: another try, or another replica, may do.
type SizeError struct {
	Got, Want int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("read %d bytes, the source said %d: %v", e.Got, e.Want, endpoint.ErrUnavailable)
}
func (e *SizeError) Unwrap() error { return endpoint.ErrUnavailable }

// Copy copies srcPath on src to dstPath on dst and verifies it: the source's
// adler32 (from Stat, else its Checksummer) is asked first, so a mismatch
// is found while the body streams and the destination's Put fails and
// commits nothing; after the copy the destination's own adler32, when it
// offers one, must equal the bytes sent, else the file is removed. A short
// read (fewer bytes than the source's size) fails the Put the same way,
// with endpoint.ErrUnavailable. A directory source is refused.
//
// dstPath is written as given: choosing it (a directory's child, whether
// to overwrite) is the caller's.
func Copy(ctx context.Context, src, dst endpoint.Endpoint, srcPath, dstPath string, opts Options) (Result, error) {
	var info endpoint.Info
	if opts.SourceInfo != nil {
		info = *opts.SourceInfo
	} else {
		var err error
		if info, err = src.Stat(ctx, srcPath); err != nil {
			return Result{}, &Error{Op: "stat", Side: Source, Err: err}
		}
	}
	if info.IsDir {
		return Result{}, &Error{Op: "copy", Side: Source, Err: fmt.Errorf("is a directory: %w", endpoint.ErrRefused)}
	}
	var res Result
	var err error
	if !opts.SkipSourceSum {
		res.SourceSum = info.Checksums[httpx.Adler32]
		if res.SourceSum == "" {
			res.SourceSum, err = endpoint.Checksum(ctx, src, srcPath, httpx.Adler32)
			if err != nil && !errors.Is(err, endpoint.ErrUnsupported) {
				return Result{}, &Error{Op: "checksum", Side: Source, Err: err}
			}
		}
	}

	b := &body{ctx: ctx, src: src, path: srcPath, size: info.Size, want: res.SourceSum, progress: opts.Progress}
	r, err := b.Reopen()
	if err != nil {
		return Result{}, err
	}
	defer b.close()
	if opts.Cond != nil {
		err = endpoint.PutIf(ctx, dst, dstPath, r, info.Size, *opts.Cond)
	} else {
		err = dst.Put(ctx, dstPath, r, info.Size)
	}
	vr := b.cur.Load()
	if vr.err != nil {
		// The reader refused to reach EOF, so Put must not have committed.
		return Result{}, vr.err
	}
	if err != nil {
		return Result{}, &Error{Op: "copy", Side: Destination, Err: err}
	}
	res.Size, res.Adler32 = vr.n, httpx.SumString(vr.h)

	if !opts.SkipDestSum {
		have, err := endpoint.Checksum(ctx, dst, dstPath, httpx.Adler32)
		switch {
		case errors.Is(err, endpoint.ErrUnsupported):
		case err != nil:
			return Result{}, &Error{Op: "checksum", Side: Destination, Err: err}
		case have != res.Adler32:
			// Best effort: the error below is what matters.
			_ = dst.Delete(context.WithoutCancel(ctx), dstPath)
			return Result{}, &ChecksumError{Side: Destination, Got: res.Adler32, Want: have}
		default:
			res.DestSum = have
		}
	}
	return res, nil
}

// Reopener is implemented by the body Copy hands to the destination's Put.
// A destination that must send the body again after some of it was read
// (a federator's 307 to a site, on a client that cannot wait for
// 100-continue) calls Reopen for a fresh reader of the source from its
// start, with a fresh count and sum; the copy's result is the last one's.
type Reopener interface {
	Reopen() (io.Reader, error)
}

// body is the source side of one copy: the reader Put got last, and how to
// get another.
type body struct {
	ctx      context.Context
	src      endpoint.Endpoint
	path     string
	size     int64
	want     string
	progress func(moved, total int64)
	cur      atomic.Pointer[verifyReader]
	// open are the source readers opened so far, closed when Copy returns:
	// a transport may still hold an old one while it reads the new.
	open []io.Closer
}

// Reopen opens the source again; see Reopener.
func (b *body) Reopen() (io.Reader, error) {
	r, err := b.src.Open(b.ctx, b.path, 0, -1)
	if err != nil {
		return nil, &Error{Op: "open", Side: Source, Err: err}
	}
	b.open = append(b.open, r)
	v := &verifyReader{b: b, r: r, h: httpx.NewHash(httpx.Adler32)}
	b.cur.Store(v)
	if b.progress != nil {
		b.progress(0, b.size)
	}
	return v, nil
}

func (b *body) close() {
	for _, c := range b.open {
		_ = c.Close()
	}
}

// verifyReader hashes what passes through it and, at the end, checks the
// length and the source's checksum. On a mismatch it returns an error
// instead of io.EOF, so the destination's Put fails and commits nothing.
// It is a Reopener through its body.
type verifyReader struct {
	b   *body
	r   io.Reader
	h   hash.Hash
	n   int64
	err error // the verification error, once found
}

func (v *verifyReader) Reopen() (io.Reader, error) { return v.b.Reopen() }

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	if n > 0 {
		v.h.Write(p[:n])
		v.n += int64(n)
		if v.b.progress != nil {
			v.b.progress(v.n, v.b.size)
		}
	}
	if err != io.EOF {
		return n, err
	}
	switch got := httpx.SumString(v.h); {
	case v.b.size >= 0 && v.n != v.b.size:
		v.err = &Error{Op: "copy", Side: Source, Err: &SizeError{Got: v.n, Want: v.b.size}}
	case v.b.want != "" && got != v.b.want:
		v.err = &ChecksumError{Side: Source, Got: got, Want: v.b.want}
	}
	if v.err != nil {
		return n, v.err
	}
	return n, io.EOF
}
