// Package federation is lakefed's federator: one namespace over many
// storage endpoints. For each path it finds the replicas (a parallel Stat
// fan-out, cached), ranks them (health, priority, proximity, latency, a
// random spread among near-equals) and answers: a 302 to the best replica
// with RFC 6249 Link headers for the others, a Metalink 4 document, HEAD
// from metadata, or the bytes themselves (proxy mode) with failover to the
// next replica at the same offset. It is what Dynafed and the XRootD
// redirectors of CMS AAA do, with health in seconds, 404 told apart from
// 503, and an endpoint list that reloads without a restart.
//
// Endpoint kinds bring their own rules. S3 endpoints redirect readers to
// pre-signed GET URLs (HEAD is always answered here: S3 refuses a GET
// signature for HEAD), take writes through the federator so that the
// adler32 is stored with every object, and are refused at start when their
// presign_expiry is shorter than the metadata cache TTL. root:// endpoints
// are proxied unless they name an HTTP door (http_url). Any request may be
// pinned to one endpoint with ?lakefed.site=NAME (SiteParam).
//
//	cfg, _ := config.Load("lakefed.yaml")
//	fed, err := federation.New(ctx, *cfg.Federation, federation.Options{Log: log})
//	defer fed.Close()
//	srv := &http.Server{Addr: cfg.Listen, Handler: fed.Handler()}
//	_ = fed.Reload(newCfg) // on SIGHUP: requests in flight keep the old endpoint set
package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oschwald/geoip2-golang/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/shared"
)

// NewEndpointFunc builds one endpoint from its config.
type NewEndpointFunc func(ctx context.Context, cfg config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error)

// Options are the parts of a federator that do not come from the config
// file.
type Options struct {
	// Log receives state changes and errors. Nil: slog.Default().
	Log *slog.Logger
	// NewEndpoint builds endpoints. Nil: DefaultNewEndpoint (the kind table,
	// plus upstream federators). Tests pass fakes.
	NewEndpoint NewEndpointFunc
	// Reload, when set, is called by POST /api/reload to get the new
	// config (serve re-reads its file); the federator then applies it with
	// Reload. Nil: /api/reload answers 501.
	Reload func(ctx context.Context) (*config.Federation, error)
	// OnWrite, when set, is called with the logical path of every write
	// through the federator (PUT, DELETE, MKCOL, a third-party copy it
	// directs; from HTTP, the root:// door or a role of the process),
	// before the writer gets its answer: the write hook through which
	// the other roles of the process (a cache) drop what they hold of
	// the path. It must not block.
	OnWrite func(path string)
	// Shared, when set, is the state this federator shares with others
	// through Redis (shared.go): writes seen by all before they are
	// acknowledged, a second level of the metadata cache. The caller runs
	// it (Run) and gives it ForgetShared and ForgetAll. Nil: alone.
	Shared *shared.Client
	// Self is this process's URL as the others of the lake reach it
	// (config shared.advertise): the holds of files in Shared that name
	// it are its own write buffer's, which answers for them in front of
	// the federator (held.go). "": the process has no buffer.
	Self string
	// SharedWritesLocal lets writes go on while Shared cannot reach
	// Redis (the other federators then do not see them until their
	// metadata expires). False: such writes are refused with 503.
	SharedWritesLocal bool
	// MayList reports whether the caller of r may list the path p (the
	// auth rules' list permission). /api/disagreements shows only the
	// paths it allows, since the operator's pages pass the auth rules
	// unguarded. Nil: every path is shown.
	MayList func(r *http.Request, p string) bool
}

