package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// proxy streams the file through the federator: the replicas in rank order
// (those of the best one's size only), Range and multi-range passed
// through, and a replica failing mid-stream replaced by the next at the
// same offset, so the client never notices.
func (f *Federator) proxy(w http.ResponseWriter, r *http.Request, s *snapshot, e *entry, rk []ranked) {
	size := rk[0].r.info.Size
	reps := make([]*replica, 0, len(rk))
	for _, x := range rk {
		if x.r.info.Size == size {
			reps = append(reps, x.r)
		}
	}
	h := w.Header()
	h.Del("Link")
	h.Set("Accept-Ranges", "bytes")
	if e.lastMod != "" {
		h.Set("Last-Modified", e.lastMod)
	}
	if e.etag != "" {
		h.Set("Etag", e.etag)
	}
	ranges, err := httpx.ParseRange(r.Header.Get("Range"), size)
	if ir := r.Header.Get("If-Range"); ir != "" && ir != e.etag && ir != e.lastMod {
		ranges, err = nil, nil // the client's copy is stale: send everything
	}
	switch {
	case errors.Is(err, httpx.ErrUnsatisfiable):
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		httpError(w, http.StatusRequestedRangeNotSatisfiable, "range not satisfiable")
		return
	case err != nil:
		ranges = nil // a malformed Range is ignored (RFC 9110 §14.2)
	}
	ctx := r.Context()
	switch len(ranges) {
	case 0:
		if wd := r.Header["Want-Digest"]; len(wd) > 0 {
			// RFC 3230: the digest of the whole file, from metadata (or
			// asked of a replica once), as a redirected client would get
			// it from the endpoint.
			if algos := httpx.ParseWantDigest(strings.Join(wd, ",")); len(algos) > 0 {
				if d := httpx.FormatDigest(f.checksums(r, s, e, rk, algos), algos...); d != "" {
					h.Set("Digest", d)
				}
			}
		}
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		f.copyRange(ctx, w, s, reps, httpx.Range{Start: 0, Length: size})
	case 1:
		rg := ranges[0]
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Range", rg.ContentRange(size))
		h.Set("Content-Length", strconv.FormatInt(rg.Length, 10))
		w.WriteHeader(http.StatusPartialContent)
		f.copyRange(ctx, w, s, reps, rg)
	default:
		mw := multipart.NewWriter(w)
		h.Set("Content-Type", "multipart/byteranges; boundary="+mw.Boundary())
		w.WriteHeader(http.StatusPartialContent)
		for _, rg := range ranges {
			pw, err := mw.CreatePart(textproto.MIMEHeader{
				"Content-Type":  {"application/octet-stream"},
				"Content-Range": {rg.ContentRange(size)},
			})
			if err != nil {
				return
			}
			if !f.copyRange(ctx, pw, s, reps, rg) {
				// The client must see a broken response, not a short
				// multipart that looks complete.
				panic(http.ErrAbortHandler)
			}
		}
		_ = mw.Close()
	}
}

// copyRange copies one range from the replicas to w and reports whether
// all of it was sent.
func (f *Federator) copyRange(ctx context.Context, w io.Writer, s *snapshot, reps []*replica, rg httpx.Range) bool {
	if rg.Length == 0 {
		return true
	}
	fr := &failoverReader{ctx: ctx, f: f, s: s, reps: reps, off: rg.Start, left: rg.Length}
	defer fr.Close()
	// writerOnly hides http.ResponseWriter's ReadFrom, which would copy
	// through a 32 KiB buffer (net.TCPConn cannot splice from an endpoint's
	// reader): big reads and writes cost fewer calls on both sides, and an
	// endpoint reader that works per call (minio-go's object reader hands
	// each Read to a goroutine) pays that cost per copyBufSize, not per
	// 32 KiB.
	bp := copyBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(writerOnly{w}, fr, *bp)
	copyBufs.Put(bp)
	if err != nil && ctx.Err() == nil {
		f.log.Warn("proxy read failed", "bytes", n, "err", err)
	}
	return err == nil && n == rg.Length
}

// copyBufSize is the size of the buffer a proxied range is copied
// through; each proxied request in flight holds one.
const copyBufSize = 256 << 10

// copyBufs recycles copy buffers between proxied requests.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// writerOnly is an io.Writer and nothing else, so io.CopyBuffer uses the
// buffer it is given.
type writerOnly struct{ w io.Writer }

func (wo writerOnly) Write(p []byte) (int, error) { return wo.w.Write(p) }

// failoverReader reads left bytes from off of the first replica that
// works; when a replica fails (an error or a short body) it reopens the
// next replica at the offset reached.
type failoverReader struct {
	ctx  context.Context
	f    *Federator
	s    *snapshot
	reps []*replica
	i    int
	off  int64
	left int64
	rc   io.ReadCloser
	errs []error
}

func (fr *failoverReader) Read(p []byte) (int, error) {
	for {
		if fr.left <= 0 {
			return 0, io.EOF
		}
		if fr.rc == nil {
			if fr.i >= len(fr.reps) {
				return 0, fmt.Errorf("federation: every replica failed: %w", errors.Join(fr.errs...))
			}
			r := fr.reps[fr.i]
			start := time.Now()
			rc, err := r.m.ep.Open(fr.ctx, r.path, fr.off, fr.left)
			if err != nil {
				fr.fail(r, err, time.Since(start))
				continue
			}
			fr.rc = rc
		}
		if int64(len(p)) > fr.left {
			p = p[:fr.left]
		}
		n, err := fr.rc.Read(p)
		fr.off += int64(n)
		fr.left -= int64(n)
		fr.reps[fr.i].m.mm.proxied.Add(float64(n))
		if fr.left == 0 {
			return n, nil
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			if fr.ctx.Err() != nil {
				return n, fr.ctx.Err()
			}
			fr.rc.Close()
			fr.rc = nil
			fr.fail(fr.reps[fr.i], err, 0)
			fr.f.m.failovers.Inc()
		}
		if n > 0 {
			return n, nil
		}
	}
}

// fail records a replica's failure and moves to the next one.
func (fr *failoverReader) fail(r *replica, err error, d time.Duration) {
	if fr.ctx.Err() == nil {
		if !errors.Is(err, endpoint.ErrUnavailable) && !errors.Is(err, endpoint.ErrRefused) && !errors.Is(err, endpoint.ErrNotFound) {
			err = fmt.Errorf("%w: %w", err, endpoint.ErrUnavailable)
		}
		fr.f.requestResult(fr.s, r.m, err, d)
	}
	fr.errs = append(fr.errs, fmt.Errorf("%s: %w", r.m.name, err))
	fr.i++
}

func (fr *failoverReader) Close() error {
	if fr.rc != nil {
		err := fr.rc.Close()
		fr.rc = nil
		return err
	}
	return nil
}
