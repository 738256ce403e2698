package federation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/upstream"
)

// writable returns the members that may take a write of p, healthy ones
// first sorted by priority, and how many matched but are down.
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
	slices.SortStableFunc(up, func(a, b *member) int {
		if a.upstream != b.upstream { // locals before upstreams
			if a.upstream {
				return 1
			}
			return -1
		}
		return a.priority - b.priority
	})
	return up, down
}

// statusOf maps an endpoint error to the status the federator answers.
func statusOf(err error) int {
	switch endpoint.Class(err) {
	case endpoint.ErrNotFound:
		return http.StatusNotFound
	case endpoint.ErrRefused:
		if errors.Is(err, endpoint.ErrExist) {
			return http.StatusConflict
		}
		return http.StatusForbidden
	}
	return http.StatusServiceUnavailable
}

// servePut places a new file: 307 to the endpoint the placement rule picks
// (the first healthy writable endpoint by priority, or round-robin over
// the best priority with placement: spread), or, for proxied endpoints and
// those whose redirected PUT would lose the checksum (S3: see
// member.putProxy), the federator writes it there itself.
func (f *Federator) servePut(w http.ResponseWriter, r *http.Request, s *snapshot, p string, hops int) {
	cands, down := writable(s, p, hops)
	if len(cands) == 0 {
		if down > 0 {
			w.Header().Set("Retry-After", retryAfter(s))
			httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("lakefed: %s: every writable endpoint for this path is down", p))
			return
		}
		httpError(w, http.StatusForbidden, fmt.Sprintf("lakefed: %s: no writable endpoint holds this path", p))
		return
	}
	m := cands[0]
	if s.cfg.Placement == "spread" {
		n := 1
		for n < len(cands) && cands[n].priority == m.priority && cands[n].upstream == m.upstream {
			n++
		}
		m = cands[f.spread.Add(1)%uint64(n)]
	}
	ep := m.endpointPath(p)
	hold := s.cfg.MetadataCache.NegativeTTL.D()
	if !m.proxy && !m.putProxy {
		u, err := endpoint.RedirectURL(r.Context(), m.ep, ep, endpoint.OpWrite)
		if err == nil {
			// The write happens after we answer: hold off caching "not
			// found" for this path for a while.
			s.invalidate(p, hold)
			m.mm.redirects.Inc()
			w.Header().Set("Location", u.String())
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
	}
	ctx := r.Context()
	if hops > 0 {
		ctx = upstream.WithHops(ctx, hops)
	}
	start := time.Now()
	err := m.ep.Put(ctx, ep, r.Body, r.ContentLength)
	s.invalidate(p, 0)
	if err != nil {
		if ctx.Err() == nil {
			f.requestResult(s, m, err, 0)
		}
		httpError(w, statusOf(err), fmt.Sprintf("lakefed: put %s on %s: %v", p, m.name, err))
		return
	}
	f.requestResult(s, m, nil, time.Since(start))
	w.Header().Set("X-Lakefed-Endpoint", m.name)
	w.WriteHeader(http.StatusCreated)
}

// serveDelete removes every replica of p on writable endpoints. It looks
// afresh (not from the cache) so that no replica is missed. 204 when every
// replica went, 404 when there was none, else the worst failure with a
// body saying which endpoint said what.
func (f *Federator) serveDelete(w http.ResponseWriter, r *http.Request, s *snapshot, p string, hops int) {
	e := f.locate(r.Context(), s, p, hops)
	defer s.invalidate(p, 0)
	if e.status != http.StatusOK {
		f.writeMissing(w, r, s, p, e)
		return
	}
	if len(e.replicas) == 0 {
		httpError(w, http.StatusForbidden, fmt.Sprintf("lakefed: %s: a directory of the federation itself cannot be deleted", p))
		return
	}
	ctx := r.Context()
	if hops > 0 {
		ctx = upstream.WithHops(ctx, hops)
	}
	errs := make([]error, len(e.replicas))
	var wg sync.WaitGroup
	for i, rep := range e.replicas {
		if !rep.m.writable {
			errs[i] = fmt.Errorf("read-only in the federation: %w", endpoint.ErrRefused)
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
	status := http.StatusNoContent
	var b strings.Builder
	for i, rep := range e.replicas {
		if errs[i] == nil {
			fmt.Fprintf(&b, "%s: deleted\n", rep.m.name)
			continue
		}
		fmt.Fprintf(&b, "%s: %v\n", rep.m.name, errs[i])
		if st := statusOf(errs[i]); status == http.StatusNoContent || st == http.StatusServiceUnavailable {
			status = st
		}
	}
	for _, a := range e.answers {
		if a.kind == ansDown || a.kind == ansUnavailable {
			fmt.Fprintf(&b, "%s: %s: a replica there may remain\n", a.m.name, a.kind)
			status = http.StatusServiceUnavailable
		}
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter(s))
	}
	httpError(w, status, fmt.Sprintf("lakefed: delete %s: not every replica was deleted\n%s", p, b.String()))
}

// serveMkcol creates the directory p on every healthy writable endpoint
// that could hold it: 201 when at least one did.
func (f *Federator) serveMkcol(w http.ResponseWriter, r *http.Request, s *snapshot, p string) {
	cands, down := writable(s, p, s.cfg.MaxHops) // never upstreams: they have their own
	defer s.invalidate(p, 0)
	if len(cands) == 0 {
		if down > 0 {
			w.Header().Set("Retry-After", retryAfter(s))
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
		if st := statusOf(errs[i]); status == 0 || st == http.StatusServiceUnavailable {
			status = st
		}
	}
	httpError(w, status, fmt.Sprintf("lakefed: mkcol %s failed everywhere\n%s", p, b.String()))
}
