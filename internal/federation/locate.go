package federation

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// answerKind is what one endpoint said about a path.
type answerKind uint8

const (
	// ansFound: the endpoint has the path.
	ansFound answerKind = iota
	// ansNotFound: the endpoint answered that the path is not there.
	ansNotFound
	// ansUnavailable: the endpoint could not answer (error, timeout).
	ansUnavailable
	// ansRefused: the endpoint answered and refused (permission, ...).
	ansRefused
	// ansDown: the endpoint is marked down and was not asked.
	ansDown
	// ansHopLimit: an upstream not asked because the hop limit was reached.
	ansHopLimit
	// ansSlow: still asking when another endpoint had answered "found";
	// the answer was not waited for.
	ansSlow
)

func (k answerKind) String() string {
	return [...]string{"found", "not found", "unavailable", "refused", "down, not asked", "not asked: hop limit reached", "slow: not waited for"}[k]
}

// answer records one endpoint's answer, for 404/503 bodies and debugging.
type answer struct {
	m    *member
	kind answerKind
	us   uint32 // how long it took, in µs (at most about 71 minutes): see took
	err  string
}

// newAnswer is m's answer that took d (its kind for the caller to set).
func newAnswer(m *member, d time.Duration) answer {
	return answer{m: m, us: uint32(min(max(d.Microseconds(), 0), math.MaxUint32))}
}

// took is how long the answer took (4 bytes rather than 8: the entries
// the metadata cache keeps whole, not packed, are mostly 404s, made of
// answers).
func (a answer) took() time.Duration { return time.Duration(a.us) * time.Microsecond }

// replica is one copy of a path on one endpoint.
//
// What it keeps is what the federator needs and no more (version rather
// than endpoint.Info; the redirect URL held once, as its header value,
// or not at all when it is the member's urlBase followed by the path):
// the metadata cache keeps the entries it serves often whole, and
// packs the others from these fields (packed.go).
type replica struct {
	m    *member
	path string // on the endpoint
	ver  version
	// loc holds the URL readers are redirected to, as a header value
	// (location), unless derived; "" when the bytes must be proxied.
	loc [1]string
	// derived: the URL is m.urlBase followed by path (url makes it),
	// as it is for every file of most endpoints, and loc is empty.
	derived bool
	idx     uint8 // position in entry.replicas
	born    int64 // unix ns when the URL was made (it may expire: member.presign)
	// learned holds checksums asked of this replica after its look-up
	// (a proxied read proving a failover safe). Shared by the copies
	// refreshURLs makes; nil in replicas not made by a look-up.
	learned *learnedSums
}

// newReplica is the replica of p that m's endpoint described as in, to
// be redirected to at url ("": proxied), made at born.
func newReplica(m *member, p string, in endpoint.Info, url string, born int64) *replica {
	ep := m.endpointPath(p)
	r := &replica{m: m, path: ep, ver: newVersion(in, ep), born: born, learned: &learnedSums{}}
	if m.derives(url, ep) {
		r.derived = true
	} else {
		// A copy of exactly its length: spare capacity of the string's
		// builder would stay in the cache with the entry.
		r.loc[0] = strings.Clone(url)
	}
	return r
}

// redirectable reports whether readers can be sent to the replica.
func (r *replica) redirectable() bool { return r.derived || r.loc[0] != "" }

// url is where readers are redirected to, or "" when the bytes must be
// proxied. A derived URL is made on each call: the answers that send
// clients there take it from the entry's linkCache instead.
func (r *replica) url() string {
	if r.derived {
		return *r.m.urlBase.Load() + r.path
	}
	return r.loc[0]
}

// urlLen is len(r.url()), without making it.
func (r *replica) urlLen() int {
	if r.derived {
		return len(*r.m.urlBase.Load()) + len(r.path)
	}
	return len(r.loc[0])
}

// writeURL writes r.url() to b, without making it.
func (r *replica) writeURL(b *strings.Builder) {
	if r.derived {
		b.WriteString(*r.m.urlBase.Load())
		b.WriteString(r.path)
		return
	}
	b.WriteString(r.loc[0])
}

// info is what the endpoint said of the replica.
func (r *replica) info() endpoint.Info { return r.ver.info(r.path) }

