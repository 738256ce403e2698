package http

import (
	"context"
	"errors"
	"fmt"
	"io"
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
func (e *Endpoint) propfind(ctx context.Context, u *url.URL, depth string) (davAnswer, error) {
	return e.propfindFor(ctx, u, depth, davxml.PropfindBody)
}

// davAnswer is a parsed PROPFIND answer.
type davAnswer struct {
	ms *davxml.Multistatus
	// raw: the hrefs are not percent-encoded (davxml.RawHrefs).
	raw bool
	// storage: a lakefed storage role answered, whose DAV:getetag is
	// the strong tag its GET and HEAD send (strong).
	storage bool
	// asHead: the storage role says each member is what a HEAD of it
	// would answer (httpx.ListedAsHeadHeader).
	asHead bool
}

// propfindFor is propfind asking for the properties in the propfind
// document xmlBody.
func (e *Endpoint) propfindFor(ctx context.Context, u *url.URL, depth, xmlBody string) (davAnswer, error) {
	return e.propfindLimit(ctx, u, depth, xmlBody, davxml.MaxBody)
}

// propfindLimit is propfindFor reading at most limit bytes of the
// answer: a longer one wraps ErrTooLarge.
func (e *Endpoint) propfindLimit(ctx context.Context, u *url.URL, depth, xmlBody string, limit int64) (davAnswer, error) {
	hdr := http.Header{"Depth": {depth}, "Content-Type": {`application/xml; charset="utf-8"`}}
	resp, cancel, err := e.meta(ctx, "PROPFIND", u, hdr, bufferedBody([]byte(xmlBody)))
	if err != nil {
		return davAnswer{}, err
	}
	defer cancel()
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		e.noPropfind.Store(true)
		return davAnswer{}, statusError(resp, endpoint.ErrUnsupported)
	case resp.StatusCode != http.StatusMultiStatus:
		if resp.StatusCode/100 == 2 {
			return davAnswer{}, statusError(resp, endpoint.ErrUnavailable) // not a WebDAV answer
		}
		return davAnswer{}, statusError(resp, nil)
	}
	defer resp.Body.Close()
	body := &countingReader{r: resp.Body}
	ms, err := davxml.Decode(body, limit)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case body.n >= limit:
			return davAnswer{}, fmt.Errorf("%w: PROPFIND answer longer than %d bytes", endpoint.ErrTooLarge, limit)
		}
		return davAnswer{}, fmt.Errorf("%w: PROPFIND answer: %w", endpoint.ErrUnavailable, err)
	}
	storage := resp.Header.Get("Server") == httpx.StorageServer
	asHead := storage && resp.Header.Get(httpx.ListedAsHeadHeader) == "1"
	return davAnswer{ms: ms, raw: davxml.RawHrefs(resp), storage: storage, asHead: asHead}, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// strongTag reports whether r's entity tag is strong: a lakefed storage
