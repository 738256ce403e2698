package federation

// The federator's answers on the fast path (package fastpath). Those of
// the hot path are made from warm metadata, without the handler:
//
//   - A GET of a file whose entry is in the metadata cache (fresh, and
//     trusted: f.trusted), whose best-ranked replica can be redirected to:
//     302 with Location and Link.
//   - A HEAD of such a file (any replica, redirectable or not): 200 with
//     the metadata's headers (writeHead's) and Link.
//
// Each is the handler's answer byte for byte but for Date: the same rank,
// refreshURLs, linkValue and headFields make them, and the same counters
// (metadata cache hits, redirects by endpoint, answers) count them.
//
// Every other GET or HEAD of the namespace the fast path offers is
// answered by the handler itself (serveNamespace) through the fast
// path's http.ResponseWriter (fastpath.Writer): a cold or untrusted
// entry (the look-up), a directory, a missing path, no usable replica,
// a path that is not clean, a Metalink asked for in Accept or by query,
// a pin to one endpoint (SiteParam), and a file whose best-ranked
// replica is proxied (mode: proxy, or a replica the client cannot be
// sent to). So every rule keeps one home (the look-up, proxy,
// httpx.ServeContent), and a keep-alive client that asks for a cold
// path keeps the fast path for its next request. What the fast path
// adds to a proxied read is the copy: a replica read that can splice (a
// plain-HTTP replica on a connection of its own, endpoint.WithSplice)
// moves the bytes socket to socket by splice(2)
// (failoverReader.spliceTo), never through the federator's memory.
//
// Only the control paths (/metrics, /api/...), which the handler routes
// through its mux, are declined, with what fastpath itself never offers
// (X-Lakefed-Debug; a conditional; Range; Want-Digest; the hop header;
// credentials; a query that is not plain; a method other than GET and
// HEAD): net/http answers those, and keeps the connection from then on
// (fastpath). A Server for FastResponder sets fastpath.Options.Query.
//
// The federator's Handler is not the whole chain of a listener: the
// server that serves both decides whether what it puts in front (auth
// rules, an operator gate, the dashboard, a cache or buffer that answers
// reads) lets the fast path answer at all, and records the access log.

import (
	"context"
	"net/http"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx/fastpath"
)

// FastResponder returns the federator's fastpath.Responder: its
// Handler's answers to every GET and HEAD of the namespace (fast.go).
func (f *Federator) FastResponder() fastpath.Responder { return fastResponder{f} }

// fastResponder is FastResponder's Responder.
type fastResponder struct{ f *Federator }

// Respond answers req: from warm metadata when it can (the first two
// answers above), with the handler otherwise; it declines only the
// control paths.
func (fr fastResponder) Respond(a *fastpath.Answer, req *fastpath.Request) bool {
	f := fr.f
	p := string(req.Target)
	if isControlPath(p) {
		return false
	}
	if !isClean(p) || req.Accept != nil && acceptsMetalink(string(req.Accept)) || !f.trusted() {
		return fr.handled(a, req)
	}
	s := f.snap.Load()
	if req.Query != nil {
		// Only a pin to a known endpoint is answered from warm metadata:
		// the handler answers any other query (?metalink, ?tried=, an
		// unknown site's 400).
		site, only := siteQuery(string(req.Query))
		if !only || s.pins[site] == nil {
			return fr.handled(a, req)
		}
		s = s.pins[site]
	}
	e := s.cache.get(p, time.Now().UnixNano())
	if e == nil || !f.fresh(e) || e.status != 200 || e.isDir || e.hdr[hdrSize] == "" {
		return fr.handled(a, req)
	}
	var buf [8]ranked
	rk := f.rank(s, e, req.RemoteAddrPort().Addr(), nil, buf[:0])
	if len(rk) == 0 {
		return fr.handled(a, req) // writeNoReplica's 503
	}
	f.refreshURLs(req, rk)
	link, loc := e.linkValue(rk)
	if req.Head {
		f.m.hits.Inc()
		a.Status(http.StatusOK)
		e.headFields(func(name string, v []string) { a.Header(name, v[0]) })
		if link != nil {
			a.Header("Link", link[0])
		}
		a.End()
		f.m.fast.Inc()
		f.m.countAnswer(http.MethodHead, http.StatusOK)
		return true
	}
	best := rk[0].r
	if !best.redirectable() {
		return fr.handled(a, req)
	}
	f.m.hits.Inc()
	best.m.mm.redirects.Inc()
	a.Status(http.StatusFound)
	if link != nil {
		a.Header("Link", link[0])
	}
	a.Header("Location", loc[0])
	a.End()
	f.m.fast.Inc()
	f.m.countAnswer(http.MethodGet, http.StatusFound)
	return true
}

// handled answers req with the handler's own code (serveNamespace: the
// look-up, a cache hit, the ranking, a redirect, proxy, a listing, an
// error) through the fast path's Writer, and always answers. A read may
// splice when the client's connection is TCP: only then does it ask
// replicas for connections of their own (endpoint.WithSplice). An
// aborted answer (http.ErrAbortHandler, a proxied read broke mid-body)
// is answered too, cut short (Writer.Abort): the fast path closes the
// connection after it, as net/http does.
func (fr fastResponder) handled(a *fastpath.Answer, req *fastpath.Request) bool {
	f := fr.f
	w := a.Writer()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	if w.Spliceable() {
		ctx = endpoint.WithSplice(ctx)
	}
	f.m.fast.Inc()
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			w.Abort()
		}
		w.End() // final status and bytes for the access log
	}()
	f.serveNamespace(w, req.HTTPRequest(ctx))
	return true
}
