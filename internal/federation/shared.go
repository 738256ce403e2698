package federation

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/shared"
)

// Several federators behind one name share their state through Redis
// (Options.Shared, package shared):
//
//   - a write through any of them is seen by all before it is
//     acknowledged: the writer invalidates the path in every federator
//     (shared.Client.Invalidate) before it answers, and refuses writes
//     (503) while Redis cannot be reached, unless Options.SharedWritesLocal;
//   - a federator trusts its metadata cache only while it holds its
//     membership lease (shared.Client.Trusted): one that stalled or was
//     cut off flushes before it serves from it again;
//   - Redis is a second level under each metadata cache: a miss asks it
//     before the endpoints, and concurrent cold look-ups of one path on
//     several federators reach the endpoints about once (a short lease
//     per path, the others wait for its answer); an answer from a
//     directory listing is stored only while no path of the directory
//     was written since the listing (dirlist.go).

// sharedLookupWait bounds how long a look-up waits for another
// federator's answer to the same path before asking the endpoints
// itself.
const sharedLookupWait = 2 * time.Second

// SharedHeader is the header of /api/endpoints that says whether the
// shared state is reachable (SharedState).
const SharedHeader = "X-Lakefed-Shared"

// SharedState is "ok" or "degraded" (Redis unreachable: this federator
// serves from its own state and refuses writes), or "" when it shares
// nothing.
func (f *Federator) SharedState() string {
	switch {
	case f.opts.Shared == nil:
		return ""
	case f.opts.Shared.Degraded():
		return "degraded"
	}
	return "ok"
}

// sharedWritable refuses a write while the shared state cannot be
// reached: the other federators could not be told of it.
func (f *Federator) sharedWritable(p string) error {
	sh := f.opts.Shared
	if sh == nil || f.opts.SharedWritesLocal || !sh.Degraded() {
		return nil
	}
	return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
		"lakefed: %s: not written: the shared state (redis) cannot be reached, so the other federators could not see this write", p)
}

// sharedWrote tells every federator sharing state that p changed, and
// returns once each has dropped it. The bound covers a member's lease:
// a member that does not answer is waited out (shared.Client.Invalidate).
func (f *Federator) sharedWrote(ctx context.Context, paths ...string) error {
	sh := f.opts.Shared
	if sh == nil || len(paths) == 0 {
		return nil
	}
	p := paths[0]
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := sh.Invalidate(ctx, paths...)
	if err == nil || (errors.Is(err, shared.ErrDegraded) && f.opts.SharedWritesLocal) {
		return nil
	}
	f.log.WarnContext(ctx, "a write could not be shown to the other federators", "path", p, "err", err)
	return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
		"lakefed: %s: written, but the other federators could not be told (%v); write again", p, err)
}

// Wrote is the write hook of the other roles of the process that write
// behind the federator's back (the buffer taking, deleting or retiring a
// file): p leaves the metadata cache, Options.OnWrite is called, and the
// federators sharing state drop it too before Wrote returns. Its error
// says they could not be told.
func (f *Federator) Wrote(ctx context.Context, p string) error {
	return f.wrote(ctx, f.snap.Load(), p, 0, true)
}

// ForgetShared drops paths another federator wrote: from the metadata
// cache and, through Options.OnWrite, from the other roles of the
// process. It is what shared.Options.OnInvalidate calls.
func (f *Federator) ForgetShared(paths []string) {
	s := f.snap.Load()
	for _, p := range paths {
		s.invalidate(p, 0)
		if f.opts.OnWrite != nil {
			f.opts.OnWrite(p)
		}
	}
}

// ForgetAll drops the whole metadata cache: this federator may have
// missed writes (it was cut off from the shared state, or stalled). It
// is what shared.Options.OnFlush calls.
func (f *Federator) ForgetAll() {
	s := f.snap.Load()
	s.cache.clear()
	for _, v := range s.pins {
		v.cache.clear()
	}
}

// trusted reports whether the metadata cache may answer.
func (f *Federator) trusted() bool {
	return f.opts.Shared == nil || f.opts.Shared.Trusted()
}

