package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

// propfind sends PROPFIND with depth to u and parses the answer. A 405 or
// 501 marks the server as one without PROPFIND and wraps ErrUnsupported.
func (e *Endpoint) propfind(ctx context.Context, u *url.URL, depth string) (*davxml.Multistatus, bool, error) {
	return e.propfindFor(ctx, u, depth, davxml.PropfindBody)
}

// propfindFor is propfind asking for the properties in the propfind
// document xmlBody.
func (e *Endpoint) propfindFor(ctx context.Context, u *url.URL, depth, xmlBody string) (*davxml.Multistatus, bool, error) {
	hdr := http.Header{"Depth": {depth}, "Content-Type": {`application/xml; charset="utf-8"`}}
	body := bufferedBody([]byte(xmlBody))
	resp, cancel, err := e.meta(ctx, "PROPFIND", u, hdr, body)
	if err != nil {
		return nil, false, err
	}
	defer cancel()
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		e.noPropfind.Store(true)
		return nil, false, statusError(resp, endpoint.ErrUnsupported)
	case resp.StatusCode != http.StatusMultiStatus:
		if resp.StatusCode/100 == 2 {
			return nil, false, statusError(resp, endpoint.ErrUnavailable) // not a WebDAV answer
		}
		return nil, false, statusError(resp, nil)
	}
	defer resp.Body.Close()
	ms, err := davxml.Decode(resp.Body, davxml.MaxBody)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, false, fmt.Errorf("%w: PROPFIND answer: %w", endpoint.ErrUnavailable, err)
	}
	return ms, davxml.RawHrefs(resp), nil
}

// Stat describes p. It asks with HEAD first, one cheap round trip on the
// servers of the field, and believes the answer when it settles what p
// is (headHead); otherwise — a directory, an HTML file, XrdHttp, whose
// HEAD tells neither a directory nor a modification time — it asks with
// PROPFIND depth 0. Servers that refuse PROPFIND are described by HEAD
// alone (then a directory shows only through a redirect to its slash
// form, and is otherwise reported as a file).
func (e *Endpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	if p != "/" && !e.noPropfind.Load() && e.server.Load() != serverXrootD {
		if in, settled, err := e.statHead(ctx, p); settled {
			return in, err
		}
	}
	if !e.noPropfind.Load() {
		ms, _, err := e.propfind(ctx, e.url(p, false), "0")
		if err == nil {
			if len(ms.Responses) == 0 {
				return endpoint.Info{}, fail("stat", p, fmt.Errorf("%w: empty PROPFIND answer", endpoint.ErrUnavailable))
			}
			r := ms.Responses[0]
			if !davxml.StatusOK(r.Status) {
				return endpoint.Info{}, fail("stat", p, fmt.Errorf("%w: %s", endpoint.ClassOfStatus(davxml.StatusCode(r.Status)), r.Status))
			}
			in := r.Info()
			in.Name = baseName(p)
			return in, nil
		}
		if !errors.Is(err, endpoint.ErrUnsupported) {
			return endpoint.Info{}, fail("stat", p, err)
		}
	}
	return e.head(ctx, p)
}

// statHead is the first half of Stat: HEAD p and report whether the
// answer settles it. It does when the server cannot be asked (a network
// error), when it says 404 or 410, and for a 2xx that can only be a file:
// a Content-Length and a Last-Modified (so Info is as complete as from
// PROPFIND), not text/html (the storage role's and nginx's directory
// indexes; an HTML file goes to PROPFIND too, harmlessly), not redirected
// to p's slash form (nginx's answer for a directory), and not from
// XrdHttp (its HEAD of a directory looks like a 4096-byte file). Any
// other answer is left to PROPFIND.
func (e *Endpoint) statHead(ctx context.Context, p string) (endpoint.Info, bool, error) {
	u := e.url(p, false)
	resp, cancel, err := e.meta(ctx, http.MethodHead, u, nil, nil)
	if err != nil {
		return endpoint.Info{}, true, fail("stat", p, err)
	}
	defer cancel()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return endpoint.Info{}, true, fail("stat", p, statusError(resp, nil))
	case resp.StatusCode/100 != 2:
		drain(resp)
		return endpoint.Info{}, false, nil
	}
	drain(resp)
	h := resp.Header
	lm, lmErr := http.ParseTime(h.Get("Last-Modified"))
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	switch {
	case resp.ContentLength < 0, lmErr != nil,
		strings.EqualFold(strings.TrimSpace(ct), "text/html"),
		strings.HasPrefix(h.Get("Server"), "XrootD"),
		resp.Request != nil && resp.Request.URL.Path != u.Path:
		return endpoint.Info{}, false, nil
	}
	in := endpoint.Info{Name: baseName(p), Size: resp.ContentLength, ModTime: lm, ETag: httpx.TrimETag(h.Get("ETag")), Strong: e.strong(h)}
	if sums := parseDigests(h); len(sums) > 0 {
		in.Checksums = sums
	}
	return in, true, nil
}

