package federation

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// writable returns the members that may take a write of p, healthy ones
// in placement order, and how many matched but are down. Placement order
// is placeBefore's: the most specific prefix first, as an endpoint
// configured for /scratch is where /scratch/x belongs even when one for /
// is preferred by priority.
func writable(s *snapshot, p string, hops int) (up []*member, down int) {
	for _, m := range s.members {
		if !m.writable || !m.matches(p) || (m.upstream && hops >= s.cfg.MaxHops) {
			continue
		}
		if !m.h.Up() {
			down++
			continue
		}
		up = append(up, m)
	}
	slices.SortStableFunc(up, placeBefore)
	return up, down
}

// placeBefore orders write candidates: the longer (more specific) prefix
// first, then locals before upstreams, then the lower priority.
func placeBefore(a, b *member) int {
	if la, lb := len(a.prefix), len(b.prefix); la != lb {
		return lb - la
	}
	if a.upstream != b.upstream {
		if a.upstream {
			return 1
		}
		return -1
	}
	return a.priority - b.priority
}

// servePut places a file. The rules (README, "Guarantees"):
//
//   - A Content-Range is refused with 400: a PUT stores a whole file
//     (RFC 9110 §14.5), and a partial one would replace it by a fragment.
//   - The conditionals (If-Match, If-None-Match, If-Unmodified-Since) are
//     evaluated against a fresh look-up of every replica: If-None-Match:
//   - fails when any replica exists, If-Match passes when it names the
//     ETag of a replica. When an endpoint that could hold the path does
//     not answer, a conditional PUT is 503: the condition cannot be
//     known. (A replica changed between the look-up and the write is not
//     caught; the endpoint evaluates the header again on a redirected
//     PUT.)
//   - A file that exists is written where it lives (the first writable
//     endpoint holding it, by placement order), a new one by the
//     placement rule: 307 to that endpoint when it can be sent to and no
//     other replica needs retiring, else the federator writes it itself.
//   - A write the federator carries checks the client's Digest and
//     Content-MD5 while it streams: a mismatch aborts the write before
//     the endpoint commits it (400, nothing stored).
//   - Read your writes: once the write succeeded, the other replicas (the
//     old version) are deleted; one that cannot be (down, read-only) is
//     marked stale and never ranked until a look-up sees it change. The
//     metadata cache entry is dropped.
//   - 201 when the file is new, 204 when it replaced one (RFC 9110 §9.3.4).
func (f *Federator) servePut(rq *request) {
	w, r, s, p, hops := rq.w, rq.r, rq.s, rq.p, rq.hops
	if _, ok := r.Header["Content-Range"]; ok {
		httpError(w, http.StatusBadRequest, "lakefed: PUT with Content-Range: partial writes are not supported (RFC 9110 §14.5)")
		return
	}
	want, err := wantedDigests(r.Header)
	if err != nil {
		httpError(w, http.StatusBadRequest, "lakefed: "+err.Error())
		return
	}
	cands, down := writable(s, p, hops)
	if len(cands) == 0 {
		if down > 0 {
			pathUnavailable(rq, nil)
			httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("lakefed: %s: every writable endpoint for this path is down", p))
			return
		}
		httpError(w, http.StatusForbidden, fmt.Sprintf("lakefed: %s: no writable endpoint holds this path", p))
		return
	}
	e := f.locate(r.Context(), s, p, hops, false)
	if code, msg := putPreconditions(r.Header, e); code != 0 {
		if code == http.StatusServiceUnavailable {
			pathUnavailable(rq, nil)
		}
		httpError(w, code, fmt.Sprintf("lakefed: %s: %s", p, msg))
		return
	}
	if e.status == http.StatusOK && e.isDir && len(e.replicas) > 0 {
		httpError(w, http.StatusConflict, fmt.Sprintf("lakefed: %s: is a directory", p))
		return
	}
	existed := e.status == http.StatusOK && len(e.replicas) > 0
	m := f.placeWrite(s, p, cands, e)
	var old []*replica // replicas to retire once the write is done
	for _, rep := range e.replicas {
		if rep.m != m {
			old = append(old, rep)
		}
	}
	ep := m.endpointPath(p)
	if !m.proxy && !m.putProxy && !rq.carry && len(old) == 0 {
		u, err := endpoint.RedirectURL(r.Context(), m.ep, ep, endpoint.OpWrite)
		if err == nil {
			// The write happens after we answer: hold off caching "not
			// found" for this path for a while.
			s.invalidate(p, s.cfg.MetadataCache.NegativeTTL.D())
			m.mm.redirects.Inc()
			w.Header().Set("Location", u.String())
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
	}
	ctx := r.Context()
	if hops > 0 {
		ctx = httpx.WithHops(ctx, hops)
	}
	start := time.Now()
	body := &checkedBody{r: r.Body, want: want, hashes: newHashes(want)}
	err = m.ep.Put(ctx, ep, body, r.ContentLength)
	s.invalidate(p, 0)
	if err != nil {
		if body.mismatch != nil {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("lakefed: put %s: %v; nothing was stored", p, body.mismatch))
			return
		}
		if ctx.Err() == nil {
			f.requestResult(s, m, err, 0)
		}
		httpError(w, endpoint.HTTPStatus(err), fmt.Sprintf("lakefed: put %s on %s: %v", p, m.name, err))
		return
	}
	f.requestResult(s, m, nil, time.Since(start))
	f.retire(ctx, s, p, old)
	s.invalidate(p, 0)
	w.Header().Set("X-Lakefed-Endpoint", m.name)
	if existed {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// placeWrite picks the endpoint a PUT of p goes to: the first candidate
// (placement order) that holds the file, else the placement rule's.
func (f *Federator) placeWrite(s *snapshot, p string, cands []*member, e *entry) *member {
	for _, m := range cands {
		for _, rep := range e.replicas {
			if rep.m == m {
				return m
			}
		}
	}
	m := cands[0]
	if s.cfg.Placement == "spread" {
		n := 1
		for n < len(cands) && placeBefore(cands[n], m) == 0 {
			n++
		}
		m = cands[f.spread.Add(1)%uint64(n)]
	}
	return m
}

// putPreconditions evaluates a PUT's conditionals against a fresh look-up
// (RFC 9110 §13.2.2). It returns 0, or the status and why.
func putPreconditions(h http.Header, e *entry) (int, string) {
	if !hasConditional(h) {
		return 0, ""
	}
	if e.status == http.StatusServiceUnavailable || e.incomplete {
		return http.StatusServiceUnavailable, "an endpoint that could hold this path did not answer: the conditional headers cannot be evaluated"
	}
	exists := e.status == http.StatusOK && len(e.replicas) > 0
	if !exists {
		return preconditionStatus(httpx.CheckPreconditions(h, http.MethodPut, "", time.Time{}, false))
	}
	quoted := func(rep *replica) string {
		if rep.info.ETag == "" {
			return ""
		}
		return `"` + rep.info.ETag + `"`
	}
	// If-Match passes when it names some replica's ETag; If-None-Match
	// fails when it names any (or is "*").
	if im := h["If-Match"]; len(im) > 0 {
		list, ok := strings.Join(im, ","), false
		for _, rep := range e.replicas {
			ok = ok || httpx.ETagMatch(list, quoted(rep), false)
		}
		if !ok {
			return http.StatusPreconditionFailed, "If-Match names no replica's ETag"
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" {
		only := http.Header{"If-Unmodified-Since": {ius}}
		for _, rep := range e.replicas {
			if httpx.CheckPreconditions(only, http.MethodPut, "", rep.info.ModTime, true) != 0 {
				return http.StatusPreconditionFailed, "modified since If-Unmodified-Since on " + rep.m.name
			}
		}
	}
	if inm := h["If-None-Match"]; len(inm) > 0 {
		list := strings.Join(inm, ",")
		for _, rep := range e.replicas {
			if httpx.ETagMatch(list, quoted(rep), true) {
				return http.StatusPreconditionFailed, "If-None-Match matches the replica on " + rep.m.name
			}
		}
	}
	return 0, ""
}

func preconditionStatus(code int) (int, string) {
	if code == 0 {
		return 0, ""
	}
	return http.StatusPreconditionFailed, "precondition failed"
}

// retire removes the replicas of p that a write made stale, and marks
// stale those it cannot remove, so that they are not ranked.
func (f *Federator) retire(ctx context.Context, s *snapshot, p string, old []*replica) {
	if len(old) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx) // the write is done: finish the cleanup
	var wg sync.WaitGroup
	for _, rep := range old {
		wg.Go(func() {
			if rep.m.writable && rep.m.h.Up() {
				dctx, cancel := context.WithTimeout(ctx, rep.m.cfg.TimeoutOrDefault())
				err := rep.m.ep.Delete(dctx, rep.path)
				cancel()
				if err == nil || errors.Is(err, endpoint.ErrNotFound) {
					return
				}
				f.log.Warn("could not delete a replica a write made stale", "endpoint", rep.m.name, "path", p, "err", err)
			}
			f.stale.mark(rep.m.name, rep.path, rep.info)
		})
	}
	wg.Wait()
}

// wantedDigests returns the digests a PUT's client sent (Digest, RFC
// 3230, and Content-MD5, RFC 1864), or an error when they contradict
// each other or Content-MD5 is malformed.
func wantedDigests(h http.Header) (map[string]string, error) {
	want := httpx.ParseDigest(h.Get("Digest"))
	if cm := h.Get("Content-MD5"); cm != "" {
		v := httpx.ParseContentMD5(cm)
		if v == "" {
			return nil, errors.New("bad Content-MD5 header")
		}
		if old, ok := want[httpx.MD5]; ok && old != v {
			return nil, errors.New("digest mismatch: Digest md5 and Content-MD5 differ")
		}
		want[httpx.MD5] = v
	}
	return want, nil
}

func newHashes(want map[string]string) map[string]hash.Hash {
	if len(want) == 0 {
		return nil
	}
	hs := make(map[string]hash.Hash, len(want))
	for a := range want {
		hs[a] = httpx.NewHash(a)
	}
	return hs
}

// errDigestMismatch: the body of a PUT does not have the digest its
// client sent.
var errDigestMismatch = errors.New("digest mismatch")

// checkedBody is a PUT body that checks the client's digests as it is
// read: at the end of the body, a mismatch is returned in place of EOF,
// so that the endpoint's Put fails and stores nothing (Endpoint.Put: a
// failed Put leaves the old content).
type checkedBody struct {
	r        io.Reader
	want     map[string]string
	hashes   map[string]hash.Hash
	mismatch error // set when the end was reached with a wrong digest
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	for _, h := range b.hashes {
		h.Write(p[:n])
	}
	if err == io.EOF {
		for a, h := range b.hashes {
			if got := httpx.SumString(h); got != b.want[a] {
				b.mismatch = fmt.Errorf("%w: %s of the body is %s, the client sent %s", errDigestMismatch, a, got, b.want[a])
				return n, fmt.Errorf("%w: %w", b.mismatch, endpoint.ErrRefused)
			}
		}
	}
	return n, err
}

// serveDelete removes every replica of p on writable endpoints. It looks
// afresh (not from the cache) so that no replica is missed. 204 when every
// replica went, 404 when there was none, else the worst failure with a
// body saying which replicas went, which did not and why (deleteReport).
func (f *Federator) serveDelete(rq *request) {
	w, r, s, p, hops := rq.w, rq.r, rq.s, rq.p, rq.hops
	e := f.locate(r.Context(), s, p, hops, false)
	defer s.invalidate(p, 0)
	if e.status != http.StatusOK {
		f.writeMissing(rq, e)
		return
	}
	if len(e.replicas) == 0 {
		httpError(w, http.StatusForbidden, fmt.Sprintf("lakefed: %s: a directory of the federation itself cannot be deleted", p))
		return
	}
	ctx := r.Context()
	if hops > 0 {
		ctx = httpx.WithHops(ctx, hops)
	}
	errs := make([]error, len(e.replicas))
	var wg sync.WaitGroup
	for i, rep := range e.replicas {
		if !rep.m.writable {
			errs[i] = errReadOnly
			continue
		}
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, rep.m.cfg.TimeoutOrDefault())
			defer cancel()
			start := time.Now()
			err := rep.m.ep.Delete(dctx, rep.path)
			if errors.Is(err, endpoint.ErrNotFound) {
				err = nil // gone already: what we wanted
			}
			f.requestResult(s, rep.m, err, time.Since(start))
			errs[i] = err
		})
	}
	wg.Wait()
	status, report := deleteReport(e, errs)
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	if status == http.StatusServiceUnavailable {
		pathUnavailable(rq, nil)
	}
	httpError(w, status, fmt.Sprintf("lakefed: delete %s: %s", p, report))
}

