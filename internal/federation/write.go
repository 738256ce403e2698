package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/shared"
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

// WriteOptions are what a write through the federator carries besides
// its path and body.
type WriteOptions struct {
	// Hops counts the federators the write has passed (HopsHeader); an
	// upstream is not written to at max_hops.
	Hops int
	// Cond holds the write's conditional headers (If-Match, If-None-Match,
	// If-Unmodified-Since; RFC 9110 §13.1); nil: unconditional.
	Cond http.Header
	// Want holds the digests the body must have, as httpx.WantedDigests
	// returns them; a body without them is not stored.
	Want map[string]string
}

// The rules of a write through the federator (docs/guarantees.md),
// whichever door it came through (an HTTP PUT, the root:// door, a role
// of the process):
//
//   - The conditionals (If-Match, If-None-Match, If-Unmodified-Since)
//     are evaluated against a fresh look-up of every replica:
//     If-None-Match fails when any replica exists, If-Match passes when
//     it names the ETag of a replica.
//   - An acknowledged write is never undone. When an endpoint that could
//     hold the path does not answer (down, stopped, timing out), the
//     write is refused with 503 and Retry-After, conditional or not: the
//     endpoint may hold the old version, and it would serve it again
//     when it returns, in every federator, long after any mark this one
//     could keep in memory. (A durable stale mark was the other design;
//     it needs a store every federator shares and a repair loop before a
//     write may be acknowledged, and a refusal is what every client of
//     the field already retries.) For the same reason a write is refused
//     with 409 when a read-only endpoint of the federation holds the
//     path: nothing could ever retire that copy.
//   - A file that exists is written where it lives (the first writable
//     endpoint holding it, by placement order), by the federator itself
//     (putPlan.redirect says why); a new one by the placement rule: 307
//     to that endpoint when it can be sent to, else the federator writes
//     it itself.
//   - A write the federator carries checks the client's digests while it
//     streams: a mismatch aborts the write before the endpoint commits it
//     (400, nothing stored).
//   - Read your writes: once the write succeeded, the other replicas (the
//     old version) are deleted before the answer. One that cannot be
//     (its endpoint failed in between) is marked stale in memory, and the
//     write answers 503: the client retries, and is told no success
//     that a restart could take back.
//   - Every write, whatever its outcome, drops the path from the
//     metadata cache and calls Options.OnWrite before the answer, so the
//     other roles of the process (the cache) never serve the old version
//     after it.

// putPlan is a PUT worked out before its body is read: where it goes and
// which replicas it retires.
type putPlan struct {
	s       *snapshot
	p       string
	m       *member    // the endpoint that takes the write
	old     []*replica // replicas to retire once the write is done
	mine    *replica   // the replica on m the look-up found, if any
	existed bool
	// shared: the federators share state, and a write must be seen by
	// all of them before its answer, which a redirected client's write
	// (after the answer) cannot be: the federator carries it.
	shared bool
}

// seen is the condition for committing on m what the look-up saw there:
// the replica's ETag, or nothing at the path. A replica without an ETag
// gives no condition.
func (pl *putPlan) seen() endpoint.Cond {
	if pl.mine == nil {
		return endpoint.Cond{IfNoneMatch: true}
	}
	return endpoint.Cond{IfMatch: pl.mine.info().ETag}
}

// writeErr is the error of a write: the status an HTTP client gets, the
// reason, and the class callers in the process test with errors.Is.
func writeErr(code int, class error, format string, args ...any) error {
	return httpx.NewError(code, fmt.Sprintf(format, args...), class)
}