// version is endpoint.Info as a replica keeps it: the fields every
// answer needs inline, the modification time in nanoseconds, the entity
// tag already quoted (the ETag header value, shared with the entry), and
// the fields only some kinds know (mode, owner, group, change and access
// times) behind a pointer that is nil for the others. info gives back
// the Info it was made from, times in UTC.
type version struct {
	size   int64
	mod    int64  // ModTime in unix ns, when hasMod
	etag   string // `"` + Info.ETag + `"`, or "" when there is none
	sums   map[string]string
	more   *versionMore
	hasMod bool
	isDir  bool
	strong bool
}

// versionMore holds what few kinds know of a file.
type versionMore struct {
	name         string // Info.Name, when it is not the base name of the path
	mode         fs.FileMode
	owner, group string
	ctime, atime time.Time
	modTime      time.Time // when it is not zero and not in mod's range (years 1678 to 2261)
}

// newVersion keeps in, which describes the endpoint path p.
func newVersion(in endpoint.Info, p string) version {
	v := version{size: in.Size, sums: in.Checksums, isDir: in.IsDir, strong: in.Strong}
	if in.ETag != "" {
		v.etag = `"` + in.ETag + `"`
	}
	var modTime time.Time
	if y := in.ModTime.Year(); !in.ModTime.IsZero() && y >= 1678 && y <= 2261 {
		v.mod, v.hasMod = in.ModTime.UnixNano(), true
	} else {
		modTime = in.ModTime
	}
	if in.Name != path.Base(p) || in.Mode != 0 || in.Owner != "" || in.Group != "" || !in.CTime.IsZero() || !in.ATime.IsZero() || !modTime.IsZero() {
		v.more = &versionMore{name: in.Name, mode: in.Mode, owner: in.Owner, group: in.Group, ctime: in.CTime, atime: in.ATime, modTime: modTime}
	}
	return v
}

// modTime is the modification time, zero when unknown.
func (v *version) modTime() time.Time {
	switch {
	case v.hasMod:
		return time.Unix(0, v.mod).UTC()
	case v.more != nil:
		return v.more.modTime
	}
	return time.Time{}
}

// info is the Info v was made from, for the endpoint path p.
func (v *version) info(p string) endpoint.Info {
	in := endpoint.Info{Name: path.Base(p), Size: v.size, ModTime: v.modTime(), IsDir: v.isDir, Strong: v.strong, Checksums: v.sums}
	if v.etag != "" {
		in.ETag = v.etag[1 : len(v.etag)-1]
	}
	if m := v.more; m != nil {
		in.Name, in.Mode, in.Owner, in.Group, in.CTime, in.ATime = m.name, m.mode, m.owner, m.group, m.ctime, m.atime
	}
	return in
}

// learnedSums is a copy-on-write map of checksums, of a replica of e.
type learnedSums struct {
	p atomic.Pointer[map[string]string]
	e *entry // nil for a replica of no entry
}

// entry is a locate answer, as the metadata cache hands it out (it
// keeps most packed, packed.go). It is immutable once stored, except
// sums and its replicas' learned checksums, which fill in lazily, and
// links.
type entry struct {
	expires  int64 // unix ns
	epoch    uint64
	pending  bool // a write was sent here: not an answer, just a hold on negative caching
	negative bool
	// viaUpstream: the replicas came from an upstream federator. Such an
	// entry never answers a request that itself came from a federator
	// (hops > 0): two federators naming each other as upstream would
	// otherwise hand each other the same entry forever, each renewing
	// its TTL, and a deleted file would live on.
	viaUpstream bool
	// shared: the entry came from the federators' shared second level
	// (decodeEntry), whose maker recorded what it found.
	shared bool
	// incomplete: some endpoint that could hold the path did not answer
	// (down, unavailable). Such an entry is stale once any endpoint
	// changes state, so a site coming back is used again at once.
	incomplete bool
	isDir      bool
	status     int // 200, 404, 403 or 503
	replicas   []*replica
	answers    []answer
	size       int64
	// hdr holds the precomputed HEAD header values (hdrSize, ...; ""
	// when absent), which header hands out as shared header values, so
	// that answering allocates nothing.
	hdr  [3]string
	sums atomic.Pointer[map[string]string]
	// links caches the Link header values made for this entry, by
	// replica order (linkCache; copy on write).
	links atomic.Pointer[linkCache]
	// home is the cache that holds the entry, packed as rec (set once,
	// before home); nil for an entry no cache holds.
	home atomic.Pointer[mdCache]
	rec  string
	// pinned: home holds the entry itself, for good (its shard's mu).
	pinned bool
	// hotRef: hit since the hand of its shard's kept entries passed.
	hotRef atomic.Bool
}