// errReadOnly: a replica on an endpoint the federation does not write to.
var errReadOnly = fmt.Errorf("read-only in the federation: %w", endpoint.ErrRefused)

// deleteReport sums up a DELETE: 204, or the worst failure and a report
// whose first line (the one clients show) names the replicas deleted, the
// ones refused and why, the ones that failed and the endpoints that did
// not answer, then one line per endpoint.
func deleteReport(e *entry, errs []error) (int, string) {
	status := http.StatusNoContent
	var deleted, refused, failed, remain, lines []string
	for i, rep := range e.replicas {
		err := errs[i]
		switch {
		case err == nil:
			deleted = append(deleted, rep.m.name)
			lines = append(lines, rep.m.name+": deleted")
			continue
		case errors.Is(err, errReadOnly):
			refused = append(refused, rep.m.name+" (read-only in the federation)")
		case errors.Is(err, endpoint.ErrRefused):
			refused = append(refused, fmt.Sprintf("%s (%v)", rep.m.name, err))
		default:
			failed = append(failed, fmt.Sprintf("%s (%v)", rep.m.name, err))
		}
		lines = append(lines, fmt.Sprintf("%s: %v", rep.m.name, err))
		if st := endpoint.HTTPStatus(err); status == http.StatusNoContent || st == http.StatusServiceUnavailable {
			status = st
		}
	}
	for _, a := range e.answers {
		if a.kind == ansDown || a.kind == ansUnavailable {
			remain = append(remain, fmt.Sprintf("%s (%s)", a.m.name, a.kind))
			lines = append(lines, fmt.Sprintf("%s: %s: a replica there may remain", a.m.name, a.kind))
			status = http.StatusServiceUnavailable
		}
	}
	if status == http.StatusNoContent {
		return status, ""
	}
	parts := []string{"no replica was deleted"}
	if len(deleted) > 0 {
		parts[0] = "deleted: " + strings.Join(deleted, ", ")
	}
	for _, g := range []struct {
		label string
		names []string
	}{{"refused", refused}, {"failed", failed}, {"no answer, a replica may remain", remain}} {
		if len(g.names) > 0 {
			parts = append(parts, g.label+": "+strings.Join(g.names, ", "))
		}
	}
	return status, strings.Join(parts, "; ") + "\n" + strings.Join(lines, "\n") + "\n"
}

