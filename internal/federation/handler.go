package federation

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/upstream"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Header names the federator reads or writes.
const (
	// HopsHeader counts the federators a request has passed through; a
	// federator reached at max_hops asks no upstream (loop stop).
	HopsHeader = upstream.HopsHeader
	// DebugHeader: a request carrying it (any value) gets ChoiceHeader
	// back, saying how the replicas were ranked and what each endpoint
	// answered.
	DebugHeader = "X-Lakefed-Debug"
	// ChoiceHeader is the debug answer.
	ChoiceHeader = "X-Lakefed-Choice"
	// SiteParam is the query parameter that pins a request to one
	// endpoint, by name: "?lakefed.site=NAME" (lakefed bench --site). Only
	// that endpoint is asked, redirected to or proxied from, as the CMS
	// AAA scale tests pinned one site through the redirectors; a file it
	// lacks is 404 (503 when it is down) even if others have it. The
	// parameter never reaches an endpoint: endpoints get paths, and
	// redirects carry the endpoint's own URL.
	SiteParam = "lakefed.site"
)

// Handler returns the federator's HTTP handler: the namespace at every
// path, plus /api/endpoints, /api/reload, /api/health and /metrics (files
// at those exact paths are shadowed).
func (f *Federator) Handler() http.Handler {
	prom := promhttp.HandlerFor(f.m.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if len(p) >= 4 && (p[1] == 'a' || p[1] == 'm') {
			switch {
			case p == "/metrics" && r.Method == http.MethodGet:
				prom.ServeHTTP(w, r)
				return
			case p == "/api/endpoints" && r.Method == http.MethodGet:
				f.serveEndpoints(w, r)
				return
			case p == "/api/reload" && r.Method == http.MethodPost:
				f.serveReload(w, r)
				return
			case p == "/api/disagreements" && r.Method == http.MethodGet:
				f.serveDisagreements(w, r)
				return
			case p == "/api/health" && r.Method == http.MethodGet:
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = w.Write([]byte("ok\n"))
				return
			}
		}
		f.serveNamespace(w, r)
	})
}

// serveNamespace answers a request for a path of the federated namespace.
func (f *Federator) serveNamespace(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if !isClean(p) {
		var err error
		if p, err = httpx.CleanPath(p); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	s := f.snap.Load()
	if r.URL.RawQuery != "" && strings.Contains(r.URL.RawQuery, SiteParam) {
		site := siteOf(r.URL.RawQuery)
		if site != "" {
			v := s.pins[site]
			if v == nil {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("lakefed: %s=%q: no endpoint of that name in this federation", SiteParam, site))
				return
			}
			s = v
		}
	}
	hops := 0
	if v := r.Header[HopsHeader]; len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil && n > 0 {
			hops = n
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		f.serveRead(w, r, s, p, hops)
	case "PROPFIND":
		f.servePropfind(w, r, s, p, hops)
	case http.MethodPut:
		f.servePut(w, r, s, p, hops)
	case http.MethodDelete:
		f.serveDelete(w, r, s, p, hops)
	case "MKCOL":
		f.serveMkcol(w, r, s, p)
	case http.MethodOptions:
		h := w.Header()
		h.Set("Allow", allow)
		h.Set("DAV", "1")
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", allow)
		httpError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	}
}

const allow = "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND"

// siteOf returns the value of SiteParam in a raw query string, or "".
func siteOf(raw string) string {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	return vals.Get(SiteParam)
}

// isClean reports whether p is already what httpx.CleanPath would return,
// with a cheap scan, so that the common case allocates nothing.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || len(p) > httpx.MaxPathLen || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	seg := 0
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c < 0x20 || c == 0x7f || c == '\\' || c == '%':
			return false
		case c == '/':
			n := i - seg - 1
			if n == 0 || n > httpx.MaxNameLen || (n == 1 && p[i-1] == '.') || (n == 2 && p[i-1] == '.' && p[i-2] == '.') {
				return false
			}
			seg = i
		}
	}
	n := len(p) - seg - 1
	return n <= httpx.MaxNameLen && !(n == 1 && p[len(p)-1] == '.') && !(n == 2 && p[len(p)-1] == '.' && p[len(p)-2] == '.')
}

