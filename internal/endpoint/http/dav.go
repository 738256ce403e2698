package http

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// propfindBody asks for the properties Stat and List use (RFC 4918 §9.1).
const propfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop>
<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/>
</D:prop></D:propfind>`

// maxPropfind bounds a PROPFIND answer: a directory of ~1M entries.
const maxPropfind = 512 << 20

// multistatus is the part of an RFC 4918 §14.16 answer lakefed reads. The
// property elements match in any namespace: XrdHttp puts them in "DAV:"
// under its own prefixes, and adds the lcgdm "iscollection".
type multistatus struct {
	Responses []davResponse `xml:"DAV: response"`
}

type davResponse struct {
	Href      string     `xml:"DAV: href"`
	Status    string     `xml:"DAV: status"`
	Propstats []propstat `xml:"DAV: propstat"`
}

type propstat struct {
	Status string `xml:"DAV: status"`
	Prop   struct {
		ResourceType *struct {
			Collection *struct{} `xml:"collection"`
		} `xml:"resourcetype"`
		ContentLength string `xml:"getcontentlength"`
		LastModified  string `xml:"getlastmodified"`
		ETag          string `xml:"getetag"`
		IsCollection  string `xml:"iscollection"`
	} `xml:"prop"`
}

// statusOK reports whether a DAV:status line ("HTTP/1.1 200 OK") is 2xx;
// an absent status counts as OK.
func statusOK(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return true
	}
	_, rest, ok := strings.Cut(s, " ")
	return ok && strings.HasPrefix(rest, "2")
}

// info turns one response into an Info (Name left to the caller).
func (r *davResponse) info() endpoint.Info {
	var in endpoint.Info
	for _, ps := range r.Propstats {
		if !statusOK(ps.Status) {
			continue
		}
		pr := ps.Prop
		if pr.ResourceType != nil && pr.ResourceType.Collection != nil {
			in.IsDir = true
		}
		if v := strings.TrimSpace(pr.IsCollection); v == "1" || strings.EqualFold(v, "true") {
			in.IsDir = true
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(pr.ContentLength), 10, 64); err == nil && n >= 0 {
			in.Size = n
		}
		if t, err := http.ParseTime(strings.TrimSpace(pr.LastModified)); err == nil {
			in.ModTime = t
		}
		if et := strings.TrimSpace(pr.ETag); et != "" {
			in.ETag = trimETag(et)
		}
	}
	if in.IsDir {
		in.Size = 0 // a directory's "size" is the file system's block, not data
	}
	return in
}

// trimETag removes the weak marker and quotes of an entity tag.
func trimETag(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.Trim(s, `"`)
}

// hrefPath returns the decoded server path of a DAV:href, which may be an
// absolute URL or a path. XrdHttp (up to at least 5.5.3) sends names
// unescaped ("/sp ace/a b%c"): raw tells that the server is one of those.
// An href that cannot be percent-decoded is taken as it is.
func hrefPath(h string, raw bool) string {
	h = strings.TrimSpace(h)
	if i := strings.Index(h, "://"); i >= 0 && i < 10 {
		rest := h[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			h = rest[j:]
		} else {
			h = "/"
		}
	}
	if raw {
		return h
	}
	if i := strings.IndexByte(h, '?'); i >= 0 {
		h = h[:i]
	}
	if d, err := url.PathUnescape(h); err == nil {
		return d
	}
	return h
}

// rawHrefs reports whether the server is one known to send unescaped hrefs.
func rawHrefs(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Server"), "XrootD")
}

// propfind sends PROPFIND with depth to u and parses the answer. A 405 or
// 501 marks the server as one without PROPFIND and wraps ErrUnsupported.
func (e *Endpoint) propfind(ctx context.Context, u *url.URL, depth string) (*multistatus, bool, error) {
	hdr := http.Header{"Depth": {depth}, "Content-Type": {`application/xml; charset="utf-8"`}}
	body := bufferedBody([]byte(propfindBody))
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
	var ms multistatus
	if err := xml.NewDecoder(io.LimitReader(resp.Body, maxPropfind)).Decode(&ms); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, false, fmt.Errorf("%w: PROPFIND answer: %w", endpoint.ErrUnavailable, err)
	}
	return &ms, rawHrefs(resp), nil
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
			if !statusOK(r.Status) {
				code := 0
				if f := strings.Fields(r.Status); len(f) > 1 {
					code, _ = strconv.Atoi(f[1])
				}
				return endpoint.Info{}, fail("stat", p, fmt.Errorf("%w: %s", classOf(code), r.Status))
			}
			in := r.info()
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
	in := endpoint.Info{Name: baseName(p), Size: resp.ContentLength, ModTime: lm, ETag: trimETag(h.Get("ETag"))}
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
	in := endpoint.Info{Name: baseName(p), Size: max(resp.ContentLength, 0), ETag: trimETag(resp.Header.Get("ETag"))}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		in.ModTime = t
	}
	if fin := resp.Request.URL.Path; strings.HasSuffix(fin, "/") && !strings.HasSuffix(u.Path, "/") {
		in.IsDir, in.Size = true, 0
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
		hp := strings.TrimSuffix(hrefPath(r.Href, raw), "/")
		if hp == self {
			sawSelf = true
			if !r.info().IsDir {
				return nil, fail("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
			}
			continue
		}
		name, ok := strings.CutPrefix(hp, self+"/")
		if !ok || name == "" || strings.Contains(name, "/") || !statusOK(r.Status) {
			continue
		}
		in := r.info()
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
