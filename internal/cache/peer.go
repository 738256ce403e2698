package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// How a node reads through its group. A path it does not own is read
// from the owner (fromPeer). An owner that cannot be reached is marked
// down and the path's next owner is asked, so that the node that keeps
// the path from then on is the one that fetches it (viaOwner). An owner
// that dies in the middle of a body leaves the rest to the path's next
// owner, asked for it at the offset reached and for the same version
// (resume): the client sees one whole answer. And a node that fills a
// path reads the blocks first from the member that would own the path
// without it (openPeer): after a node joins, or comes back, the paths it
// takes over come from their previous owner's disk, not from the origin
// again.

// VersionHeader tells the member that sent a hop request whether the
// version answered is strong (endpoint.Info.Strong: "strong" or "weak").
// Bytes of two answers are joined only when it is: a weak version can
// name two files.
const VersionHeader = "X-Lakefed-Cache-Version"

// forwarded are the request headers a hop passes on: those that shape
// the answer.
var forwarded = []string{"Range", "If-Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "Cache-Control", "Want-Digest"}

// errNotResumed: the member asked for the rest of an answer did not
// answer with that range of that version.
var errNotResumed = errors.New("cache: the rest of the answer is not to be had")

// viaOwner answers r through the owner of p when that is another member,
// and reports whether it did (or the client left); false: this node is
// the owner, and answers itself.
func (c *Cache) viaOwner(w http.ResponseWriter, r *http.Request, p string) bool {
	for range c.group.size() {
		o := c.group.owner(p)
		if o.self {
			return false
		}
		if c.fromPeer(w, r, p, o) || r.Context().Err() != nil {
			return true
		}
	}
	return false
}

// memberRequest is r as a hop to m, with the headers that shape the
// answer and the caller's credential.
func memberRequest(r *http.Request, m *member) (*http.Request, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, m.url+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, err
	}
	for _, k := range forwarded {
		if v := r.Header.Values(k); len(v) > 0 {
			req.Header[k] = v
		}
	}
	httpx.ForwardRequestID(r.Context(), req.Header)
	// The owner applies the same rules: it gets the caller's credential
	// (the header, or the token the rules accepted from ?authz=).
	if v := r.Header.Get("Authorization"); v != "" {
		req.Header.Set("Authorization", v)
	} else if tok := httpx.Bearer(r.Context()); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set(HopHeader, "1")
	return req, nil
}

// fromPeer answers r by reading from o, the group member that owns p. It
// returns false, having written nothing, when o cannot be reached: o is
// marked down. When o's body breaks, the rest is resumed from p's next
// owner; when that cannot be, the response is aborted.
func (c *Cache) fromPeer(w http.ResponseWriter, r *http.Request, p string, o *member) bool {
	req, err := memberRequest(r, o)
	if err != nil {
		return false
	}
	resp, err := c.group.client.Do(req)
	if err != nil {
		if r.Context().Err() == nil {
			c.group.mark(o, false)
		}
		return false
	}
	defer resp.Body.Close()
	strong := resp.Header.Get(VersionHeader) == "strong"
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	h.Del(VersionHeader)
	w.WriteHeader(resp.StatusCode)
	body := &readErr{r: resp.Body}
	n, err := io.Copy(w, body)
	c.m.peerBytes.Add(float64(n))
	if err == nil {
		return true
	}
	if body.err == nil || r.Context().Err() != nil {
		panic(http.ErrAbortHandler) // the client went away
	}
	c.group.mark(o, false)
	off, end, ok := resumable(r, resp, n, strong)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	if err := c.resume(w, r, p, resp.Header.Get("Etag"), off, end); err != nil {
		c.log.WarnContext(r.Context(), "cache: a group member broke off an answer and the rest could not be read elsewhere", "path", p, "member", o.url, "err", err)
		panic(http.ErrAbortHandler)
	}
	c.m.peerResumes.Inc()
	return true
}

// resumable gives the part [off, end) of resp's body still to send after
// its first n bytes, when it can be read elsewhere: the answer to a GET
// is the whole file or one range of it, of a strong version.
func resumable(r *http.Request, resp *http.Response, n int64, strong bool) (off, end int64, ok bool) {
	if r.Method != http.MethodGet || !strong || resp.Header.Get("Etag") == "" {
		return 0, 0, false
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return n, resp.ContentLength, resp.ContentLength >= 0
	case http.StatusPartialContent:
		first, last, _, ok := httpx.ParseContentRange(resp.Header.Get("Content-Range"))
		return first + n, last + 1, ok
	}
	return 0, 0, false
}

