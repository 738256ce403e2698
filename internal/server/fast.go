package server

// The front listener's fast path (package fastpath): on a plain listener
// whose chain would not change the answer, the federator's GETs and
// HEADs of the namespace (federation.FastResponder) are answered
// without net/http.
//
// The rule is the simplest that is correct: the fast path is used only
// when nothing between the listener and the federator's Handler can
// change the answer to an anonymous GET or HEAD of a namespace path:
//
//   - no TLS: a handed-off TLS connection would not look like one to
//     net/http (fastpath's package comment);
//   - no auth section: its rules decide per request and per caller
//     (guardNamespace), and refusals are counted;
//   - no write buffer: it answers reads of the files it holds
//     (buffer.Wrap);
//   - no cache on the front listener: it answers the namespace's reads
//     itself (withCache).
//
// Otherwise every connection goes to net/http as before. On the fast
// path, the paths the chain gives to something other than the namespace
// — the dashboard (/ui), the operator's pages behind their gate
// (/metrics, /api/...) and the other /api/ handlers — are declined here
// whatever the federator would say (which reads the query, and answers
// only a pin to one endpoint: fastpath.Options.Query), and what the
// chain does for every
// request is done here too: the request ID (fastpath) and the access log
// (logRequest, as tagged writes it).

import (
	"crypto/tls"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/httpx/fastpath"
	"github.com/lakefed/lakefed/internal/web"
)

// frontFastPath reports whether the front listener, served with tlsCfg,
// may run the fast path (see above).
func (s *Server) frontFastPath(tlsCfg *tls.Config) bool {
	cacheOnFront := s.cache != nil && s.cfg.Cache.Listen == ""
	return tlsCfg == nil && s.auth == nil && s.buffer == nil && !cacheOnFront
}

// frontResponder is the front listener's fastpath.Responder: fed's
// answers for the paths the chain gives to the namespace, with the
// access log.
type frontResponder struct {
	s   *Server
	fed fastpath.Responder
}

func (fr frontResponder) Respond(a *fastpath.Answer, req *fastpath.Request) bool {
	start := time.Now()
	p := string(req.Target)
	if web.IsUIPath(p) || p == "/metrics" || strings.HasPrefix(p, "/api/") {
		return false
	}
	if !fr.fed.Respond(a, req) {
		return false
	}
	if fr.s.cfg.AccessLog {
		fr.s.logRequest(req.Context(), req.Method(), p, a.StatusCode(), a.Sent(), start, req.RemoteAddr())
	}
	return true
}
