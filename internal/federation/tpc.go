package federation

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// serveCopy answers a WLCG HTTP third-party copy (COPY with Source: a
// pull; COPY with a Destination on another host: a push) by sending the
// client, with 307, to the storage endpoint that does the copy: for a
// pull the endpoint where a PUT of the path would be placed, for a push
// the best replica of the path. The copy runs between the two storage
// elements, as FTS wants; the bytes never pass the federator, whose
// rules (auth) the client has already passed here. The endpoint must be
// one clients can reach and must have third-party copy turned on (tpc:
// true on a lakefed storage role, XrdHttpTPC, dCache, StoRM).
//
// A COPY within the namespace (Destination on this federator) is not a
// third-party copy and is refused: replicas are made by writing.
func (f *Federator) serveCopy(rq *request) {
	w, r, s, p := rq.w, rq.r, rq.s, rq.p
	src := r.Header.Get("Source")
	dst := r.Header.Get("Destination")
	var pull bool
	switch {
	case src != "":
		pull = true
	case dst != "":
		u, err := url.Parse(dst)
		if err != nil || u.Host == "" || strings.EqualFold(u.Host, r.Host) {
			httpError(w, http.StatusNotImplemented, "lakefed: COPY within the federation is not supported; a third-party copy names a remote Source or Destination")
			return
		}
	default:
		httpError(w, http.StatusBadRequest, "lakefed: COPY needs a Source (pull) or a Destination (push) header")
		return
	}
	var to *member
	var where string
	if pull {
		// A pull is a write: the rules of a PUT (Federator.Put) place it
		// and refuse it. The copy runs between the two storage elements
		// after the answer, so a file that exists is refused, as a PUT
		// over one is never redirected (putPlan.redirect): nothing could
		// retire its other replicas once the copy is done, and a read
		// before its end would cache the old version again.
		pl, err := f.planPut(r.Context(), s, p, WriteOptions{Hops: rq.hops, Cond: r.Header})
		if err == nil && pl.existed {
			var names []string
			for _, rep := range append(pl.old, pl.mine) {
				if rep != nil {
					names = append(names, rep.m.name)
				}
			}
			err = writeErr(http.StatusConflict, endpoint.ErrExist, "lakefed: %s: exists on %s, whose old version a third-party copy could not replace everywhere before its end; delete the file first", p, strings.Join(names, ", "))
		}
		if err == nil {
			err = f.sharedWritable(p)
		}
		if err != nil {
			f.wrote(r.Context(), s, p, 0, false)
			f.writeFailed(rq, err)
			return
		}
		to, where = pl.m, pl.m.endpointPath(p)
		// The copy lands after the answer: what the federators sharing
		// state hold of the path goes now (a "not found" one of them
		// caches before it lands lasts its negative TTL).
		if err := f.wrote(r.Context(), s, p, s.cfg.MetadataCache.NegativeTTL.D(), true); err != nil {
			f.writeFailed(rq, err)
			return
		}
	} else {
		e := f.lookup(r.Context(), s, p, rq.hops)
		if e.status != http.StatusOK {
			f.writeMissing(rq, e)
			return
		}
		if e.isDir {
			httpError(w, http.StatusForbidden, fmt.Sprintf("lakefed: %s: is a directory", p))
			return
		}
		rk := f.rank(s, e, clientAddr(r), nil, nil)
		for _, x := range rk {
			if !x.r.m.proxy {
				to, where = x.r.m, x.r.path
				break
			}
		}
		if to == nil {
			httpError(w, http.StatusNotImplemented, fmt.Sprintf("lakefed: %s: no replica is on an endpoint a third-party copy can be sent to", p))
			return
		}
	}
	if to.proxy {
		httpError(w, http.StatusNotImplemented, fmt.Sprintf("lakefed: %s: endpoint %s is not reachable by clients, so it cannot run a third-party copy", p, to.name))
		return
	}
	op := endpoint.OpRead
	if pull {
		op = endpoint.OpWrite
	}
	u, err := endpoint.RedirectURL(r.Context(), to.ep, where, op)
	if err != nil {
		httpError(w, http.StatusNotImplemented, fmt.Sprintf("lakefed: %s: endpoint %s gives no URL to send a third-party copy to: %v", p, to.name, err))
		return
	}
	if _, ok := to.ep.(endpoint.Presigner); ok {
		// A pre-signed S3 URL is for one method, not for COPY.
		httpError(w, http.StatusNotImplemented, fmt.Sprintf("lakefed: %s: endpoint %s (S3) does not run third-party copies", p, to.name))
		return
	}
	to.mm.redirects.Inc()
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusTemporaryRedirect)
}