// planPut checks a PUT of p and places it (the rules above): on the
// process that holds p when another does (held.go).
func (f *Federator) planPut(ctx context.Context, s *snapshot, p string, o WriteOptions) (*putPlan, error) {
	if h := f.holder(ctx, s, p); h != nil {
		return f.planHeldPut(s, p, o, h)
	}
	cands, down := writable(s, p, o.Hops)
	if len(cands) == 0 {
		if down > 0 {
			return nil, writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: %s: every writable endpoint for this path is down", p)
		}
		return nil, writeErr(http.StatusForbidden, endpoint.ErrRefused, "lakefed: %s: no writable endpoint holds this path", p)
	}
	e := f.locateEndpoints(ctx, s, p, o.Hops, false)
	// Upstream federators are asked only when no local endpoint has the
	// file, so once this write lands theirs is never read again: one
	// that does not answer cannot undo it.
	if silent := unanswered(e, false); len(silent) > 0 {
		return nil, writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"lakefed: %s: not written: %s could not be asked, and may hold a version that would undo this write when it returns", p, strings.Join(silent, ", "))
	}
	if code, msg := putPreconditions(o.Cond, e); code != 0 {
		class := endpoint.ErrRefused
		if code == http.StatusServiceUnavailable {
			class = endpoint.ErrUnavailable
		}
		return nil, writeErr(code, class, "lakefed: %s: %s", p, msg)
	}
	if e.status == http.StatusOK && e.isDir && len(e.replicas) > 0 {
		return nil, writeErr(http.StatusConflict, endpoint.ErrExist, "lakefed: %s: is a directory", p)
	}
	pl := &putPlan{s: s, p: p, existed: e.status == http.StatusOK && len(e.replicas) > 0, shared: f.opts.Shared != nil}
	pl.m = f.placeWrite(s, p, cands, e)
	for _, rep := range e.replicas {
		if rep.m == pl.m {
			pl.mine = rep
			continue
		}
		if !rep.m.writable && !rep.m.upstream {
			return nil, writeErr(http.StatusConflict, endpoint.ErrExist,
				"lakefed: %s: not written: a replica on %s, read-only in this federation, holds this path and could never be replaced", p, rep.m.name)
		}
		pl.old = append(pl.old, rep)
	}
	return pl, nil
}

// planHeldPut places a PUT of p, which the process of h holds, there:
// its buffer takes it over the version it holds. The conditionals are
// evaluated against that version (a claim has none yet: 503, ask
// again), and the write commits only on top of it.
func (f *Federator) planHeldPut(s *snapshot, p string, o WriteOptions, h *shared.Hold) (*putPlan, error) {
	if err := heldWrite(h, "put", p); err != nil {
		return nil, err
	}
	if h.Seq == 0 && hasConditional(o.Cond) {
		return nil, writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"lakefed: %s: the write buffer of %s is taking a write of this path: the conditional headers cannot be evaluated now", p, h.Node)
	}
	m := f.peer(s, h.Owner)
	if m == nil {
		return nil, writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: %s: held at %s, which cannot be reached from here", p, h.Owner)
	}
	pl := &putPlan{s: s, p: p, m: m, shared: true}
	if h.Seq > 0 {
		e := f.heldEntry(s, p, h)
		if code, msg := putPreconditions(o.Cond, e); code != 0 {
			return nil, writeErr(code, endpoint.ErrRefused, "lakefed: %s: %s", p, msg)
		}
		if !h.Deleted {
			pl.mine, pl.existed = e.replicas[0], true
		}
	}
	return pl, nil
}

// unanswered names the endpoints of a look-up that did not answer,
// upstream federators only withUpstreams.
func unanswered(e *entry, withUpstreams bool) []string {
	var names []string
	for _, a := range e.answers {
		if a.m.upstream && !withUpstreams {
			continue
		}
		switch a.kind {
		case ansDown, ansUnavailable, ansSlow:
			names = append(names, a.m.name+" ("+a.kind.String()+")")
		}
	}
	return names
}

// redirect returns where the client may send the PUT itself: the
// endpoint's URL when clients can reach it and the file is new; ok false
// when the federator must carry the write. A file that exists is never
// redirected: the client's write lands after the answer, and a read in
// between would put the old version back in the metadata cache and in
// the cache of the process, to be served after the write; other
// replicas must be retired after the write, too.
func (pl *putPlan) redirect(ctx context.Context) (*url.URL, bool) {
	m := pl.m
	if m.proxy || m.putProxy || pl.existed || pl.shared {
		return nil, false
	}
	u, err := endpoint.RedirectURL(ctx, m.ep, m.endpointPath(pl.p), endpoint.OpWrite)
	return u, err == nil
}

// Put writes p through the federator, carrying the bytes (a caller in
// the process cannot follow a redirect): placement, the digests checked,
// the other replicas retired, and every cache of the process told. size
// is the exact length of body, or -1. created says the file is new.
func (f *Federator) Put(ctx context.Context, p string, body io.Reader, size int64, o WriteOptions) (created bool, err error) {
	s := f.snap.Load()
	if err := f.sharedWritable(p); err != nil {
		return false, err
	}
	pl, err := f.planPut(ctx, s, p, o)
	if err != nil {
		f.wrote(ctx, s, p, 0, false)
		return false, err
	}
	created, err = f.commitPut(ctx, pl, body, size, o)
	if werr := f.wrote(ctx, s, p, 0, true); err == nil && werr != nil {
		return false, werr
	}
	return created, err
}

