package federation

// The federator's answers on the fast path (package fastpath): the
// answers of the hot path, from warm metadata.
//
//   - A GET of a file whose entry is in the metadata cache (fresh, and
//     trusted: f.trusted), whose best-ranked replica can be redirected to:
//     302 with Location and Link.
//   - A HEAD of such a file (any replica, redirectable or not): 200 with
//     the metadata's headers (writeHead's) and Link.
//   - A GET of such a file whose best-ranked replica is proxied (mode:
//     proxy, or a replica the client cannot be sent to): the handler
//     itself (serveNamespace) answers it, through the fast path's
//     http.ResponseWriter (fastpath.Writer), so the proxy's rules have
//     one home (proxy, httpx.ServeContent): no status before a replica
//     confirmed the version, a fresh look-up when it changed, failover
//     only to proven bytes, 503 when no replica opens, an aborted
//     transfer when the read breaks. What the fast path adds is the
//     copy: a replica read that can splice (a plain-HTTP replica on a
//     connection of its own, endpoint.WithSplice) moves the bytes socket
//     to socket by splice(2) (failoverReader.spliceTo), never through
//     the federator's memory.
//
// Each is the handler's answer byte for byte but for Date: the same rank,
// refreshURLs, linkValue and headFields make the first two, and the same
// counters (metadata cache hits, redirects by endpoint, answers) count
// them. Everything else is declined and the handler answers it: a cold
// or untrusted entry (a look-up is needed), a directory, a missing path,
// no usable replica, a path that is not clean, the control paths
// (/metrics, /api/...), a Metalink asked for in Accept, and every query
// but a pin to one endpoint (SiteParam, read by siteQuery as the handler
// reads it), which is answered from that endpoint's view as the handler
// answers it. What fastpath itself never offers (X-Lakefed-Debug; a
// conditional; Range; Want-Digest; the hop header; credentials; a query
// that is not plain) is the rest of what the handler reads. A Server
// for FastResponder sets fastpath.Options.Query.
//
// A declined request hands its connection to net/http for good
// (fastpath): a client whose keep-alive connection asks for a cold path
// is answered by the handler from then on, on that connection.
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

// FastResponder returns the federator's fastpath.Responder: its Handler's
// answers to a warm GET redirect and a warm HEAD (fast.go).
func (f *Federator) FastResponder() fastpath.Responder { return fastResponder{f} }

// fastResponder is FastResponder's Responder.
type fastResponder struct{ f *Federator }

// Respond answers req when the handler would answer it from warm metadata
// alone, and declines every other request.
func (fr fastResponder) Respond(a *fastpath.Answer, req *fastpath.Request) bool {
	f := fr.f
	p := string(req.Target)
	if !isClean(p) || isControlPath(p) || req.Accept != nil && acceptsMetalink(string(req.Accept)) || !f.trusted() {
		return false
	}
	s := f.snap.Load()
	if req.Query != nil {
		// Only a pin to a known endpoint: the handler answers any other
		// query (?metalink, ?tried=, an unknown site's 400) otherwise.
		site, only := siteQuery(string(req.Query))
		if !only || s.pins[site] == nil {
			return false
		}
		s = s.pins[site]
	}
	e := s.cache.get(p, time.Now().UnixNano())
	if e == nil || !f.fresh(e) || e.status != 200 || e.isDir || e.hdr[hdrSize] == "" {
		return false
	}
	var buf [8]ranked
	rk := f.rank(s, e, req.RemoteAddrPort().Addr(), nil, buf[:0])
	if len(rk) == 0 {
		return false // writeNoReplica's 503
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
		return fr.proxied(a, req)
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

// proxied answers a warm GET to proxy with the handler's own code
// (serveNamespace: the look-up, a cache hit, the ranking, proxy) through
// the fast path's Writer, and always answers: a replica that changed
// since the look-up gets a fresh one there, as on net/http. The read may
// splice when the client's connection is TCP: only then does it ask
// replicas for connections of their own (endpoint.WithSplice). An
// aborted answer (http.ErrAbortHandler, the read broke mid-body) is
// answered too: the Writer's body is short of its Content-Length, and
// the fast path closes the connection after it.
func (fr fastResponder) proxied(a *fastpath.Answer, req *fastpath.Request) (answered bool) {
	f := fr.f
	w := a.Writer()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	if w.Spliceable() {
		ctx = endpoint.WithSplice(ctx)
	}
	f.m.fast.Inc()
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			panic(v)
		}
		w.End() // final status and bytes for the access log
	}()
	answered = true
	f.serveNamespace(w, req.HTTPRequest(ctx))
	return answered
}