// Federator is the federator. Its methods and handler may be used
// concurrently.
type Federator struct {
	log   *slog.Logger
	opts  Options
	ctx   context.Context // parent of every prober
	stop  context.CancelFunc
	snap  atomic.Pointer[snapshot]
	epoch atomic.Uint64 // bumped on every endpoint state change
	m     *metrics

	mu sync.Mutex // serialises Reload and Close; guards probers and geo
	// probers maps a member to the cancel of its probe loop.
	probers map[*member]context.CancelFunc
	wg      sync.WaitGroup
	geo     map[string]*geoip2.Reader // opened databases, closed by Close
	closed  bool
	spread  atomic.Uint64 // round-robin counter for placement: spread
	dis     disagreements // recent replica disagreements, for /api
	stale   staleSet      // replicas a write made stale and could not delete
	// peers are the members for the processes that hold files (held.go),
	// by URL and mode; made on first use, closed by Close.
	peersMu sync.Mutex
	peers   map[string]*member
	// bg owns look-ups finishing in the background (fanout's slow
	// endpoints); Close waits for them. Each ends within its endpoints'
	// timeouts.
	bg sync.WaitGroup
	// asks runs a fan-out's endpoint asks (fanout) on goroutines kept
	// between look-ups; Close stops them after bg.
	asks *endpoint.Workers
	// meters are the writers that count the namespace's answers
	// (serveNamespace), reused.
	meters sync.Pool
}

// snapshot is one immutable endpoint set with its cache. A request loads
// it once and uses it to the end, so a reload never changes the ground
// under a request in flight.
type snapshot struct {
	cfg       *config.Federation
	members   []*member // config order
	locals    []*member // non-upstream members
	upstreams []*member
	byName    map[string]*member
	cache     *mdCache
	// dirs answers look-ups of new paths from directory listings
	// (dirlist.go); nil when listing is off.
	dirs   *dirLister
	flight singleflight.Group
	geo    *geoip2.Reader // nil: no GeoIP database
	nets   []clientNet    // most specific first
	// geoLocs remembers GeoIP positions ([2]float64 → *clientLoc) with
	// their endpoint distances; nGeoLocs counts them (bounded).
	geoLocs  sync.Map
	nGeoLocs atomic.Int32
	// pins are the views of this snapshot pinned to one endpoint
	// (?lakefed.site=NAME), by endpoint name: each asks only that
	// endpoint and has a cache of its own. Nil in a pinned view.
	pins map[string]*snapshot
	// root is the snapshot a pinned view belongs to; nil for the root.
	root *snapshot
}

// member is one endpoint in the federation, with its mapping and health.
// Members whose config does not change survive reloads, health and all.
type member struct {
	cfg      config.Endpoint
	name     string
	ep       endpoint.Endpoint
	url      string // the configured URL, for the API
	prefix   string // logical prefix, clean
	path     string // where prefix lives on the endpoint, clean
	priority int
	lat, lon float64
	located  bool
	proxy    bool // bytes go through the federator (mode proxy, or no Redirecter)
	// presign is how long the endpoint's redirect URLs stay valid (S3
	// pre-signed URLs); 0 when they do not expire.
	presign time.Duration
	// putProxy: PUTs go through the federator even in redirect mode,
	// because a client sent to the endpoint directly would store the file
	// without its checksum (a pre-signed S3 PUT carries no adler32).
	putProxy bool
	upstream bool
	writable bool
	// peer: another process of the lake holding files (held.go), not an
	// endpoint of the config.
	peer bool
	h    health
	mm   memberMetrics
	// streams counts its proxied reads and writes in flight, which a
	// reload that removes it waits for before closing it (closeRemoved).
	streams inflight
	// urlBase is what the endpoint's redirect URLs start with when they
	// end with the endpoint path, learned from the first such URL and
	// never changed; nil until then. Replicas whose URL is urlBase
	// followed by their path keep no copy of it (replica.derived).
	urlBase atomic.Pointer[string]
}

// derives reports whether url, a redirect URL of the endpoint path ep,
// is m.urlBase followed by ep, learning urlBase from it if it is unset.
func (m *member) derives(url, ep string) bool {
	if url == "" || !strings.HasSuffix(url, ep) {
		return false
	}
	base := url[:len(url)-len(ep)]
	b := m.urlBase.Load()
	if b == nil {
		nb := strings.Clone(base)
		m.urlBase.CompareAndSwap(nil, &nb)
		b = m.urlBase.Load()
	}
	return *b == base
}

