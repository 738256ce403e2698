package federation

import (
	"context"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

// listing is a directory merged across endpoints.
type listing struct {
	status  int
	items   []endpoint.Info // sorted by name, one per name
	answers []answer
}

// list lists the directory p on every healthy endpoint that could hold
// it, in parallel, and merges the answers: one entry per name (a name that
// is a directory anywhere is a directory). Upstreams are asked only when
// no local endpoint has the directory. The federation's virtual
// directories (parents of endpoint prefixes) are added.
func (f *Federator) list(ctx context.Context, s *snapshot, p string, hops int) listing {
	if hops > 0 {
		ctx = httpx.WithHops(ctx, hops)
	}
	byName := map[string]endpoint.Info{}
	var l listing
	listed := f.listOn(ctx, s, s.locals, p, byName, &l)
	if !listed && len(s.upstreams) > 0 {
		if hops < s.cfg.MaxHops {
			listed = f.listOn(ctx, s, s.upstreams, p, byName, &l)
		} else {
			for _, m := range s.upstreams {
				if m.matches(p) {
					l.answers = append(l.answers, answer{m: m, kind: ansHopLimit})
				}
			}
		}
	}
	for _, m := range s.members {
		if name := m.childOf(p); name != "" {
			listed = true
			if _, ok := byName[name]; !ok {
				byName[name] = endpoint.Info{Name: name, IsDir: true}
			}
		}
	}
	for _, it := range byName {
		l.items = append(l.items, it)
	}
	slices.SortFunc(l.items, func(a, b endpoint.Info) int { return strings.Compare(a.Name, b.Name) })
	switch {
	case listed:
		l.status = http.StatusOK
	default:
		l.status = http.StatusNotFound
		for _, a := range l.answers {
			if a.kind == ansUnavailable || a.kind == ansDown {
				l.status = http.StatusServiceUnavailable
			} else if a.kind == ansRefused && l.status == http.StatusNotFound {
				l.status = http.StatusForbidden
			}
		}
	}
	return l
}

// listOn lists p on the members that match it and merges into byName. It
// reports whether any member listed the directory.
func (f *Federator) listOn(ctx context.Context, s *snapshot, members []*member, p string, byName map[string]endpoint.Info, l *listing) bool {
	var asked []*member
	for _, m := range members {
		if m.matches(p) {
			asked = append(asked, m)
		}
	}
	type result struct {
		items []endpoint.Info
		err   error
		dur   time.Duration
		down  bool
	}
	res := make([]result, len(asked))
	var wg sync.WaitGroup
	for i, m := range asked {
		if !m.h.Up() {
			res[i].down = true
			continue
		}
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
			defer cancel()
			start := time.Now()
			items, err := m.ep.List(lctx, m.endpointPath(p))
			res[i] = result{items: items, err: err, dur: time.Since(start)}
			f.requestResult(s, m, err, res[i].dur)
		})
	}
	wg.Wait()
	listed := false
	for i, m := range asked {
		r := res[i]
		a := newAnswer(m, r.dur)
		switch {
		case r.down:
			a.kind = ansDown
		case r.err == nil:
			a.kind = ansFound
			listed = true
			for _, it := range r.items {
				if it.Name == "" || strings.HasPrefix(it.Name, ".lakefed-") {
					continue
				}
				if old, ok := byName[it.Name]; !ok || (it.IsDir && !old.IsDir) {
					byName[it.Name] = it
				}
			}
		default:
			a.err = r.err.Error()
			switch endpoint.Class(r.err) {
			case endpoint.ErrNotFound:
				a.kind = ansNotFound
			case endpoint.ErrRefused:
				a.kind = ansRefused
			default:
				a.kind = ansUnavailable
			}
		}
		l.answers = append(l.answers, a)
	}
	return listed
}

// servePropfind answers PROPFIND Depth 0 and 1 (RFC 4918 §9.1) with a
// listing merged across endpoints. Depth infinity is refused with 403 and
// propfind-finite-depth, as the RFC allows. The request body is not read:
// every answer carries the live properties clients use.
func (f *Federator) servePropfind(rq *request) {
	w, r, s, p, hops := rq.w, rq.r, rq.s, rq.p, rq.hops
	depth := r.Header.Get("Depth")
	if depth != "0" && depth != "1" {
		davxml.WriteFiniteDepth(w)
		return
	}
	e := f.lookup(r.Context(), s, p, hops)
	if e.status != http.StatusOK {
		f.writeMissing(rq, e)
		return
	}
	self := endpoint.Info{Name: path.Base(p), Size: e.size, ModTime: e.modTime(), IsDir: e.isDir}
	if len(e.replicas) > 0 {
		self.ETag = e.replicas[0].info().ETag
	}
	var b strings.Builder
	b.WriteString(davxml.MultistatusOpen)
	davxml.AppendResponse(&b, p, self)
	if depth == "1" && e.isDir {
		l := f.list(r.Context(), s, p, hops)
		if l.status != http.StatusOK {
			f.writeMissing(rq, &entry{status: l.status, answers: l.answers})
			return
		}
		for _, it := range l.items {
			davxml.AppendResponse(&b, davxml.JoinName(p, it.Name), it)
		}
	}
	davxml.WriteMultistatus(w, &b)
}