// readQuery is what a read request's query string asks for.
type readQuery struct {
	tried    []string
	metalink bool
}

func parseReadQuery(raw string) readQuery {
	var q readQuery
	if raw == "" {
		return q
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return q
	}
	for _, t := range vals["tried"] {
		for name := range strings.SplitSeq(t, ",") {
			if name = strings.TrimSpace(name); name != "" {
				q.tried = append(q.tried, name)
			}
		}
	}
	_, q.metalink = vals["metalink"]
	return q
}

func wantsMetalink(h http.Header) bool {
	for _, v := range h["Accept"] {
		if strings.Contains(v, httpx.MetalinkType) {
			return true
		}
	}
	return false
}

func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// serveRead answers GET and HEAD: a redirect, a metalink, metadata, a
// listing, or the bytes.
func (f *Federator) serveRead(w http.ResponseWriter, r *http.Request, s *snapshot, p string, hops int) {
	for fresh := false; ; fresh = true {
		if f.serveReadOnce(w, r, s, p, hops, fresh) != errStale || fresh {
			return
		}
		// A proxied read found the metadata out of date before it sent
		// anything: look again, once.
	}
}

// serveReadOnce answers a read from the cached metadata (fresh: from a
// look-up made for this request). It returns errStale, having written
// nothing, when a proxied read found a replica changed.
func (f *Federator) serveReadOnce(w http.ResponseWriter, r *http.Request, s *snapshot, p string, hops int, fresh bool) error {
	e := f.lookup(r.Context(), s, p, hops)
	if e.status != http.StatusOK {
		f.writeMissing(w, r, s, p, e)
		return nil
	}
	if e.isDir {
		f.serveDir(w, r, s, p, e, hops)
		return nil
	}
	q := parseReadQuery(r.URL.RawQuery)
	var buf [8]ranked
	rk := f.rank(s, e, clientAddr(r), q.tried, buf[:0])
	h := w.Header()
	if _, debug := r.Header[DebugHeader]; debug {
		h.Set(ChoiceHeader, describe(rk)+" | "+describeAnswers(e))
	}
	if len(rk) == 0 {
		f.writeNoReplica(w, s, p, e, q.tried)
		return nil
	}
	f.refreshURLs(r, rk)
	if q.metalink || wantsMetalink(r.Header) {
		f.writeMetalink(w, r, p, e, rk)
		return nil
	}
	if link := e.linkValue(rk); link != nil {
		h["Link"] = link
	}
	if r.Method == http.MethodHead {
		f.writeHead(w, r, s, p, e, rk)
		return nil
	}
	best := rk[0].r
	if best.url == "" {
		return f.proxy(w, r, s, p, rk, fresh)
	}
	best.m.mm.redirects.Inc()
	if best.loc != nil {
		h["Location"] = best.loc
	} else {
		h["Location"] = []string{best.url} // a refreshed pre-signed URL
	}
	w.WriteHeader(http.StatusFound)
	return nil
}

// refreshURLs replaces, in rk, the redirect URLs that have used up half
// their life (pre-signed S3 URLs made when the answer was cached) with
// fresh ones, so a client always gets at least half of presign_expiry.
// The cached entry is not changed; a failed refresh keeps the old URL,
// which is still valid (checkPresign: expiry >= cache TTL).
func (f *Federator) refreshURLs(r *http.Request, rk []ranked) {
	var now int64
	for i := range rk {
		old := rk[i].r
		if old.m.presign == 0 || old.url == "" {
			continue
		}
		if now == 0 {
			now = time.Now().UnixNano()
		}
		if now-old.born <= int64(old.m.presign/2) {
			continue
		}
		u, err := endpoint.RedirectURL(r.Context(), old.m.ep, old.path, endpoint.OpRead)
		if err != nil {
			continue
		}
		fresh := *old
		// loc is the old URL as a header value: a refreshed replica must
		// not hand it out as Location (it drops loc, so the redirect
		// takes url).
		fresh.url, fresh.born, fresh.loc = u.String(), now, nil
		rk[i].r = &fresh
	}
}

