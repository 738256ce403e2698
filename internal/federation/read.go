package federation

import (
	"context"
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

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

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
		if acceptsMetalink(v) {
			return true
		}
	}
	return false
}

// acceptsMetalink reports whether one Accept value asks for a Metalink.
func acceptsMetalink(v string) bool { return strings.Contains(v, httpx.MetalinkType) }

func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// serveRead answers GET and HEAD: a redirect, a metalink, metadata, a
// listing, or the bytes.
func (f *Federator) serveRead(rq *request) {
	for fresh := false; ; fresh = true {
		if f.serveReadOnce(rq, fresh) != errStale || fresh {
			return
		}
		// A proxied read found the metadata out of date before it sent
		// anything: look again, once.
	}
}

// serveReadOnce answers a read from the cached metadata (fresh: from a
// look-up made for this request). It returns errStale, having written
// nothing, when a proxied read found a replica changed.
func (f *Federator) serveReadOnce(rq *request, fresh bool) error {
	r := rq.r
	e := f.lookup(r.Context(), rq.s, rq.p, rq.hops)
	if e.status != http.StatusOK {
		f.writeMissing(rq, e)
		return nil
	}
	if e.isDir {
		f.serveDir(rq, e)
		return nil
	}
	q := parseReadQuery(r.URL.RawQuery)
	var buf [8]ranked
	rk := f.rank(rq.s, e, clientAddr(r), q.tried, buf[:0])
	h := rq.w.Header()
	if _, debug := r.Header[DebugHeader]; debug {
		h.Set(ChoiceHeader, describe(rk)+" | "+describeAnswers(e))
	}
	if len(rk) == 0 {
		f.writeNoReplica(rq, e, q.tried)
		return nil
	}
	f.refreshURLs(r, rk)
	if q.metalink || wantsMetalink(r.Header) {
		f.writeMetalink(rq, e, rk)
		return nil
	}
	link, loc := e.linkValue(rk)
	if link != nil {
		h["Link"] = link
	}
	if r.Method == http.MethodHead {
		f.writeHead(rq, e, rk)
		return nil
	}
	best := rk[0].r
	if !best.redirectable() {
		return f.proxy(rq, rk, fresh)
	}
	best.m.mm.redirects.Inc()
	h["Location"] = loc
	rq.w.WriteHeader(http.StatusFound)
	return nil
}