// sharedLocate is locate for a request from a client (no hops) when
// state is shared: a hold of another process first (held.go), then the
// second level, then one federator asks the endpoints while the others
// wait for its answer.
func (f *Federator) sharedLocate(ctx context.Context, s *snapshot, p string) *entry {
	sh := f.opts.Shared
	meta, err := sh.LoadMeta(ctx, p)
	if err != nil {
		return f.locateEndpoints(ctx, s, p, 0, true)
	}
	if e := f.heldRead(s, p, meta.Hold); e != nil {
		return e // a hold replaces what the second level says
	}
	if e := f.decodeEntry(s, p, meta.Value); e != nil {
		f.m.sharedHits.Inc()
		return e
	}
	if got, err := sh.TryLease(ctx, "lookup:"+p, sharedLookupWait); err == nil && !got {
		// Another federator is asking the endpoints for p: its answer
		// will be in Redis.
		deadline := time.Now().Add(sharedLookupWait)
		for time.Now().Before(deadline) {
			t := time.NewTimer(5 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return f.locateEndpoints(ctx, s, p, 0, true)
			case <-t.C:
			}
			m, err := sh.LoadMeta(ctx, p)
			if err != nil {
				break
			}
			if e := f.heldRead(s, p, m.Hold); e != nil {
				return e
			}
			if e := f.decodeEntry(s, p, m.Value); e != nil {
				f.m.sharedHits.Inc()
				return e
			}
		}
	}
	e, lf := f.locateListed(ctx, s, p, 0, true)
	if e.expires > 0 {
		if b, err := encodeEntry(e); err == nil {
			ttl := time.Until(time.Unix(0, e.expires))
			if lf.at == 0 {
				_, _ = sh.StoreMeta(ctx, p, meta.Version, b, ttl)
			} else {
				// Answered from a listing taken before p's version was
				// read: a write in between shows only in the
				// directory's version (dirlist.go).
				_, _ = sh.StoreMetaListed(ctx, p, meta.Version, lf.dver, b, ttl)
			}
		}
	}
	return e
}

// wireEntry is an entry as the second level keeps it: what each
// endpoint answered, which decodeEntry turns back into an entry as
// locate would have made it. Endpoints are named; a federator whose
// configuration lacks one of them does not use the entry.
type wireEntry struct {
	Expires int64        `json:"x"`
	Answers []wireAnswer `json:"a"`
}

type wireAnswer struct {
	Endpoint string     `json:"e"`
	Kind     answerKind `json:"k"`
	Err      string     `json:"r,omitempty"`
	Info     *wireInfo  `json:"i,omitempty"`
	URL      string     `json:"u,omitempty"`
	Born     int64      `json:"b,omitempty"`
}

// wireInfo is endpoint.Info as the second level keeps it: the same
// fields and names, those at their zero value left out (most kinds
// know a few: a Redis of a million entries kept a third less), so that
// federators writing every field and those leaving zeros out read each
// other's entries alike.
type wireInfo struct {
	Name      string
	Size      int64
	ModTime   time.Time         `json:",omitzero"`
	IsDir     bool              `json:",omitzero"`
	ETag      string            `json:",omitzero"`
	Strong    bool              `json:",omitzero"`
	Checksums map[string]string `json:",omitzero"`
	Mode      fs.FileMode       `json:",omitzero"`
	Owner     string            `json:",omitzero"`
	Group     string            `json:",omitzero"`
	CTime     time.Time         `json:",omitzero"`
	ATime     time.Time         `json:",omitzero"`
}

func encodeEntry(e *entry) ([]byte, error) {
	w := wireEntry{Expires: e.expires}
	byName := map[*member]*replica{}
	for _, r := range e.replicas {
		byName[r.m] = r
	}
	for _, a := range e.answers {
		wa := wireAnswer{Endpoint: a.m.name, Kind: a.kind, Err: a.err}
		if r := byName[a.m]; r != nil && a.kind == ansFound {
			info := wireInfo(r.info())
			wa.Info, wa.URL, wa.Born = &info, r.url(), r.born
		}
		w.Answers = append(w.Answers, wa)
	}
	return json.Marshal(w)
}

// decodeEntry rebuilds an entry from the second level, or returns nil
// when b is none, is not one, or names an endpoint this federator does
// not have.
func (f *Federator) decodeEntry(s *snapshot, p string, b []byte) *entry {
	if b == nil {
		return nil
	}
	var w wireEntry
	if json.Unmarshal(b, &w) != nil || w.Expires <= time.Now().UnixNano() {
		return nil
	}
	byName := make(map[string]*member, len(s.members))
	for _, m := range s.members {
		byName[m.name] = m
	}
	e := &entry{epoch: f.epoch.Load(), shared: true}
	for _, a := range w.Answers {
		m := byName[a.Endpoint]
		if m == nil {
			return nil
		}
		e.answers = append(e.answers, answer{m: m, kind: a.Kind, err: a.Err})
		switch a.Kind {
		case ansFound:
			if a.Info == nil {
				return nil
			}
			e.replicas = append(e.replicas, newReplica(m, p, endpoint.Info(*a.Info), a.URL, a.Born))
		case ansDown, ansUnavailable, ansSlow:
			e.incomplete = true
		}
	}
	virtual := false
	for _, m := range s.members {
		if m.childOf(p) != "" {
			virtual = true
			break
		}
	}
	f.finish(s, e, p, virtual)
	e.expires = w.Expires // the first look-up's, not renewed by each reader
	return e
}