// linkCache is the Link header values made for one entry, each for one
// order of its replicas. Immutable; replaced whole when one is added.
type linkCache struct {
	keys []uint64
	vals [][]string // nil: no redirectable replica
}

// maxLinkOrders bounds linkCache: near-equal replicas are shuffled per
// request, so an entry of n of them sees up to n! orders (6 for three).
const maxLinkOrders = 8

// linkValue returns the Link header value for rk, a ranking of e's
// replicas, as a shared header value (nil when no replica can be
// redirected to), made once per entry and order rather than per request.
// A ranking holding a refreshed pre-signed URL is not cached.
func (e *entry) linkValue(rk []ranked) []string {
	key, ok := uint64(len(rk)), len(rk) <= 7
	for i := 0; ok && i < len(rk); i++ {
		r := rk[i].r
		ok = int(r.idx) < len(e.replicas) && e.replicas[r.idx] == r
		key |= (uint64(r.idx) + 1) << (8 * (i + 1))
	}
	if !ok {
		return linkHeaderValue(rk)
	}
	lc := e.links.Load()
	if lc != nil {
		for i, k := range lc.keys {
			if k == key {
				return lc.vals[i]
			}
		}
	}
	v := linkHeaderValue(rk)
	if lc == nil || len(lc.keys) < maxLinkOrders {
		n := &linkCache{}
		if lc != nil {
			n.keys = append(n.keys, lc.keys...)
			n.vals = append(n.vals, lc.vals...)
		}
		n.keys = append(n.keys, key)
		n.vals = append(n.vals, v)
		e.links.CompareAndSwap(lc, n) // a lost race only costs a rebuild later
	}
	return v
}

func linkHeaderValue(rk []ranked) []string {
	if l := linkHeader(rk); l != "" {
		return []string{l}
	}
	return nil
}

// linkHeader lists every redirectable replica in rank order as RFC 6249
// duplicates ("<url>; rel=duplicate; pri=1, ...").
func linkHeader(rk []ranked) string {
	var b strings.Builder
	n := 0
	for _, x := range rk {
		n += len(x.r.url) + 28
	}
	b.Grow(n)
	pri := 0
	for _, x := range rk {
		if x.r.url == "" {
			continue
		}
		pri++
		if pri > 1 {
			b.WriteString(", ")
		}
		b.WriteByte('<')
		b.WriteString(x.r.url)
		b.WriteString(">; rel=duplicate; pri=")
		b.WriteString(strconv.Itoa(pri))
	}
	return b.String()
}