// commitPut writes the body of a planned PUT on its endpoint and retires
// the old replicas.
func (f *Federator) commitPut(ctx context.Context, pl *putPlan, body io.Reader, size int64, o WriteOptions) (created bool, err error) {
	s, p, m := pl.s, pl.p, pl.m
	if o.Hops > 0 {
		ctx = httpx.WithHops(ctx, o.Hops)
	}
	start := time.Now()
	cb := &checkedBody{r: body, d: httpx.NewBodyDigests(o.Want)}
	m.streams.begin()
	if hasConditional(o.Cond) {
		// The client's conditions were met by what the look-up saw:
		// the write commits only on top of that, else two writers
		// that saw one version could both win (endpoint.PutIf: atomic
		// where the kind can, RFC 9110 §13.1).
		err = endpoint.PutIf(ctx, m.ep, m.endpointPath(p), cb, size, pl.seen())
	} else {
		err = m.ep.Put(ctx, m.endpointPath(p), cb, size)
	}
	m.streams.end()
	s.invalidate(p, 0)
	if err != nil {
		if cb.mismatch != nil {
			return false, writeErr(http.StatusBadRequest, endpoint.ErrRefused, "lakefed: put %s: %v; nothing was stored", p, cb.mismatch)
		}
		if ctx.Err() == nil {
			f.requestResult(s, m, err, 0)
		}
		return false, writeErr(endpoint.HTTPStatus(err), endpoint.Class(err), "lakefed: put %s on %s: %v", p, m.name, err)
	}
	f.requestResult(s, m, nil, time.Since(start))
	if kept := f.retire(ctx, s, p, pl.old); len(kept) > 0 {
		return false, writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"lakefed: put %s: written on %s, but the old version on %s could not be removed; write again", p, m.name, strings.Join(kept, ", "))
	}
	return !pl.existed, nil
}

// wrote ends every write through the federator, whatever its outcome:
// the path leaves the metadata cache (with hold, a "not found" is not
// cached for that long: the write goes on at an endpoint after the
// answer), and Options.OnWrite tells the other roles of the process.
// When the write may have changed something (changed), the federators
// sharing state are told too, and wrote returns only once every one of
// them has dropped the path (sharedWrote); its error, when they could
// not be told, must become the write's answer: 503, write again.
func (f *Federator) wrote(ctx context.Context, s *snapshot, p string, hold time.Duration, changed bool) error {
	s.invalidate(p, hold)
	if f.opts.OnWrite != nil {
		f.opts.OnWrite(p)
	}
	if !changed {
		return nil
	}
	return f.sharedWrote(ctx, p)
}

// writing starts a write of p that changes something: refused while the
// shared state cannot be reached (sharedWritable). The caller defers
// finish(&err), which ends the write (wrote) and, when the write itself
// succeeded, makes the other federators' not hearing of it the error.
func (f *Federator) writing(ctx context.Context, s *snapshot, p string) (finish func(*error), err error) {
	if err := f.sharedWritable(p); err != nil {
		return nil, err
	}
	return func(errp *error) {
		if werr := f.wrote(ctx, s, p, 0, true); *errp == nil {
			*errp = werr
		}
	}, nil
}