// keep makes e's cache hold e itself rather than its packed form, which
// lacks what e learned since it was stored (mdCache.keep).
func (e *entry) keep() {
	if c := e.home.Load(); c != nil {
		c.keep(e)
	}
}

// Indexes of entry.hdr.
const (
	hdrSize    = iota // Content-Length
	hdrLastMod        // Last-Modified
	hdrETag           // ETag (quoted)
)

// header returns the precomputed header value i (hdrSize, ...) as a
// slice of the entry's own array, or nil when it is absent.
func (e *entry) header(i int) []string {
	if e.hdr[i] == "" {
		return nil
	}
	return e.hdr[i : i+1 : i+1]
}

// setHeaders precomputes e.hdr from its size and primary replica.
func (e *entry) setHeaders() {
	e.hdr[hdrSize] = strconv.FormatInt(e.size, 10)
	if len(e.replicas) > 0 {
		e.hdr[hdrETag] = e.replicas[0].ver.etag
	}
	if mt := e.modTime(); !mt.IsZero() {
		e.hdr[hdrLastMod] = mt.UTC().Format(http.TimeFormat)
	}
}

// modTime is the modification time of the version the entry describes
// (its primary replica's); zero when unknown.
func (e *entry) modTime() time.Time {
	if len(e.replicas) == 0 {
		return time.Time{}
	}
	return e.replicas[0].ver.modTime()
}

// lookup returns the locate answer for the logical path p, from the cache
// when it can. Concurrent misses for one path are coalesced into one
// fan-out, which re-checks the cache first.
func (f *Federator) lookup(ctx context.Context, s *snapshot, p string, hops int) *entry {
	now := time.Now().UnixNano()
	trusted := f.trusted()
	if !trusted {
		f.m.misses.Inc()
		return f.locate(ctx, s, p, hops, true)
	}
	if e := s.cache.get(p, now); e != nil && f.fresh(e) && (hops == 0 || !e.viaUpstream) {
		f.m.hits.Inc()
		return e
	}
	f.m.misses.Inc()
	key := p
	if hops > 0 {
		// A request that came through other federators must not wait
		// for a flight of the same path with fewer hops: in a loop of
		// upstreams that flight may be waiting for this very request.
		key = strconv.Itoa(hops) + "\x00" + p
	}
	v, _, _ := s.flight.Do(key, func() (any, error) {
		if e := s.cache.get(p, time.Now().UnixNano()); e != nil && f.fresh(e) && (hops == 0 || !e.viaUpstream) {
			return e, nil
		}
		gen := s.cache.gen(p)
		var e *entry
		if f.opts.Shared != nil && hops == 0 && s == f.snap.Load() {
			e = f.sharedLocate(ctx, s, p)
		} else {
			e = f.locate(ctx, s, p, hops, true)
		}
		if hops < s.cfg.MaxHops && e.expires > 0 {
			s.cache.putIf(p, e, time.Now().UnixNano(), gen)
		}
		return e, nil
	})
	return v.(*entry)
}

func (f *Federator) fresh(e *entry) bool {
	return !e.incomplete || e.epoch == f.epoch.Load()
}

// locate is the answer for p: the hold of another process that holds it
// (held.go), else what the endpoints say (locateEndpoints).
func (f *Federator) locate(ctx context.Context, s *snapshot, p string, hops int, early bool) *entry {
	if e := f.held(ctx, s, p); e != nil {
		return e
	}
	return f.locateEndpoints(ctx, s, p, hops, early)
}

// locateEndpoints asks every endpoint that could hold p, in parallel, each under
// its own timeout; upstream federators only when no local endpoint has
// it. The fan-out does not stop when the request that started it goes
// away: other requests may be waiting for the same answer.
//
// With early set (a read's look-up), the answer does not wait for slow
// endpoints once one has the file (fanout, foundGrace), and an endpoint
// whose listing of p's directory names p answers from it (dirlist.go).
func (f *Federator) locateEndpoints(ctx context.Context, s *snapshot, p string, hops int, early bool) *entry {
	e, _ := f.locateListed(ctx, s, p, hops, early)
	return e
}