// role's (storage), and not marked weak, as strong says of a HEAD's.
func strongTag(r *davxml.Response, storage bool) bool {
	if !storage {
		return false
	}
	for _, ps := range r.Propstats {
		if davxml.StatusOK(ps.Status) {
			if et := strings.TrimSpace(ps.Prop.ETag); et != "" {
				return !strings.HasPrefix(et, "W/")
			}
		}
	}
	return false
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
		a, err := e.propfind(ctx, e.url(p, false), "0")
		if err == nil {
			if len(a.ms.Responses) == 0 {
				return endpoint.Info{}, fail("stat", p, fmt.Errorf("%w: empty PROPFIND answer", endpoint.ErrUnavailable))
			}
			r := &a.ms.Responses[0]
			if !davxml.StatusOK(r.Status) {
				return endpoint.Info{}, fail("stat", p, fmt.Errorf("%w: %s", endpoint.ClassOfStatus(davxml.StatusCode(r.Status)), r.Status))
			}
			return propInfo(r, baseName(p), a.storage), nil
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
	a, err := e.propfind(ctx, u, "1")
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
	out, _, _, err := members(a, u)
	if err != nil {
		return nil, fail("list", dir, err)
	}
	return out, nil
}

// members returns the entries of the PROPFIND depth 1 answer a for the
// collection at u, each described by propInfo. Entries that are not
// direct children (some servers add more) and the directory itself are
// skipped; rs holds the response each entry was read from. Members the
// server did not describe (a non-2xx status) are only named, in refused.
func members(a davAnswer, u *url.URL) (out []endpoint.Info, rs []*davxml.Response, refused []string, err error) {
	self := strings.TrimSuffix(u.Path, "/") // decoded server path of dir
	out = make([]endpoint.Info, 0, len(a.ms.Responses))
	rs = make([]*davxml.Response, 0, len(a.ms.Responses))
	sawSelf := false
	for i := range a.ms.Responses {
		r := &a.ms.Responses[i]
		hp := strings.TrimSuffix(davxml.HrefPath(r.Href, a.raw), "/")
		if hp == self {
			sawSelf = true
			if !r.Info().IsDir {
				return nil, nil, nil, fmt.Errorf("%w: not a directory", endpoint.ErrRefused)
			}
			continue
		}
		name, ok := strings.CutPrefix(hp, self+"/")
		switch {
		case !ok || name == "" || strings.Contains(name, "/"):
			continue
		case !davxml.StatusOK(r.Status):
			refused = append(refused, name)
			continue
		}
		out = append(out, propInfo(r, name, a.storage))
		rs = append(rs, r)
	}
	if !sawSelf && len(a.ms.Responses) == 1 && len(out) == 1 && !out[0].IsDir {
		// A server that answered for the file itself under another href.
		return nil, nil, nil, fmt.Errorf("%w: not a directory", endpoint.ErrRefused)
	}
	return out, rs, refused, nil
}

// propInfo is what r says of the resource named name; storage: a
// lakefed storage role answered (strongTag).
func propInfo(r *davxml.Response, name string, storage bool) endpoint.Info {
	in := r.Info()
	in.Name = name
	in.Strong = !in.IsDir && in.ETag != "" && strongTag(r, storage)
	return in
}

// StatList lists dir with one PROPFIND depth 1 and describes its files
// as Stat would, which only a lakefed storage role's answer proves
// (endpoint.StatLister): it says each member is what a HEAD of it by the
// same caller would answer (httpx.ListedAsHeadHeader), its DAV:getetag
// is the strong tag of its HEAD, and its HEAD, asked without Want-Digest
// as Stat asks, sends no checksum, as PROPFIND does not. Directories,
// members given a status rather than properties (what its HEAD would
// refuse: a path the rules deny, a symlink leading outside its root),
// and files whose answer lacks a size, a modification time or a strong
// tag, are unsure: Stat asks those. Any other server (nginx: no DAV:getetag; XrdHttp) wraps
// ErrUnsupported, asked no more once its Server header is known. The
// storage role streams a depth 1 answer and drops the connection when
// it cannot finish it, so a listing that decodes is complete.
func (e *Endpoint) StatList(ctx context.Context, dir string, limit int) (files []endpoint.Info, unsure []string, err error) {
	if sv := e.server.Load(); e.noPropfind.Load() || (sv != serverUnknown && sv != serverStorage) {
		return nil, nil, fail("list", dir, errNotListedAsStat)
	}
	u := e.url(dir, true)
	// A storage role's answer takes about 400 bytes an entry, more for
	// long names: a longer one is over limit whatever its names.
	a, err := e.propfindLimit(ctx, u, "1", davxml.PropfindBody, int64(limit+2)*maxEntryXML)
	if err != nil {
		return nil, nil, fail("list", dir, err)
	}
	if !a.asHead {
		return nil, nil, fail("list", dir, errNotListedAsStat)
	}
	all, rs, refused, err := members(a, u)
	switch {
	case err != nil:
		return nil, nil, fail("list", dir, err)
	case len(all)+len(refused) > limit:
		return nil, nil, fail("list", dir, fmt.Errorf("%w: more than %d entries", endpoint.ErrTooLarge, limit))
	}
	// A member its HEAD would refuse is there, but only its HEAD says
	// how Stat fails for it.
	unsure = refused
	files = all[:0]
	for i, in := range all {
		if in.IsDir || !in.Strong || in.ModTime.IsZero() || !hasLength(rs[i]) {
			unsure = append(unsure, in.Name)
			continue
		}
		files = append(files, in)
	}
	return files, unsure, nil
}

// maxEntryXML bounds the bytes of one entry of a depth 1 PROPFIND answer
// StatList reads: names of 255 bytes, escaped, twice, and the properties.
const maxEntryXML = 2048

// errNotListedAsStat: the server's listing does not say what its Stat
// says.
var errNotListedAsStat = fmt.Errorf("%w: the server's listing is not what its HEAD says (not a lakefed storage role that says so)", endpoint.ErrUnsupported)

// hasLength reports whether r gives a DAV:getcontentlength, as the HEAD
// that settles a Stat must give a Content-Length (statHead).
func hasLength(r *davxml.Response) bool {
	for _, ps := range r.Propstats {
		if davxml.StatusOK(ps.Status) && strings.TrimSpace(ps.Prop.ContentLength) != "" {
			return true
		}
	}
	return false
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