// servePut is the HTTP adapter of a PUT: a Content-Range is refused with
// 400 (a PUT stores a whole file, RFC 9110 §14.5, and a partial one
// would replace it by a fragment); 201 when the file is new, 204 when it
// replaced one (RFC 9110 §9.3.4).
func (f *Federator) servePut(rq *request) {
	w, r, s, p := rq.w, rq.r, rq.s, rq.p
	if _, ok := r.Header["Content-Range"]; ok {
		httpError(w, http.StatusBadRequest, "lakefed: PUT with Content-Range: partial writes are not supported (RFC 9110 §14.5)")
		return
	}
	want, err := httpx.WantedDigests(r.Header)
	if err != nil {
		f.writeFailed(rq, err)
		return
	}
	o := WriteOptions{Hops: rq.hops, Cond: r.Header, Want: want}
	if err := f.sharedWritable(p); err != nil {
		f.writeFailed(rq, err)
		return
	}
	ctx := r.Context()
	pl, err := f.planPut(ctx, s, p, o)
	if err != nil {
		f.wrote(ctx, s, p, 0, false)
		f.writeFailed(rq, err)
		return
	}
	if u, ok := pl.redirect(ctx); ok {
		// The write happens after we answer: hold off caching "not
		// found" for this path for a while.
		f.wrote(ctx, s, p, s.cfg.MetadataCache.NegativeTTL.D(), false)
		pl.m.mm.redirects.Inc()
		w.Header().Set("Location", u.String())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	created, err := f.commitPut(ctx, pl, r.Body, r.ContentLength, o)
	if werr := f.wrote(ctx, s, p, 0, true); err == nil {
		err = werr
	}
	if err != nil {
		f.writeFailed(rq, err)
		return
	}
	w.Header().Set("X-Lakefed-Endpoint", pl.m.name)
	if created {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeFailed answers a failed write: its status and reason, with
// Retry-After on a 503.
func (f *Federator) writeFailed(rq *request, err error) {
	code, msg, ok := httpx.StatusOf(err)
	if !ok {
		code, msg = endpoint.HTTPStatus(err), "lakefed: "+rq.p+": "+err.Error()
	}
	if code == http.StatusServiceUnavailable {
		pathUnavailable(rq, nil)
	}
	httpError(rq.w, code, msg)
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
	// If-Match passes when it names some replica's ETag; If-None-Match
	// fails when it names any (or is "*").
	if im := h["If-Match"]; len(im) > 0 {
		list, ok := strings.Join(im, ","), false
		for _, rep := range e.replicas {
			ok = ok || httpx.ETagMatch(list, rep.ver.etag, false)
		}
		if !ok {
			return http.StatusPreconditionFailed, "If-Match names no replica's ETag"
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" {
		only := http.Header{"If-Unmodified-Since": {ius}}
		for _, rep := range e.replicas {
			if httpx.CheckPreconditions(only, http.MethodPut, "", rep.ver.modTime(), true) != 0 {
				return http.StatusPreconditionFailed, "modified since If-Unmodified-Since on " + rep.m.name
			}
		}
	}
	if inm := h["If-None-Match"]; len(inm) > 0 {
		list := strings.Join(inm, ",")
		for _, rep := range e.replicas {
			if httpx.ETagMatch(list, rep.ver.etag, true) {
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

// retire removes the replicas of p that a write made stale, and returns
// the endpoints of those it could not remove, which it marks stale so
// that they are not ranked while this process lives.
func (f *Federator) retire(ctx context.Context, s *snapshot, p string, old []*replica) (kept []string) {
	if len(old) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx) // the write is done: finish the cleanup
	var mu sync.Mutex
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
				f.log.WarnContext(ctx, "could not delete a replica a write made stale", "endpoint", rep.m.name, "path", p, "err", err)
			}
			f.stale.mark(rep.m.name, rep.path, rep.info())
			mu.Lock()
			kept = append(kept, rep.m.name)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(kept)
	return kept
}

// checkedBody is a PUT body that checks the client's digests as it is
// read: at the end of the body, a mismatch is returned in place of EOF,
// so that the endpoint's Put fails and stores nothing (Endpoint.Put: a
// failed Put leaves the old content).
type checkedBody struct {
	r        io.Reader
	d        *httpx.BodyDigests
	mismatch error // set when the end was reached with a wrong digest
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.d.Write(p[:n])
	if err == io.EOF {
		if b.mismatch = b.d.Check(); b.mismatch != nil {
			return n, fmt.Errorf("%w: %w", b.mismatch, endpoint.ErrRefused)
		}
	}
	return n, err
}

// Delete removes every replica of p. It looks afresh (not from the
// cache) so that no replica is missed. When an endpoint that could hold
// p does not answer, nothing is deleted and the answer is 503: the
// client's retry deletes the file whole once it answers, where deleting
// the others now would only thin out a file that stays. A replica on an
// endpoint read-only in the federation is a refusal no retry changes:
// the others are deleted, and the 403 says which went and which stay.
// nil when every replica went; an ErrNotFound when there was none; else
// the worst failure, with a report of which replicas went, which did not
// and why (deleteReport).
func (f *Federator) Delete(ctx context.Context, p string, o WriteOptions) error {
	return f.delete(ctx, f.snap.Load(), p, o)
}

func (f *Federator) delete(ctx context.Context, s *snapshot, p string, o WriteOptions) (err error) {
	if err := f.sharedWritable(p); err != nil {
		return err
	}
	changed := false
	defer func() {
		if werr := f.wrote(ctx, s, p, 0, changed); err == nil {
			err = werr
		}
	}()
	if h := f.holder(ctx, s, p); h != nil {
		changed = true
		return f.deleteHeld(ctx, s, p, h)
	}
	e := f.locateEndpoints(ctx, s, p, o.Hops, false)
	if e.status != http.StatusOK {
		code, msg := missingReport(p, e)
		return writeErr(code, endpoint.ClassOfStatus(code), "%s", msg)
	}
	if len(e.replicas) == 0 {
		return writeErr(http.StatusForbidden, endpoint.ErrRefused, "lakefed: %s: a directory of the federation itself cannot be deleted", p)
	}
	// An upstream counts here: once the local replicas are gone, the
	// upstream's copy is what readers are sent to.
	if silent := unanswered(e, true); len(silent) > 0 {
		return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"lakefed: delete %s: nothing deleted: %s could not be asked, and may hold a replica that would bring the file back", p, strings.Join(silent, ", "))
	}
	if o.Hops > 0 {
		ctx = httpx.WithHops(ctx, o.Hops)
	}
	changed = true
	errs := f.deleteReplicas(ctx, s, e.replicas, true)
	status, report := deleteReport(e, errs)
	if status == http.StatusNoContent {
		return nil
	}
	return writeErr(status, endpoint.ClassOfStatus(status), "lakefed: delete %s: %s", p, report)
}

// deleteHeld sends a DELETE of p, which the process of h holds, there:
// its buffer deletes the file on its targets, or journals the delete
// and carries it there later. A delete it took already is a 404.
func (f *Federator) deleteHeld(ctx context.Context, s *snapshot, p string, h *shared.Hold) error {
	if h.Deleted {
		return writeErr(http.StatusNotFound, endpoint.ErrNotFound, "lakefed: %s: not found: deleted through %s", p, h.Node)
	}
	if err := heldWrite(h, "delete", p); err != nil {
		return err
	}
	m := f.peer(s, h.Owner)
	if m == nil {
		return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: %s: held at %s, which cannot be reached from here", p, h.Owner)
	}
	if err := m.ep.Delete(ctx, p); err != nil {
		return writeErr(endpoint.HTTPStatus(err), endpoint.Class(err), "lakefed: delete %s through %s: %v", p, m.name, err)
	}
	return nil
}

// serveDelete is the HTTP adapter of Delete: 204, or the error.
func (f *Federator) serveDelete(rq *request) {
	if err := f.delete(rq.r.Context(), rq.s, rq.p, WriteOptions{Hops: rq.hops}); err != nil {
		f.writeFailed(rq, err)
		return
	}
	rq.w.WriteHeader(http.StatusNoContent)
}

// deleteReplicas deletes reps in parallel, each under its endpoint's
// timeout, and returns each one's error (a replica already gone is no
// error). With skipReadOnly, a replica on an endpoint the federation
// does not write to is not asked and gets errReadOnly.
func (f *Federator) deleteReplicas(ctx context.Context, s *snapshot, reps []*replica, skipReadOnly bool) []error {
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for i, rep := range reps {
		if skipReadOnly && !rep.m.writable {
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
	return errs
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

// Mkdir creates the directory p on every healthy writable endpoint that
// could hold it: nil when at least one did (or had it already), else the
// worst failure (ErrExist, 409, when a file is in the way).
func (f *Federator) Mkdir(ctx context.Context, p string) error {
	return f.mkdir(ctx, f.snap.Load(), p)
}

func (f *Federator) mkdir(ctx context.Context, s *snapshot, p string) (err error) {
	if err := f.sharedWritable(p); err != nil {
		return err
	}
	cands, down := writable(s, p, s.cfg.MaxHops) // never upstreams: they have their own
	defer func() {
		if werr := f.wrote(ctx, s, p, 0, len(cands) > 0); err == nil {
			err = werr
		}
	}()
	if len(cands) == 0 {
		if down > 0 {
			return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: %s: every writable endpoint for this path is down", p)
		}
		return writeErr(http.StatusForbidden, endpoint.ErrRefused, "lakefed: %s: no writable endpoint holds this path", p)
	}
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, m := range cands {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
			defer cancel()
			start := time.Now()
			errs[i] = m.ep.Mkdir(mctx, m.endpointPath(p))
			f.requestResult(s, m, errs[i], time.Since(start))
		})
	}
	wg.Wait()
	var b strings.Builder
	status, class := 0, error(nil)
	for i, m := range cands {
		if errs[i] == nil {
			return nil
		}
		fmt.Fprintf(&b, "%s: %v\n", m.name, errs[i])
		if st := endpoint.HTTPStatus(errs[i]); status == 0 || st == http.StatusServiceUnavailable {
			status, class = st, errs[i]
		}
	}
	return writeErr(status, class, "lakefed: mkcol %s failed everywhere\n%s", p, b.String())
}

// serveMkcol is the HTTP adapter of Mkdir: 201, or the error.
func (f *Federator) serveMkcol(rq *request) {
	if err := f.mkdir(rq.r.Context(), rq.s, rq.p); err != nil {
		f.writeFailed(rq, err)
		return
	}
	rq.w.WriteHeader(http.StatusCreated)
}
