package federation

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"golang.org/x/sync/singleflight"
)

// A job of the field reads a directory file by file: every path is new
// to the metadata cache, and each look-up would ask every endpoint a
// Stat. dirLister answers such look-ups from one listing of the
// directory per endpoint (endpoint.StatLister), where the kind proves
// the listing says of each file what its Stat would.
//
// An answer from a listing is an answer from the time the listing was
// asked for, and is held to every rule a Stat's answer made then would
// be:
//
//   - it is used only while no invalidation reached the path's shard of
//     the metadata cache since before the listing was asked for (the
//     gen that putIf checks, read for every shard at that time): a write
//     through this federator, or through another one (ForgetShared),
//     drops the path before it is acknowledged, so no write
//     acknowledged after the listing began is answered from it;
//   - it is not used while the path is pending (a client sent to write
//     it), nor when a pending mark outlived the listing's start: the
//     client's write may land after the listing; a mark that left the
//     cache before it expired (evicted, or replaced by a found answer
//     since evicted) counts as there (cacheShard.lost);
//   - the entry made from it expires when one made by a Stat at the
//     listing's time would (listedFrom.cap), so no answer lives longer
//     than negative_ttl or ttl from what an endpoint said;
//   - with shared state, it goes to the second level only while no path
//     of the directory was written since its version was read, before
//     the listing (shared.Client.StoreMetaListed): another federator's
//     write bumps that version before its invalidation reaches this one.
//
// A listing answers only for the files it names. Anything else — a name
// it lacks (the file may have been written at the site since), a kind
// that does not list as it stats, a listing that failed or is over
// list_max_entries, an entry the kind is unsure of — is asked with
// Stat.
type dirLister struct {
	after  int           // misses in one directory, within window, that list it
	limit  int           // the most entries a directory listed may have
	budget int           // entries kept over all listings
	window time.Duration // how long a listing answers, and misses are counted
	// flight coalesces concurrent listings of one directory of one
	// endpoint.
	flight singleflight.Group

	// mu guards dirs and kept.
	mu   sync.Mutex
	dirs map[dirKey]*dirState
	kept int // entries of the listings in dirs
}

// dirKey is a directory of the logical namespace on one member.
type dirKey struct {
	m   *member
	dir string
}

// dirState is what the lister knows of one directory of one member.
type dirState struct {
	first  int64 // unix ns of the first miss counted
	misses int
	l      *dirListing // nil: not listed since first
}

// dirListing is one answer of endpoint.StatLister.
type dirListing struct {
	taken int64 // unix ns, before it was asked for
	// gens are the metadata cache's invalidation counts, by shard, read
	// before it was asked for.
	gens [cacheShards]uint64
	// dver is the directory's version in the shared state, read before
	// it was asked for; "" when there is none.
	dver string
	// files are what the listing says of each file; nil when it failed
	// or was too large (then unsure is nil too and Stat answers).
	files  map[string]endpoint.Info
	unsure map[string]struct{}
	// until is when a listing that failed or was too large is tried
	// again (unix ns).
	until int64
}

// dirsKept bounds the directories the lister remembers misses of.
const dirsKept = 1 << 16

// newDirLister returns the lister of mc, nil when listing is off.
func newDirLister(mc config.MetadataCache) *dirLister {
	if mc.ListAfter < 1 || mc.ListMaxEntries < 1 {
		return nil
	}
	return &dirLister{after: mc.ListAfter, limit: mc.ListMaxEntries, budget: 8 * mc.ListMaxEntries,
		window: mc.NegativeTTL.D(), dirs: map[dirKey]*dirState{}}
}

// listedFrom is the oldest listing an entry's answers came from.
type listedFrom struct {
	at   int64 // unix ns; 0: no answer came from a listing
	dver string
}

// add records that an answer came from l.
func (lf *listedFrom) add(l *dirListing) {
	if l != nil && (lf.at == 0 || l.taken < lf.at) {
		lf.at, lf.dver = l.taken, l.dver
	}
}

// cap makes e, made by finish, expire when an entry made when lf's
// listing was taken would.
func (lf listedFrom) cap(s *snapshot, e *entry) {
	if lf.at == 0 || e.expires == 0 {
		return
	}
	ttl := s.cfg.MetadataCache.TTL.D()
	if e.negative {
		ttl = s.cfg.MetadataCache.NegativeTTL.D()
	}
	e.expires = min(e.expires, lf.at+int64(ttl))
}

