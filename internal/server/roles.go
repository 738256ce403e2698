package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/httpx/fastpath"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/shared"
	"github.com/lakefed/lakefed/internal/sitetest"
	"github.com/lakefed/lakefed/internal/web"
)

// role is one part of what a process runs. Start calls start in plan's
// order, so a role may use what the roles before it set on the Server
// (the site tests use s.fed and s.store); Shutdown calls stop in the
// reverse order, and only for roles whose start returned nil.
type role interface {
	// start starts the role. ctx bounds the start only: goroutines it
	// leaves running belong to s.runCtx and to the role's own stop.
	start(ctx context.Context, s *Server) error
	// stop stops the role and releases what it holds; ctx bounds the
	// wait for requests in flight.
	stop(ctx context.Context) error
}

// plan lists the roles of s.cfg in start order. Shutdown runs it
// backwards, which is the order that matters: the front listener stops
// accepting and drains first, the storage servers last.
func (s *Server) plan() []role {
	var rs []role
	if s.cfg.Auth != nil {
		rs = append(rs, &authRole{})
	}
	if s.cfg.Shared != nil {
		rs = append(rs, &sharedRole{})
	}
	for i := range s.cfg.Storage {
		rs = append(rs, &storageRole{index: i})
	}
	if s.cfg.Federation != nil {
		rs = append(rs, &resultsRole{}, &federatorRole{})
	}
	if s.cfg.Buffer != nil {
		rs = append(rs, &bufferRole{}) // before the cache and the doors, which read through it
	}
	if s.cfg.Cache != nil {
		rs = append(rs, &cacheRole{}) // before the front, which may route reads to it
		if s.cfg.Cache.ListenXroot != "" {
			rs = append(rs, &xrootRole{cache: true})
		}
	}
	if s.cfg.ListenXroot != "" {
		rs = append(rs, &xrootRole{}) // before the front, whose /api/xroot shows it
	}
	if s.cfg.Federation != nil {
		rs = append(rs, &siteTestsRole{}, &dashboardRole{}, &frontRole{})
	}
	return rs
}

// storageRole is one storage server (site.go).
type storageRole struct {
	index int
	site  *Site
}

func (r *storageRole) start(_ context.Context, s *Server) error {
	// The process's auth refusals show on one listener's /metrics: the
	// federator's or the cache's when it has one, else its first site's.
	authMetrics := r.index == 0 && s.cfg.Federation == nil && s.cfg.Cache == nil
	r.site = &Site{cfg: s.cfg.Storage[r.index], s: s, authMetrics: authMetrics}
	if err := r.site.start(true); err != nil {
		return err
	}
	s.sites = append(s.sites, r.site)
	fmt.Fprintf(s.out, "storage %s serving %s\n", r.site.URL, r.site.Dir)
	return nil
}

func (r *storageRole) stop(context.Context) error { return r.site.Stop() }

// resultsRole opens the results store the dashboard shows and the site
// tests write (see Options.ResultsPath).
type resultsRole struct{ store *results.Store }

func (r *resultsRole) start(ctx context.Context, s *Server) error {
	path, required := s.opts.ResultsPath, s.opts.ResultsPath != ""
	if !required {
		switch {
		case s.cfg.Results != "":
			path = s.cfg.Results
		case s.cfg.Tests != nil && s.cfg.Tests.DB != "":
			path = s.cfg.Tests.DB
		default:
			path = results.DefaultPath()
		}
	}
	st, err := results.Open(ctx, path)
	switch {
	case err != nil && required:
		return fmt.Errorf("server: results store: %w", err)
	case err != nil:
		s.log.Error("no dashboard and no scheduled tests: cannot open the results store", "path", results.Redact(path), "err", err)
		return nil
	}
	r.store, s.store = st, st
	return nil
}

func (r *resultsRole) stop(context.Context) error {
	if r.store == nil {
		return nil
	}
	return r.store.Close()
}