// New builds a federator from cfg (defaults filled and validated: use
// config.Load, or call SetDefaults and Validate on a Config) and starts its
// health probes. They stop when ctx is cancelled or Close is called.
func New(ctx context.Context, cfg config.Federation, opts Options) (*Federator, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.NewEndpoint == nil {
		opts.NewEndpoint = DefaultNewEndpoint
	}
	ctx, stop := context.WithCancel(ctx)
	f := &Federator{
		log:     opts.Log.With("component", "federation"),
		opts:    opts,
		ctx:     ctx,
		stop:    stop,
		m:       newMetrics(),
		probers: map[*member]context.CancelFunc{},
		geo:     map[string]*geoip2.Reader{},
		asks:    endpoint.NewWorkers(askWorkers, askWorkerIdle),
	}
	f.meters.New = func() any { return new(httpx.Meter) }
	f.m.reg.MustRegister(newPrefixCollector(f))
	if sh := opts.Shared; sh != nil {
		f.m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lakefed_federation_shared_degraded",
			Help: "1 while the shared state (Redis) cannot be reached: this federator serves from its own state and refuses writes."},
			func() float64 {
				if sh.Degraded() {
					return 1
				}
				return 0
			}))
	}
	if err := f.Reload(cfg); err != nil {
		stop()
		f.closeGeo()
		return nil, err
	}
	return f, nil
}

// DefaultNewEndpoint builds endpoints with the kind table (kinds.New):
// lakefed(s):// URLs, and http(s) URLs marked "kind: upstream", are other
// lakefed federators.
func DefaultNewEndpoint(ctx context.Context, cfg config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
	return kinds.New(ctx, cfg.Config, log)
}

// isUpstream reports whether cfg is another federator, asked only when no
// local endpoint has the file.
func isUpstream(cfg config.Endpoint) bool {
	_, kind, err := endpoint.Resolve(cfg.Config)
	return err == nil && kind == endpoint.KindUpstream
}

// Reload applies a new config: endpoints whose config did not change keep
// their connection and health; new ones are built and probed; removed ones
// stop being probed, and are closed once the requests that began with
// them are done (closeRemoved). The swap is atomic: requests in flight finish with
// the endpoint set they started with. The metadata cache starts empty.
// On error nothing changes.
func (f *Federator) Reload(cfg config.Federation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("federation: reload after close")
	}
	old := f.snap.Load()
	s := &snapshot{cfg: &cfg, byName: map[string]*member{}}
	reused := map[*member]bool{}
	var fresh []*member
	for i, ec := range cfg.Endpoints {
		if old != nil {
			if m, ok := old.byName[ec.Name]; ok && reflect.DeepEqual(m.cfg, ec) && m.proxy == wantProxy(&cfg, ec, m.ep) {
				if err := checkPresign(&cfg, i, m); err != nil {
					f.forgetFresh(old, fresh)
					return err
				}
				s.add(m)
				reused[m] = true
				continue
			}
		}
		m, err := f.newMember(&cfg, ec)
		if err == nil {
			err = checkPresign(&cfg, i, m)
		}
		if err != nil {
			if m != nil {
				fresh = append(fresh, m)
			}
			f.forgetFresh(old, fresh)
			return err
		}
		fresh = append(fresh, m)
		s.add(m)
	}
	var err error
	if s.geo, err = f.openGeo(cfg.GeoIPDB); err != nil {
		f.forgetFresh(old, fresh)
		return err
	}
	if s.nets, err = parseNets(cfg.ClientNetworks, s.members); err != nil {
		f.forgetFresh(old, fresh)
		return err
	}
	s.cache = newCache(cfg.MetadataCache.MaxEntries, cfg.MetadataCache.Hot, s.members)
	s.dirs = newDirLister(cfg.MetadataCache)
	s.pin()
	f.snap.Store(s)
	for _, m := range fresh {
		pctx, cancel := context.WithCancel(f.ctx)
		f.probers[m] = cancel
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.probeLoop(pctx, m)
		}()
	}
	if old != nil {
		for _, m := range old.members {
			if !reused[m] {
				f.probers[m]()
				delete(f.probers, m)
				if _, kept := s.byName[m.name]; !kept {
					f.m.forget(m.name)
				}
				f.closeRemoved(m)
			}
		}
		f.log.Info("endpoints reloaded", "endpoints", len(s.members), "new", len(fresh), "kept", len(reused))
	}
	return nil
}

