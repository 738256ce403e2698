package federation

// The federator's answers on the fast path (package fastpath): the two
// answers of the hot path, from warm metadata, with no look-up.
//
//   - A GET of a file whose entry is in the metadata cache (fresh, and
//     trusted: f.trusted), whose best-ranked replica can be redirected to:
//     302 with Location and Link.
//   - A HEAD of such a file (any replica, redirectable or not): 200 with
//     the metadata's headers (writeHead's) and Link.
//
// Each is the handler's answer byte for byte but for Date: the same rank,
// refreshURLs, linkValue and headFields make it, and the same counters
// (metadata cache hits, redirects by endpoint) count it. Everything else
// is declined and the handler answers it: a cold or untrusted entry (a
// look-up is needed), a directory, a missing path, no usable replica, a
// best replica to proxy from, a path that is not clean, the control
// paths (/metrics, /api/...), a Metalink asked for in Accept. What
// fastpath itself never offers (a query, so no lakefed.site nor
// ?metalink; X-Lakefed-Debug; a conditional; Range; Want-Digest; the
// hop header; credentials) is the rest of what the handler reads.
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
	"net/http"
	"time"

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
		return false // proxied
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