// locateListed is locateEndpoints, which also says the oldest listing
// the answer came from (dirlist.go).
func (f *Federator) locateListed(ctx context.Context, s *snapshot, p string, hops int, early bool) (*entry, listedFrom) {
	ctx = context.WithoutCancel(ctx)
	if hops > 0 {
		ctx = httpx.WithHops(ctx, hops)
	}
	e := &entry{epoch: f.epoch.Load()}
	rest, lf := f.fanout(ctx, s, s.locals, p, e, early)
	if len(e.replicas) == 0 && len(s.upstreams) > 0 {
		if hops < s.cfg.MaxHops {
			f.fanout(ctx, s, s.upstreams, p, e, false)
			e.viaUpstream = len(e.replicas) > 0
		} else {
			for _, m := range s.upstreams {
				if m.matches(p) {
					e.answers = append(e.answers, answer{m: m, kind: ansHopLimit})
				}
			}
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
	lf.cap(s, e)
	if rest != nil {
		// Some endpoints were left behind (foundGrace): finish the
		// look-up in the background and put the full answer in place
		// of this one, if the cache still holds this one.
		f.bg.Go(func() {
			asked, res := rest()
			full := &entry{epoch: e.epoch}
			flf := f.addProbes(full, p, asked, res, nil)
			f.finish(s, full, p, virtual)
			flf.cap(s, full)
			if hops < s.cfg.MaxHops && full.expires > 0 {
				s.cache.replace(p, e, full)
			}
		})
	}
	return e, lf
}

// foundGrace is how long a look-up waits for the other endpoints once
// one has answered "found". A replica that answers within it is ranked
// with the others; an endpoint still silent (a dead site, up to its whole
// timeout, 10 s by default) does not hold the answer up: it is recorded
// as slow, the entry is incomplete, and the full answer replaces it in
// the cache when the slow endpoints are done.
//
// The grace is at least foundGrace and at least twice the time the first
// "found" took: on a loaded machine every answer is slower, and a grace
// shorter than the scheduler's delays would drop healthy replicas from
// the first answer (they come back with the background completion).
const foundGrace = 100 * time.Millisecond

// askWorkers bounds the goroutines kept idle for endpoint asks (the
// federator's asks); askWorkerIdle is how long one is kept unused. A
// look-up asks each endpoint on one of them (endpoint.Workers), so that
// a cold look-up does not grow a new goroutine's stack to an endpoint
// request's depth per endpoint asked: as many as the look-ups of a busy
// moment ask at once, and idle ones go within seconds of the burst.
const (
	askWorkers    = 256
	askWorkerIdle = 30 * time.Second
)

// probe is one endpoint's answer to a look-up.
type probe struct {
	info endpoint.Info
	err  error
	dur  time.Duration
	url  string
	born int64
	down bool // not asked: marked down
	// listed: the answer came from this listing (dirlist.go), not from
	// a Stat.
	listed *dirListing
}

// fanout asks members (those matching p) for p and appends their answers
// and replicas to e, in the members' order. With early set, once one
// endpoint has it the others get foundGrace; fanout then returns a
// function that waits for those left behind and returns every answer
// (nil when none was left behind). With early set, answers may come
// from directory listings (dirlist.go): lf says the oldest.
func (f *Federator) fanout(ctx context.Context, s *snapshot, members []*member, p string, e *entry, early bool) (rest func() ([]*member, []probe), lf listedFrom) {
	var asked []*member
	for _, m := range members {
		if m.matches(p) {
			asked = append(asked, m)
		}
	}
	res := make([]probe, len(asked))
	// Members whose listing of p's directory is at hand answer on this
	// goroutine, without a goroutine, a channel or a deadline.
	var inline []bool
	n := 0
	if early && len(asked) > 1 && s.dirs != nil {
		for i, m := range asked {
			if r, ok := f.askListed(ctx, s, m, p); ok {
				if inline == nil {
					inline = make([]bool, len(asked))
				}
				res[i], inline[i] = r, true
				n++
			}
		}
		if n == len(asked) {
			return nil, f.addProbes(e, p, asked, res, nil)
		}
	}
	// One deadline for the whole fan-out when every endpoint asked has
	// the same timeout (the usual case): a context and its timer per
	// endpoint were a twentieth of the cold path.
	var shared context.Context
	cancel := context.CancelFunc(func() {})
	if len(asked) > 1 {
		t := asked[0].cfg.TimeoutOrDefault()
		same := true
		for _, m := range asked[1:] {
			same = same && m.cfg.TimeoutOrDefault() == t
		}
		if same {
			shared, cancel = context.WithTimeout(ctx, t)
		}
	}
	if len(asked) <= 1 {
		// One endpoint: asked on this goroutine, whose stack has
		// already grown to what an HTTP round trip needs.
		defer cancel()
		if len(asked) == 1 {
			res[0] = f.ask(ctx, shared, s, asked[0], p, early)
		}
		return nil, f.addProbes(e, p, asked, res, nil)
	}
	done := make(chan int, len(asked))
	start := time.Now()
	for i := range asked {
		if inline != nil && inline[i] {
			continue
		}
		f.asks.Go(func() {
			res[i] = f.ask(ctx, shared, s, asked[i], p, early)
			done <- i
		})
	}
	got := make([]bool, len(asked))
	pending := len(asked) - n
	var grace <-chan time.Time
	for i := range inline {
		got[i] = inline[i]
		if inline[i] && res[i].err == nil && grace == nil {
			t := time.NewTimer(foundGrace)
			defer t.Stop()
			grace = t.C
		}
	}
collect:
	for pending > 0 {
		select {
		case i := <-done:
			got[i] = true
			pending--
			if early && grace == nil && res[i].err == nil && !res[i].down {
				t := time.NewTimer(max(foundGrace, 2*time.Since(start)))
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			break collect
		}
	}
	lf = f.addProbes(e, p, asked, res, got)
	if pending == 0 {
		cancel()
		return nil, lf
	}
	return func() ([]*member, []probe) {
		for ; pending > 0; pending-- {
			<-done
		}
		cancel()
		return asked, res
	}, lf
}

// ask asks one member for p, under shared when it is set, else under the
// member's own timeout. A read's look-up (listed) may be answered from a
// listing of p's directory instead (fromListing).
func (f *Federator) ask(ctx, shared context.Context, s *snapshot, m *member, p string, listed bool) probe {
	var r probe
	if !m.h.Up() {
		r.down = true
		return r
	}
	ep := m.endpointPath(p)
	sctx := shared
	if sctx == nil {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
		defer cancel()
	}
	var ok bool
	if listed {
		r, ok = f.fromListing(ctx, s, m, p, true)
	}
	if ok {
		f.m.listedAnswers.Inc()
	} else {
		start := time.Now()
		r.info, r.err = m.ep.Stat(sctx, ep)
		r.dur = time.Since(start)
		f.requestResult(s, m, r.err, r.dur)
	}
	f.redirectURL(sctx, m, ep, &r)
	return r
}

// askListed is ask answered from a listing of p's directory already at
// hand (fromListing), or ok false: then ask asks, and may list. The
// redirect URL is made under ctx alone: a deadline's timer is what
// answering here saves, and the kinds that list make their URLs without
// asking the endpoint.
func (f *Federator) askListed(ctx context.Context, s *snapshot, m *member, p string) (r probe, ok bool) {
	if !m.h.Up() {
		return r, false
	}
	if r, ok = f.fromListing(ctx, s, m, p, false); ok {
		f.m.listedAnswers.Inc()
		f.redirectURL(ctx, m, m.endpointPath(p), &r)
	}
	return r, ok
}

// redirectURL sets r's redirect URL when m has the file at ep and
// clients can be sent to it.
func (f *Federator) redirectURL(ctx context.Context, m *member, ep string, r *probe) {
	if r.err == nil && !m.proxy {
		if u, err := endpoint.RedirectURL(ctx, m.ep, ep, endpoint.OpRead); err == nil {
			r.url, r.born = u.String(), time.Now().UnixNano()
		}
	}
}

// addProbes appends to e the answers in res (those marked in got; all when got
// is nil) to e, in the members' order; a member not yet answered is
// recorded as slow and makes e incomplete. lf is the oldest listing an
// answer added came from.
func (f *Federator) addProbes(e *entry, p string, asked []*member, res []probe, got []bool) (lf listedFrom) {
	// Room for them all at once: what append's doubling leaves spare
	// stays in the cache with the entry.
	e.answers = slices.Grow(e.answers, len(asked))
	e.replicas = slices.Grow(e.replicas, len(asked))
	for i, m := range asked {
		if got != nil && !got[i] {
			// Its goroutine still writes res[i]: not a byte of it is read.
			e.answers = append(e.answers, answer{m: m, kind: ansSlow})
			e.incomplete = true
			continue
		}
		r := res[i]
		lf.add(r.listed)
		a := newAnswer(m, r.dur)
		switch {
		case r.down:
			a.kind = ansDown
			e.incomplete = true
		case r.err == nil && !f.stale.empty() && f.stale.isStale(m.name, m.endpointPath(p), r.info):
			// A write through this federator replaced this version.
			a.kind, a.err = ansNotFound, "stale: a newer version was written elsewhere"
		case r.err == nil:
			a.kind = ansFound
			e.replicas = append(e.replicas, newReplica(m, p, r.info, r.url, r.born))
		default:
			a.err = r.err.Error()
			switch endpoint.Class(r.err) {
			case endpoint.ErrNotFound:
				a.kind = ansNotFound
			case endpoint.ErrRefused:
				a.kind = ansRefused
			default:
				a.kind = ansUnavailable
				e.incomplete = true
			}
		}
		e.answers = append(e.answers, a)
	}
	return lf
}

// finish decides the entry's status and expiry and precomputes headers.
func (f *Federator) finish(s *snapshot, e *entry, p string, virtual bool) {
	now := time.Now().UnixNano()
	if len(e.replicas) > 0 {
		primary := e.replicas[0]
		e.isDir = primary.ver.isDir
		// Replicas that disagree with the primary about being a
		// directory are not replicas of it.
		keep := e.replicas[:0]
		for _, r := range e.replicas {
			if r.ver.isDir == e.isDir {
				keep = append(keep, r)
			}
		}
		e.replicas = keep
		for i, r := range e.replicas {
			r.idx = uint8(min(i, 255))
			if r.learned != nil {
				r.learned.e = e
			}
		}
		e.status = http.StatusOK
		e.size = primary.ver.size
		// The entry describes the primary's version: its checksums, and
		// those of replicas proven to hold the same bytes (equal
		// checksums), never a mix of versions. Replicas proven
		// different are recorded as disagreeing.
		sums := map[string]string{}
		for k, v := range primary.ver.sums {
			sums[k] = v
		}
		for _, r := range e.replicas[1:] {
			switch same, why := checksumsAgree(primary.info(), r.info()); {
			case same:
				for k, v := range r.ver.sums {
					if _, ok := sums[k]; !ok {
						sums[k] = v
					}
				}
			case why != "" && !e.shared:
				f.disagree(p, primary, r, why) // an entry from Redis was recorded by its maker
			}
		}
		if len(sums) > 0 {
			e.sums.Store(&sums)
		}
	} else if virtual {
		e.status, e.isDir = http.StatusOK, true
	} else {
		e.status = http.StatusNotFound
		for _, a := range e.answers {
			switch a.kind {
			case ansUnavailable, ansDown:
				e.status = http.StatusServiceUnavailable
			case ansRefused:
				if e.status == http.StatusNotFound {
					e.status = http.StatusForbidden
				}
			}
		}
	}
	if e.isDir {
		e.size = 0
	}
	e.setHeaders()
	switch e.status {
	case http.StatusOK:
		e.expires = now + int64(s.cfg.MetadataCache.TTL)
		f.m.locFound.Inc()
	case http.StatusNotFound:
		e.negative = true
		e.expires = now + int64(s.cfg.MetadataCache.NegativeTTL)
		f.m.locMissing.Inc()
	default:
		f.m.locUnavail.Inc() // not cached: ask again next time
	}
}

// checksumsAgree reports whether two replicas' metadata prove that they hold
// the same bytes: the same size and equal checksums (and none
// different). Equal ETags prove nothing across servers (see
// failoverReader.compare). When they are proven different, why says
// how; when nothing proves either, it is "".
func checksumsAgree(a, b endpoint.Info) (same bool, why string) {
	if a.IsDir || b.IsDir {
		return false, ""
	}
	if a.Size != b.Size {
		return false, fmt.Sprintf("size %d != %d", a.Size, b.Size)
	}
	equal := false
	for k, v := range a.Checksums {
		if w, ok := b.Checksums[k]; ok {
			if w != v {
				return false, fmt.Sprintf("%s %s != %s", k, v, w)
			}
			equal = true
		}
	}
	return equal, ""
}