// serveMkcol creates the directory p on every healthy writable endpoint
// that could hold it: 201 when at least one did.
func (f *Federator) serveMkcol(rq *request) {
	w, r, s, p := rq.w, rq.r, rq.s, rq.p
	cands, down := writable(s, p, s.cfg.MaxHops) // never upstreams: they have their own
	defer s.invalidate(p, 0)
	if len(cands) == 0 {
		if down > 0 {
			pathUnavailable(rq, nil)
			httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("lakefed: %s: every writable endpoint for this path is down", p))
			return
		}
		httpError(w, http.StatusForbidden, fmt.Sprintf("lakefed: %s: no writable endpoint holds this path", p))
		return
	}
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, m := range cands {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(r.Context(), m.cfg.TimeoutOrDefault())
			defer cancel()
			start := time.Now()
			errs[i] = m.ep.Mkdir(mctx, m.endpointPath(p))
			f.requestResult(s, m, errs[i], time.Since(start))
		})
	}
	wg.Wait()
	var b strings.Builder
	status := 0
	for i, m := range cands {
		if errs[i] == nil {
			w.WriteHeader(http.StatusCreated)
			return
		}
		fmt.Fprintf(&b, "%s: %v\n", m.name, errs[i])
		if st := endpoint.HTTPStatus(errs[i]); status == 0 || st == http.StatusServiceUnavailable {
			status = st
		}
	}
	httpError(w, status, fmt.Sprintf("lakefed: mkcol %s failed everywhere\n%s", p, b.String()))
}