// refreshURLs replaces, in rk, the redirect URLs that have used up half
// their life (pre-signed S3 URLs made when the answer was cached) with
// fresh ones, so a client always gets at least half of presign_expiry.
// The cached entry is not changed; a failed refresh keeps the old URL,
// which is still valid (checkPresign: expiry >= cache TTL). r is the
// request (an *http.Request, or a *fastpath.Request), whose context a
// refresh is made under.
func (f *Federator) refreshURLs(r interface{ Context() context.Context }, rk []ranked) {
	var now int64
	for i := range rk {
		old := rk[i].r
		if old.m.presign == 0 || !old.redirectable() {
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
		fresh := *old // its own loc: the cached replica keeps the old URL
		fresh.loc[0], fresh.derived, fresh.born = u.String(), false, now
		rk[i].r = &fresh
	}
}

// linkCache is the Link header value made for one entry and one order
// of its replicas, with the Location of its first replica, and (next)
// those made for other orders before it. Immutable: a new order is a
// new node in front.
type linkCache struct {
	key  uint64
	link [1]string // "": no redirectable replica
	loc  [1]string // the first replica's URL, a part of link; "" when it is proxied
	next *linkCache
}

// maxLinkOrders bounds linkCache: near-equal replicas are shuffled per
// request, so an entry of n of them sees up to n! orders (6 for three).
const maxLinkOrders = 8

// linkValue returns the Link header value for rk, a ranking of e's
// replicas, and the Location of rk[0], as shared header values (nil
// when no replica, or rk[0], can be redirected to), made once per entry
// and order rather than per request. A ranking holding a refreshed
// pre-signed URL is not cached.
func (e *entry) linkValue(rk []ranked) (link, loc []string) {
	key, ok := uint64(len(rk)), len(rk) <= 7
	for i := 0; ok && i < len(rk); i++ {
		r := rk[i].r
		ok = int(r.idx) < len(e.replicas) && e.replicas[r.idx] == r
		key |= (uint64(r.idx) + 1) << (8 * (i + 1))
	}
	if !ok {
		return newLinkCache(rk).values()
	}
	head := e.links.Load()
	orders := 0
	for lc := head; lc != nil; lc = lc.next {
		if lc.key == key {
			return lc.values()
		}
		orders++
	}
	n := newLinkCache(rk)
	n.key, n.next = key, head
	if orders < maxLinkOrders {
		e.links.CompareAndSwap(head, n) // a lost race only costs a rebuild later
	}
	return n.values()
}

// newLinkCache makes the values for rk: Location is the start of the
// Link value, "<" + rk[0]'s URL + ">; ...", when rk[0] is redirectable
// (the Link value lists the redirectable replicas in rank order).
func newLinkCache(rk []ranked) *linkCache {
	lc := &linkCache{link: [1]string{linkHeader(rk)}}
	if len(rk) > 0 && rk[0].r.redirectable() {
		lc.loc[0] = lc.link[0][1 : 1+rk[0].r.urlLen()]
	}
	return lc
}

// values returns the node's Link and Location as header values, each
// nil when empty.
func (lc *linkCache) values() (link, loc []string) {
	if lc.link[0] != "" {
		link = lc.link[:]
	}
	if lc.loc[0] != "" {
		loc = lc.loc[:]
	}
	return link, loc
}

// linkHeader lists every redirectable replica in rank order as RFC 6249
// duplicates ("<url>; rel=duplicate; pri=1, ...").
func linkHeader(rk []ranked) string {
	var b strings.Builder
	n := 0
	for _, x := range rk {
		n += x.r.urlLen() + 28
	}
	b.Grow(n)
	pri := 0
	for _, x := range rk {
		if !x.r.redirectable() {
			continue
		}
		pri++
		if pri > 1 {
			b.WriteString(", ")
		}
		b.WriteByte('<')
		x.r.writeURL(&b)
		b.WriteString(">; rel=duplicate; pri=")
		b.WriteString(strconv.Itoa(pri))
	}
	return b.String()
}

// writeHead answers HEAD from metadata alone: this is the file-open-rate
// path, and it touches no endpoint unless a checksum is asked for that
// the metadata does not have.
func (f *Federator) writeHead(rq *request, e *entry, rk []ranked) {
	w, r := rq.w, rq.r
	h := w.Header()
	e.headFields(func(name string, v []string) { h[name] = v })
	if hasConditional(r.Header) {
		if code := httpx.CheckPreconditions(r.Header, r.Method, e.hdr[hdrETag], e.modTime(), true); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	if wd := r.Header["Want-Digest"]; len(wd) > 0 {
		if algos := httpx.ParseWantDigest(strings.Join(wd, ",")); len(algos) > 0 {
			if d := httpx.FormatDigest(f.checksums(rq, e, rk, algos), algos...); d != "" {
				h["Digest"] = []string{d}
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

// headFields calls set with each header a HEAD answer from e carries
// (but Link, which depends on the ranking), as shared header values: the
// handler's writeHead and the fast path (fast.go) answer with the same.
func (e *entry) headFields(set func(name string, v []string)) {
	set("Content-Length", e.header(hdrSize))
	set("Accept-Ranges", hBytes)
	set("Content-Type", hOctets)
	if v := e.header(hdrLastMod); v != nil {
		set("Last-Modified", v)
	}
	if v := e.header(hdrETag); v != nil {
		set("Etag", v)
	}
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
func (f *Federator) checksums(rq *request, e *entry, rk []ranked, algos []string) map[string]string {
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
	primary := e.replicas[0].info()
	for _, a := range missing {
		for _, x := range rk {
			// Only replicas holding the version the entry describes.
			if same, _ := checksumsAgree(primary, x.r.info()); !same && x.r != e.replicas[0] {
				continue
			}
			v, err := endpoint.Checksum(rq.r.Context(), x.r.m.ep, x.r.path, a)
			if err == nil {
				add[a] = v
				break
			}
			if errors.Is(endpoint.Class(err), endpoint.ErrUnavailable) {
				f.requestResult(rq.s, x.r.m, err, 0)
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
	e.keep()
	return merged
}

// writeMetalink answers with a Metalink 4 document (RFC 5854) listing the
// replicas in rank order. Proxied replicas are represented by the
// federator's own URL.
func (f *Federator) writeMetalink(rq *request, e *entry, rk []ranked) {
	w, r, p := rq.w, rq.r, rq.p
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
		u := x.r.url()
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

// serveDir answers GET and HEAD on a directory: HEAD from metadata with
// the directory content type, GET with a merged HTML listing.
func (f *Federator) serveDir(rq *request, e *entry) {
	w, r, p := rq.w, rq.r, rq.p
	h := w.Header()
	if r.Method == http.MethodHead {
		h.Set("Content-Type", httpx.DirType)
		if e.hdr[hdrLastMod] != "" {
			h.Set("Last-Modified", e.hdr[hdrLastMod])
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	l := f.list(r.Context(), rq.s, p, rq.hops)
	if l.status != http.StatusOK {
		f.writeMissing(rq, &entry{status: l.status, answers: l.answers})
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