// forgetFresh closes the endpoints of members built by a reload that
// failed, and drops their metric series unless the running set has an endpoint of that name.
func (f *Federator) forgetFresh(old *snapshot, fresh []*member) {
	for _, m := range fresh {
		closeEndpoint(m.ep) // never in use
		if old == nil || old.byName[m.name] == nil {
			f.m.forget(m.name)
		} else {
			old.byName[m.name].mm.up.Set(b2f(old.byName[m.name].h.Up()))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (s *snapshot) add(m *member) {
	s.members = append(s.members, m)
	s.byName[m.name] = m
	if m.upstream {
		s.upstreams = append(s.upstreams, m)
	} else {
		s.locals = append(s.locals, m)
	}
}

// pin builds s's pinned views, one per member.
func (s *snapshot) pin() {
	s.pins = make(map[string]*snapshot, len(s.members))
	n := max(1, s.cfg.MetadataCache.MaxEntries/max(1, len(s.members)))
	for _, m := range s.members {
		v := &snapshot{cfg: s.cfg, byName: map[string]*member{}, geo: s.geo, nets: s.nets, root: s}
		v.add(m)
		v.cache = newCache(n, max(1, s.cfg.MetadataCache.Hot/max(1, len(s.members))), v.members)
		v.dirs = newDirLister(s.cfg.MetadataCache)
		s.pins[m.name] = v
	}
}

// invalidate drops p from the metadata cache of the whole snapshot: the
// root's and every pinned view's, so that a write through one is seen by
// all (see mdCache.invalidate for hold).
func (s *snapshot) invalidate(p string, hold time.Duration) {
	if s.root != nil {
		s = s.root
	}
	s.cache.invalidate(p, hold)
	for _, v := range s.pins {
		v.cache.invalidate(p, hold)
	}
}

// wantProxy reports whether the bytes of ec's files go through the
// federator: in proxy mode, and for endpoints clients cannot be sent to
// (the kind says: endpoint.CanRedirect).
func wantProxy(f *config.Federation, ec config.Endpoint, ep endpoint.Endpoint) bool {
	return ec.EffectiveMode(f) == "proxy" || !endpoint.CanRedirect(ep)
}

// checkPresign refuses an endpoint, cfg.Endpoints[i], whose redirect URLs
// expire sooner than the metadata cache keeps them: a client redirected
// from a cached answer near the end of its TTL would get a URL already
// dead. Dynafed refuses to start in this case too. A proxied endpoint is
// exempt: its URLs are never handed out.
func checkPresign(cfg *config.Federation, i int, m *member) error {
	if m.presign == 0 || m.proxy {
		return nil
	}
	if ttl := cfg.MetadataCache.TTL.D(); m.presign < ttl {
		return fmt.Errorf("federation: federation.endpoints[%d].s3.presign_expiry: %v (endpoint %s) is shorter than "+
			"federation.metadata_cache.ttl %v: a redirect URL served from the cache could have expired; "+
			"raise s3.presign_expiry or lower metadata_cache.ttl", i, m.presign, m.name, ttl)
	}
	return nil
}

func (f *Federator) newMember(cfg *config.Federation, ec config.Endpoint) (*member, error) {
	ep, err := f.opts.NewEndpoint(f.ctx, ec, f.log)
	if err != nil {
		return nil, fmt.Errorf("federation: endpoint %s: %w", ec.Name, err)
	}
	m := &member{
		cfg:      ec,
		name:     ec.Name,
		ep:       ep,
		url:      redactURL(ec.URL),
		prefix:   ec.Prefix,
		path:     ec.Path,
		priority: ec.Priority,
		upstream: isUpstream(ec),
		writable: ec.Writable,
		proxy:    wantProxy(cfg, ec, ep),
	}
	if ps, ok := ep.(endpoint.Presigner); ok {
		m.presign = ps.PresignExpiry()
		// A pre-signed PUT stores the bytes without the adler32 that
		// lakefed keeps on every object it writes, and is one PUT (at
		// most 5 GiB). Through the federator, Put computes the adler32
		// while streaming and uses a multipart upload for big files.
		m.putProxy = true
	}
	if m.prefix == "" {
		m.prefix = "/"
	}
	if m.path == "" {
		m.path = "/"
	}
	if m.priority == 0 {
		m.priority = 1
	}
	if ec.Location.Known() {
		m.lat, m.lon, m.located = ec.Location[0], ec.Location[1], true
	}
	m.h.up.Store(true)
	m.mm = f.m.forMember(m.name)
	m.mm.up.Set(1)
	return m, nil
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}

func (f *Federator) openGeo(path string) (*geoip2.Reader, error) {
	if path == "" {
		return nil, nil
	}
	if r, ok := f.geo[path]; ok {
		return r, nil
	}
	r, err := geoip2.Open(path)
	if err != nil {
		return nil, fmt.Errorf("federation: geoip_db: %w", err)
	}
	f.geo[path] = r
	return r, nil
}

func (f *Federator) closeGeo() {
	for p, r := range f.geo {
		r.Close()
		delete(f.geo, p)
	}
}

// Close stops the health probes, waits for them and closes the endpoints
// that hold connections. The handler must no longer be serving (shut the
// http.Server down first).
func (f *Federator) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.stop()
	f.mu.Unlock()
	f.wg.Wait()
	f.bg.Wait()
	f.asks.Close()
	f.mu.Lock()
	f.closeGeo()
	f.mu.Unlock()
	// Endpoints that hold connections (root:// keeps its session and a pool of idle ones) let them go.
	var members []*member
	if s := f.snap.Load(); s != nil {
		members = append(members, s.members...)
	}
	f.peersMu.Lock()
	for _, m := range f.peers {
		members = append(members, m)
	}
	f.peersMu.Unlock()
	for _, m := range members {
		closeEndpoint(m.ep)
	}
	return nil
}

// matches reports whether the logical path p is inside m's prefix.
func (m *member) matches(p string) bool {
	return m.prefix == "/" || p == m.prefix || (strings.HasPrefix(p, m.prefix) && p[len(m.prefix)] == '/')
}

// endpointPath maps a logical path inside m's prefix to the path on m.
func (m *member) endpointPath(p string) string {
	rest := p
	if m.prefix != "/" {
		rest = p[len(m.prefix):]
		if rest == "" {
			rest = "/"
		}
	}
	if m.path == "/" {
		return rest
	}
	if rest == "/" {
		return m.path
	}
	return m.path + rest
}

// childOf returns the name of the entry directly inside dir that leads to
// m's prefix, when m's prefix lies strictly below dir ("/atlas/data" below
// "/" gives "atlas"); "" otherwise. These are the federation's virtual
// directories.
func (m *member) childOf(dir string) string {
	if m.prefix == "/" || m.prefix == dir {
		return ""
	}
	var rest string
	if dir == "/" {
		rest = m.prefix[1:]
	} else if strings.HasPrefix(m.prefix, dir+"/") {
		rest = m.prefix[len(dir)+1:]
	} else {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}