// head is Stat by HEAD.
func (e *Endpoint) head(ctx context.Context, p string) (endpoint.Info, error) {
	u := e.url(p, false)
	resp, cancel, err := e.meta(ctx, http.MethodHead, u, nil, nil)
	if err != nil {
		return endpoint.Info{}, fail("stat", p, err)
	}
	defer cancel()
	if resp.StatusCode/100 != 2 {
		return endpoint.Info{}, fail("stat", p, statusError(resp, nil))
	}
	drain(resp)
	in := endpoint.Info{Name: baseName(p), Size: max(resp.ContentLength, 0), ETag: httpx.TrimETag(resp.Header.Get("ETag"))}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		in.ModTime = t
	}
	if fin := resp.Request.URL.Path; strings.HasSuffix(fin, "/") && !strings.HasSuffix(u.Path, "/") {
		in.IsDir, in.Size = true, 0
	} else {
		in.Strong = e.strong(resp.Header)
	}
	if sums := parseDigests(resp.Header); len(sums) > 0 {
		in.Checksums = sums
	}
	return in, nil
}

func baseName(p string) string {
	if p == "/" || p == "" {
		return "/"
	}
	return path.Base(p)
}

// List returns the entries of dir with PROPFIND depth 1. Entries that are
// not direct children (some servers add more) and the directory itself are
// skipped. A server without PROPFIND wraps ErrUnsupported.
func (e *Endpoint) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	if e.noPropfind.Load() {
		return nil, fail("list", dir, fmt.Errorf("%w: server has no PROPFIND", endpoint.ErrUnsupported))
	}
	u := e.url(dir, true)
	ms, raw, err := e.propfind(ctx, u, "1")
	if err != nil {
		var se *StatusError
		if dir != "/" && errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code >= 500) {
			// "file/" gets a 404 from nginx, a 500 from XrdHttp: tell a
			// file from nothing.
			if in, serr := e.Stat(ctx, dir); serr == nil && !in.IsDir {
				return nil, fail("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
			}
		}
		return nil, fail("list", dir, err)
	}
	self := strings.TrimSuffix(u.Path, "/") // decoded server path of dir
	out := make([]endpoint.Info, 0, len(ms.Responses))
	sawSelf := false
	for i := range ms.Responses {
		r := &ms.Responses[i]
		hp := strings.TrimSuffix(davxml.HrefPath(r.Href, raw), "/")
		if hp == self {
			sawSelf = true
			if !r.Info().IsDir {
				return nil, fail("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
			}
			continue
		}
		name, ok := strings.CutPrefix(hp, self+"/")
		if !ok || name == "" || strings.Contains(name, "/") || !davxml.StatusOK(r.Status) {
			continue
		}
		in := r.Info()
		in.Name = name
		out = append(out, in)
	}
	if !sawSelf && len(ms.Responses) == 1 && len(out) == 1 && !out[0].IsDir {
		// A server that answered for the file itself under another href.
		return nil, fail("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
	}
	return out, nil
}

// parseDigests reads the checksums of an RFC 3230 Digest header.
func parseDigests(h http.Header) map[string]string {
	vals := h.Values("Digest")
	if len(vals) == 0 {
		return nil
	}
	sums := httpx.ParseDigest(strings.Join(vals, ","))
	if len(sums) == 0 {
		return nil
	}
	return sums
}