// sharedRole is the state this process shares with the others of the
// lake through Redis (the shared section): the federator's writes and
// metadata, the cache group's membership.
type sharedRole struct {
	c   *shared.Client
	run goroutine // the membership and the subscriptions
}

func (r *sharedRole) start(ctx context.Context, s *Server) error {
	sc := s.cfg.Shared
	c, err := shared.New(ctx, shared.Options{URL: sc.Redis, Node: sc.Node, Lease: sc.Lease.D(), Log: s.log,
		OnInvalidate: s.forgetShared, OnFlush: s.forgetAllShared})
	if err != nil {
		return err
	}
	r.c, s.shared = c, c
	r.run.run(s.runCtx, c.Run)
	fmt.Fprintf(s.out, "sharing state through %s as %s\n", sc.Redis, c.Node())
	return nil
}

// forgetShared is the shared client's OnInvalidate: the paths another
// process of the lake wrote leave this process's memory before it
// acknowledges. With a federator, through it (its metadata, then the
// other roles through its write hook); else (a cache of its own, whose
// origin is a federator elsewhere) straight through the write hook.
// The roles start after the shared state: until one has, there is
// nothing of it to drop.
func (s *Server) forgetShared(paths []string) {
	if f := s.sharedFed.Load(); f != nil {
		f.ForgetShared(paths)
		return
	}
	for _, p := range paths {
		s.wroteLocal(p)
	}
}

// forgetAllShared is the shared client's OnFlush: this process may have
// missed writes, so nothing it learned of the endpoints is trusted
// without asking again: the federator drops its metadata, the cache
// revalidates every file at its next read. And the shared state may
// have lost what this process told it (Redis restarted): the buffer
// tells it again what it holds.
func (s *Server) forgetAllShared() {
	if f := s.sharedFed.Load(); f != nil {
		f.ForgetAll()
	}
	if c := s.wroteCache.Load(); c != nil {
		c.Distrust()
	}
	if b := s.sharedBuffer.Load(); b != nil {
		b.Resync()
	}
}

func (r *sharedRole) stop(ctx context.Context) error {
	r.run.stop(ctx)
	return r.c.Close()
}

// federatorRole is the federator; its probes run until it closes.
type federatorRole struct{ fed *federation.Federator }

func (r *federatorRole) start(_ context.Context, s *Server) error {
	opts := federation.Options{Log: s.log, OnWrite: s.wroteLocal, MayList: s.mayList()}
	if s.opts.ConfigPath != "" {
		opts.Reload = s.loadFederation
	}
	if s.shared != nil {
		opts.Shared, opts.SharedWritesLocal = s.shared, s.cfg.Shared.WritesWhenDegraded == config.WritesLocal
		opts.Self = s.cfg.Shared.Advertise
	}
	fed, err := federation.New(s.runCtx, *s.cfg.Federation, opts)
	if err != nil {
		return err
	}
	if err := s.exportAuth(fed.Registry()); err != nil {
		fed.Close()
		return err
	}
	r.fed, s.fed = fed, fed
	s.sharedFed.Store(fed)
	return nil
}

func (r *federatorRole) stop(context.Context) error { return r.fed.Close() }

// goroutine is a role's background loop, stopped by cancelling its
// context and waited for.
type goroutine struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (g *goroutine) run(parent context.Context, f func(context.Context)) {
	ctx, cancel := context.WithCancel(parent)
	g.cancel = cancel
	g.wg.Go(func() { f(ctx) })
}

func (g *goroutine) stop(context.Context) error {
	if g.cancel != nil {
		g.cancel()
		g.wg.Wait()
	}
	return nil
}

// siteTestsRole runs the scheduled site tests of the tests section; they
// need the results store.
type siteTestsRole struct{ goroutine }