// fromListing answers m's part of the look-up of p from a listing of
// p's directory on m, when the rules above allow it; ok false: ask Stat.
// With mayList, the look-up counts as a miss in the directory, and lists
// it when the misses call for it; without, only a listing at hand
// answers.
func (f *Federator) fromListing(ctx context.Context, s *snapshot, m *member, p string, mayList bool) (r probe, ok bool) {
	dl := s.dirs
	if dl == nil || !f.trusted() {
		return r, false
	}
	sl, can := m.ep.(endpoint.StatLister)
	d := path.Dir(p)
	if !can || d == p || !m.matches(d) {
		return r, false
	}
	key := dirKey{m, d}
	var l *dirListing
	list := false
	if mayList {
		l, list = dl.note(key, time.Now().UnixNano())
	} else {
		l = dl.current(key, time.Now().UnixNano())
	}
	if l == nil && list {
		v, _, _ := dl.flight.Do(m.name+"\x00"+d, func() (any, error) {
			if l := dl.current(key, time.Now().UnixNano()); l != nil {
				return l, nil // a flight that just ended listed it
			}
			return f.listDir(ctx, s, sl, key), nil
		})
		l = v.(*dirListing)
	}
	if l == nil || l.files == nil || s.cache.gen(p) != l.gens[s.cache.shardIndex(p)] || s.cache.pendingAfter(p, l.taken) {
		return r, false
	}
	ep := m.endpointPath(p)
	name := path.Base(ep)
	if in, found := l.files[name]; found {
		return probe{info: in, listed: l}, true
	}
	// A name the listing lacks is asked with Stat: a listing says what
	// was there when it was taken, and a file written at the site since,
	// behind the lake's back (a transfer service writing to the site
	// itself), must not be "not found" for a path nobody had asked
	// about. A Stat's 404 is cached for negative_ttl as before.
	return r, false
}

// note counts a miss in key's directory at now and returns its listing
// while it answers, else whether the misses call for one.
func (dl *dirLister) note(key dirKey, now int64) (l *dirListing, list bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	st := dl.dirs[key]
	if st == nil {
		if len(dl.dirs) >= dirsKept {
			dl.sweepLocked(now)
		}
		st = &dirState{first: now}
		dl.dirs[key] = st
	}
	if st.l != nil {
		if now < st.l.until {
			return st.l, false
		}
		dl.kept -= len(st.l.files)
		st.l, st.first, st.misses = nil, now, 0
	}
	if now-st.first >= int64(dl.window) {
		st.first, st.misses = now, 0
	}
	st.misses++
	return nil, st.misses >= dl.after
}

// current returns key's listing while it answers, else nil.
func (dl *dirLister) current(key dirKey, now int64) *dirListing {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if st := dl.dirs[key]; st != nil && st.l != nil && now < st.l.until {
		return st.l
	}
	return nil
}

// sweepLocked drops the directories whose misses and listing are over,
// and all of them when that is not enough.
func (dl *dirLister) sweepLocked(now int64) {
	for k, st := range dl.dirs {
		if (st.l == nil || now >= st.l.until) && now-st.first >= int64(dl.window) {
			dl.dropLocked(k, st)
		}
	}
	if len(dl.dirs) >= dirsKept {
		clear(dl.dirs)
		dl.kept = 0
	}
}

func (dl *dirLister) dropLocked(k dirKey, st *dirState) {
	if st.l != nil {
		dl.kept -= len(st.l.files)
	}
	delete(dl.dirs, k)
}

// listDir asks key's member for the listing of key's directory and keeps it.
func (f *Federator) listDir(ctx context.Context, s *snapshot, sl endpoint.StatLister, key dirKey) *dirListing {
	dl, m := s.dirs, key.m
	l := &dirListing{}
	// Everything that later proves the listing not older than a write
	// is read before it is asked for.
	if sh := f.opts.Shared; sh != nil && s == f.snap.Load() {
		if v, err := sh.DirVersion(ctx, key.dir); err == nil {
			l.dver = v
		}
	}
	l.taken = time.Now().UnixNano()
	s.cache.gensInto(&l.gens)
	lctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
	files, unsure, err := sl.StatList(lctx, m.endpointPath(key.dir), dl.limit)
	cancel()
	l.until = l.taken + int64(dl.window)
	switch {
	case errors.Is(err, endpoint.ErrNotFound):
		// No such directory: none of its paths is there.
		files, unsure, err = nil, nil, nil
	case errors.Is(err, endpoint.ErrUnsupported), errors.Is(err, endpoint.ErrTooLarge):
		// It will not list otherwise soon: Stat for as long as a found
		// answer is trusted.
		l.until = l.taken + int64(s.cfg.MetadataCache.TTL.D())
	}
	if err == nil {
		l.files = make(map[string]endpoint.Info, len(files))
		for _, in := range files {
			l.files[in.Name] = in
		}
		if len(unsure) > 0 {
			l.unsure = make(map[string]struct{}, len(unsure))
			for _, n := range unsure {
				l.unsure[n] = struct{}{}
			}
		}
		f.m.listingsOK.Inc()
	} else {
		f.m.listingsFailed.Inc()
	}
	dl.keep(key, l)
	return l
}

// keep makes l key's listing, dropping others while the entries kept
// would exceed the budget.
func (dl *dirLister) keep(key dirKey, l *dirListing) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	for k, st := range dl.dirs {
		if dl.kept+len(l.files) <= dl.budget {
			break
		}
		if k != key && st.l != nil {
			dl.kept -= len(st.l.files)
			st.l = nil
		}
	}
	st := dl.dirs[key]
	if st == nil {
		st = &dirState{first: l.taken}
		dl.dirs[key] = st
	}
	if st.l != nil {
		dl.kept -= len(st.l.files)
	}
	st.l = l
	dl.kept += len(l.files)
}