// resume sends [off, end) of p's version etag to w: the rest of an
// answer whose owner died. p's owner now (this node, or another member)
// is asked for that range If-Match that version, so no byte of another
// version joins the bytes sent.
func (c *Cache) resume(w http.ResponseWriter, r *http.Request, p, etag string, off, end int64) error {
	err := errNotResumed
	for range c.group.size() + 1 {
		if off >= end {
			return nil
		}
		sub := r.Clone(r.Context())
		sub.Header = r.Header.Clone()
		for _, k := range forwarded {
			sub.Header.Del(k)
		}
		sub.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, end-1))
		sub.Header.Set("If-Match", etag)
		sub.Header.Set(HopHeader, "1")
		rw := &rangeWriter{w: w, h: http.Header{}, etag: etag, off: off, end: end}
		o := c.group.owner(p)
		if o.self {
			c.serveFile(rw, sub) // a failure after the status aborts r too
			if rw.n != end-off {
				return fmt.Errorf("%w: this node answered %d bytes of %d", errNotResumed, rw.n, end-off)
			}
			return nil
		}
		var broke bool
		broke, err = c.resumeFrom(rw, sub, o)
		off += rw.n
		if !broke {
			if err == nil && off < end {
				err = fmt.Errorf("%w: %s answered %d bytes short", errNotResumed, o.url, end-off)
			}
			return err
		}
		c.group.mark(o, false)
	}
	return err
}

// resumeFrom asks o for the range of sub and copies it to rw; broke says
// o could not be reached or its body broke (ask the next owner).
func (c *Cache) resumeFrom(rw *rangeWriter, sub *http.Request, o *member) (broke bool, err error) {
	req, err := memberRequest(sub, o)
	if err != nil {
		return false, err
	}
	resp, err := c.group.client.Do(req)
	if err != nil {
		return sub.Context().Err() == nil, err
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		rw.h[k] = v
	}
	rw.WriteHeader(resp.StatusCode)
	if !rw.ok {
		return false, fmt.Errorf("%w: %s answered %s", errNotResumed, o.url, resp.Status)
	}
	body := &readErr{r: resp.Body}
	n, err := io.Copy(rw, body)
	c.m.peerBytes.Add(float64(n))
	return err != nil && body.err != nil && sub.Context().Err() == nil, err
}

// rangeWriter passes to w the body of an answer to [off, end), once its
// status and validators say it is that range of the version etag, and a
// strong one.
type rangeWriter struct {
	w        io.Writer
	h        http.Header
	etag     string
	off, end int64
	ok       bool
	n        int64
}

func (rw *rangeWriter) Header() http.Header { return rw.h }

func (rw *rangeWriter) WriteHeader(code int) {
	rw.ok = isRange(code, rw.h, rw.etag, rw.off, rw.end)
}

func (rw *rangeWriter) Write(b []byte) (int, error) {
	if !rw.ok {
		return 0, errNotResumed
	}
	n, err := rw.w.Write(b)
	rw.n += int64(n)
	return n, err
}

// isRange reports whether an answer (status and header) is the range
// [off, end) of the strong version etag.
func isRange(code int, h http.Header, etag string, off, end int64) bool {
	first, last, _, ok := httpx.ParseContentRange(h.Get("Content-Range"))
	return code == http.StatusPartialContent && ok && first == off && last == end-1 &&
		h.Get("Etag") == etag && h.Get(VersionHeader) == "strong"
}

// readErr is a reader that keeps its error: whether a copy broke on the
// side of the member or of the client.
type readErr struct {
	r   io.Reader
	err error
}

func (re *readErr) Read(b []byte) (int, error) {
	n, err := re.r.Read(b)
	if err != nil && err != io.EOF {
		re.err = err
	}
	return n, err
}

// openPeer opens [off, off+n) of p's version hdr on the member that
// would own p without this node, answered from that member's disk only
// (only-if-cached) and only if it holds that version (If-Match). Nil
// when there is no such member, it cannot be reached or does not hold
// every byte: the caller reads the origin. Only strong versions are read
// so: bytes of two members are then of the one file the origin named
// (endpoint.SameBytes).
func (c *Cache) openPeer(p string, hdr header, off, n int64) io.ReadCloser {
	if c.group == nil || !hdr.Strong || hdr.ETag == "" {
		return nil
	}
	m := c.group.runnerUp(p)
	if m == nil {
		return nil
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	// A member answers at once from its disk, or not at all: one that
	// does not is not waited for as long as the origin would be.
	idle := time.AfterFunc(groupProbeTimeout, func() { cancel(errOriginIdle) })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url+(&url.URL{Path: p}).EscapedPath(), nil)
	if err != nil {
		idle.Stop()
		cancel(nil)
		return nil
	}
	etag := entityTag(hdr)
	req.Header.Set(HopHeader, "1")
	req.Header.Set("Cache-Control", "only-if-cached")
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	req.Header.Set("If-Match", etag)
	resp, err := c.group.client.Do(req)
	idle.Stop()
	if err != nil {
		if c.ctx.Err() == nil {
			c.group.mark(m, false)
		}
		cancel(nil)
		return nil
	}
	if !isRange(resp.StatusCode, resp.Header, etag, off, off+n) {
		resp.Body.Close()
		cancel(nil)
		return nil
	}
	return newIdleReader(resp.Body, c.cfg.OriginIdleTimeout, cancel)
}

// strength is what VersionHeader says of hdr.
func strength(hdr header) string {
	if hdr.Strong {
		return "strong"
	}
	return "weak"
}