func (r *siteTestsRole) start(_ context.Context, s *Server) error {
	if s.cfg.Tests == nil || s.store == nil {
		return nil
	}
	sched, err := sitetest.New(sitetest.Options{Config: *s.cfg.Tests, Targets: sitetest.FederatorTargets(s.fed),
		Store: s.store, Excluder: s.fed, Registerer: s.fed.Registry(), Log: s.log})
	if err != nil {
		return err
	}
	s.tests = sched
	r.run(s.runCtx, func(ctx context.Context) { _ = sched.Run(ctx) })
	return nil
}

// dashboardRole is the dashboard and its latency sampler; it needs the
// results store.
type dashboardRole struct{ goroutine }

func (r *dashboardRole) start(_ context.Context, s *Server) error {
	if s.store == nil {
		return nil
	}
	var tests web.TestStatus // nil, not a nil *Scheduler, when there is none
	if s.tests != nil {
		tests = s.tests
	}
	opts := web.Options{Store: s.store, Federator: s.fed, Tests: tests, MayList: s.mayList(), Log: s.log}
	if s.cache != nil {
		opts.Cache = s.cache // not a nil *cache.Cache: the page is shown only with a cache
	}
	if s.buffer != nil {
		opts.Buffer = s.buffer // likewise
	}
	s.dash = web.New(opts)
	r.run(s.runCtx, s.dash.Run)
	return nil
}

// frontRole is the federator's listener, with the dashboard under /ui/.
type frontRole struct {
	hs   *http.Server
	fs   *fastpath.Server // in front of hs when the chain allows (fast.go); nil otherwise
	done chan struct{}    // closed when Serve returned
}

func (r *frontRole) start(_ context.Context, s *Server) error {
	ln, err := s.listen(s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("federation: %w", err)
	}
	var ui http.Handler // nil, not a nil *Dashboard, when there is none
	if s.dash != nil {
		ui = s.operatorGate(s.dash)
	}
	tlsCfg, err := s.serverTLS(s.cfg.TLSCert, s.cfg.TLSKey)
	if err != nil {
		ln.Close()
		return fmt.Errorf("federation: %w", err)
	}
	s.frontTLS = tlsCfg != nil
	ns := s.fed.Handler()
	if s.buffer != nil {
		ns = withPath(s.buffer.Wrap(ns), "/api/buffer", s.buffer.StatusHandler())
	}
	if s.cache != nil {
		if s.cfg.Cache.Listen == "" {
			ns = withCache(ns, s.cache, s.fed.Registry())
		}
	}
	ns = s.guardNamespace(ns, existsIn(s.fed.Namespace()))
	if s.door != nil || s.cacheDoor != nil {
		ns = withPath(ns, "/api/xroot", http.HandlerFunc(s.serveXrootStats))
	}
	r.hs = s.newHTTPServer(web.Front(ns, ui))
	r.done = make(chan struct{})
	s.front = ln.Addr()
	fmt.Fprintf(s.out, "federator %s/ over %d endpoints, dashboard %s/ui/\n", s.FederatorURL(),
		len(s.cfg.Federation.Endpoints), s.FederatorURL())
	serve := r.hs.Serve
	if s.frontFastPath(tlsCfg) {
		r.fs = fastpath.New(r.hs, frontResponder{s: s, fed: s.fed.FastResponder()},
			fastpath.Options{Log: s.log, Query: true, StallTimeout: s.stallTimeout()})
		serve = r.fs.Serve
	} else {
		ln = s.httpListener(ln, tlsCfg)
	}
	go func() {
		defer close(r.done)
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.fail(fmt.Errorf("federation: serve: %w", err))
		}
	}()
	return nil
}

func (r *frontRole) stop(ctx context.Context) error {
	if r.fs != nil {
		r.fs.Shutdown(ctx) // closes hs too, when it must
	} else if err := r.hs.Shutdown(ctx); err != nil {
		r.hs.Close()
	}
	<-r.done
	return nil
}