// writeHead answers HEAD from metadata alone: this is the file-open-rate
// path, and it touches no endpoint unless a checksum is asked for that
// the metadata does not have.
func (f *Federator) writeHead(w http.ResponseWriter, r *http.Request, s *snapshot, p string, e *entry, rk []ranked) {
	h := w.Header()
	h["Content-Length"] = e.hSize
	h["Accept-Ranges"] = hBytes
	h["Content-Type"] = hOctets
	if e.hLastMod != nil {
		h["Last-Modified"] = e.hLastMod
	}
	if e.hEtag != nil {
		h["Etag"] = e.hEtag
	}
	if hasConditional(r.Header) {
		if code := httpx.CheckPreconditions(r.Header, r.Method, e.etag, e.modTime, true); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	if wd := r.Header["Want-Digest"]; len(wd) > 0 {
		if algos := httpx.ParseWantDigest(strings.Join(wd, ",")); len(algos) > 0 {
			if d := httpx.FormatDigest(f.checksums(r, s, e, rk, algos), algos...); d != "" {
				h["Digest"] = []string{d}
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

// hasConditional reports whether h holds an RFC 9110 §13.1 precondition
// (a map look-up each: HEAD is the open-rate hot path).
func hasConditional(h http.Header) bool {
	for _, k := range [...]string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}

// Header values shared by every HEAD answer. A header map's values are
// replaced by Set and Del, never written in place, and each has len ==
// cap, so an append copies.
var (
	hBytes  = []string{"bytes"}
	hOctets = []string{"application/octet-stream"}
)

// checksums returns the checksums of e, asking the replicas (best first)
// for the wanted algorithms the metadata lacks, and remembering what they
// say.
func (f *Federator) checksums(r *http.Request, s *snapshot, e *entry, rk []ranked, algos []string) map[string]string {
	var sums map[string]string
	if p := e.sums.Load(); p != nil {
		sums = *p
	}
	var missing []string
	for _, a := range algos {
		if _, ok := sums[a]; !ok {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return sums
	}
	add := map[string]string{}
	primary := e.replicas[0].info
	for _, a := range missing {
		for _, x := range rk {
			// Only replicas holding the version the entry describes.
			if same, _ := sameVersion(primary, x.r.info); !same && x.r != e.replicas[0] {
				continue
			}
			v, err := endpoint.Checksum(r.Context(), x.r.m.ep, x.r.path, a)
			if err == nil {
				add[a] = v
				break
			}
			if errors.Is(endpoint.Class(err), endpoint.ErrUnavailable) {
				f.requestResult(s, x.r.m, err, 0)
			}
		}
	}
	if len(add) == 0 {
		return sums
	}
	merged := make(map[string]string, len(sums)+len(add))
	for k, v := range sums {
		merged[k] = v
	}
	for k, v := range add {
		merged[k] = v
	}
	e.sums.Store(&merged)
	return merged
}

// writeMetalink answers with a Metalink 4 document (RFC 5854) listing the
// replicas in rank order. Proxied replicas are represented by the
// federator's own URL.
func (f *Federator) writeMetalink(w http.ResponseWriter, r *http.Request, p string, e *entry, rk []ranked) {
	file := httpx.MetalinkFile{Name: path.Base(p), Size: e.size}
	if sp := e.sums.Load(); sp != nil {
		for _, algo := range []string{httpx.Adler32, httpx.MD5, httpx.CRC32C} {
			if v, ok := (*sp)[algo]; ok {
				file.Hashes = append(file.Hashes, httpx.MetalinkHash{Type: algo, Value: v})
			}
		}
	}
	self := false
	for _, x := range rk {
		u := x.r.url
		if u == "" {
			if self {
				continue
			}
			self = true
			u = selfURL(r, p)
		}
		file.URLs = append(file.URLs, httpx.MetalinkURL{Priority: len(file.URLs) + 1, URL: u})
	}
	w.Header().Set("Content-Type", httpx.MetalinkType)
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	_ = httpx.WriteMetalink(w, &httpx.Metalink{Generator: "lakefed", Files: []httpx.MetalinkFile{file}})
}

// selfURL is the URL the client used to reach the federator for p.
func selfURL(r *http.Request, p string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host, Path: p}).String()
}

// writeMissing answers 404, 403 or 503 for a path no endpoint gave us,
// naming every endpoint asked and what it said. 404 only when every
// endpoint that could hold the path said "not found".
func (f *Federator) writeMissing(w http.ResponseWriter, r *http.Request, s *snapshot, p string, e *entry) {
	var b strings.Builder
	switch e.status {
	case http.StatusNotFound:
		if len(e.answers) == 0 {
			fmt.Fprintf(&b, "lakefed: %s: not found: no endpoint holds this path\n", p)
		} else {
			fmt.Fprintf(&b, "lakefed: %s: not found on any endpoint that could hold it\n", p)
		}
	case http.StatusServiceUnavailable:
		var failed []string
		for _, a := range e.answers {
			if a.kind == ansUnavailable || a.kind == ansDown {
				failed = append(failed, a.m.name)
			}
		}
		pathUnavailable(w, s, failed)
		fmt.Fprintf(&b, "lakefed: %s: not found on the endpoints that answered, and some could not answer\n", p)
	default:
		fmt.Fprintf(&b, "lakefed: %s: refused\n", p)
	}
	writeAnswers(&b, e)
	httpError(w, e.status, b.String())
}

// writeNoReplica answers 503 when the path exists but no replica may be
// used now: all are down or were tried by the client.
func (f *Federator) writeNoReplica(w http.ResponseWriter, s *snapshot, p string, e *entry, tried []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "lakefed: %s: no usable replica (down, or tried by the client: %s)\n", p, strings.Join(tried, ","))
	for _, r := range e.replicas {
		state := "up"
		if !r.m.h.Up() {
			state = "down"
		}
		fmt.Fprintf(&b, "%s: has it, %s\n", r.m.name, state)
	}
	var names []string
	for _, r := range e.replicas {
		names = append(names, r.m.name)
	}
	pathUnavailable(w, s, names)
	httpError(w, http.StatusServiceUnavailable, b.String())
}

// pathUnavailable sets the headers of a 503 about one path: Retry-After,
// and PathUnavailableHeader naming the endpoints behind this federator
// that failed, so that a federator asking this one as its upstream does
// not count the answer against this federator's health.
func pathUnavailable(w http.ResponseWriter, s *snapshot, failed []string) {
	h := w.Header()
	h.Set("Retry-After", retryAfter(s))
	v := strings.Join(failed, ", ")
	if v == "" {
		v = "none named"
	}
	h.Set(upstream.PathUnavailableHeader, v)
}

func retryAfter(s *snapshot) string {
	return strconv.Itoa(max(1, int(s.cfg.RetryAfter.D()/time.Second)))
}

func writeAnswers(b *strings.Builder, e *entry) {
	for _, a := range e.answers {
		fmt.Fprintf(b, "%s: %s", a.m.name, a.kind)
		if a.err != "" {
			fmt.Fprintf(b, ": %s", a.err)
		}
		if a.dur > 0 {
			fmt.Fprintf(b, " (%s)", a.dur.Round(10*time.Microsecond))
		}
		b.WriteByte('\n')
	}
}

func describeAnswers(e *entry) string {
	var parts []string
	for _, a := range e.answers {
		parts = append(parts, a.m.name+"="+a.kind.String())
	}
	return strings.Join(parts, " ")
}

// httpError writes a short text/plain error.
func httpError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Del("Link")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

// serveDir answers GET and HEAD on a directory: HEAD from metadata with
// the directory content type, GET with a merged HTML listing.
func (f *Federator) serveDir(w http.ResponseWriter, r *http.Request, s *snapshot, p string, e *entry, hops int) {
	h := w.Header()
	if r.Method == http.MethodHead {
		h.Set("Content-Type", upstream.DirType)
		if e.lastMod != "" {
			h.Set("Last-Modified", e.lastMod)
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	l := f.list(r.Context(), s, p, hops)
	if l.status != http.StatusOK {
		f.writeMissing(w, r, s, p, &entry{status: l.status, answers: l.answers})
		return
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>")
	b.WriteString(html.EscapeString(p))
	b.WriteString("</title></head><body><h1>")
	b.WriteString(html.EscapeString(p))
	b.WriteString("</h1>\n<ul>\n")
	for _, it := range l.items {
		name := it.Name
		if it.IsDir {
			name += "/"
		}
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString("./"+(&url.URL{Path: name}).EscapedPath()), html.EscapeString(name))
	}
	b.WriteString("</ul></body></html>\n")
	h.Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}
