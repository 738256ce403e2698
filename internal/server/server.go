// Package server assembles the roles one lakefed process runs from its
// config: the storage servers, the federator, the results store, the
// scheduled site tests and the dashboard, and the front listener that
// serves the federator and the dashboard. `lakefed serve`, `lakefed demo`
// and the federation-in-a-box test harness (servertest) all start roles
// here, so that the listeners, their limits, reload and the order of
// shutdown are written once.
//
//	srv, err := server.Start(ctx, cfg, server.Options{ConfigPath: path, Out: os.Stdout})
//	if err != nil { return err }
//	defer srv.Close()                // front first, storage last (roles.go)
//	restart, err := srv.Reload(ctx)  // on SIGHUP: the federation section
//	err = <-srv.Err()                // a role that stopped serving
//
// A role is a type with start and stop (roles.go); Start runs the list
// plan builds in order and Close stops it in reverse. A new role (a cache,
// a write buffer) is one more type and one more line in plan.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/shared"
	"github.com/lakefed/lakefed/internal/sitetest"
	"github.com/lakefed/lakefed/internal/web"
	"github.com/lakefed/lakefed/internal/xrootd"
)

// Limits of the front listener's HTTP server (the federator and the
// dashboard). The storage role applies the same values to its own
// listeners (storage.Serve); the fast path in front of either (package
// fastpath) takes them from the http.Server.
const (
	maxHeaderBytes    = 64 << 10 // larger request headers get 431
	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	// DrainTimeout is how long Close lets requests in flight finish
	// before it cuts their connections.
	DrainTimeout = 10 * time.Second
)

// ErrNoFederator is returned by Reload when the config has no federation
// section: there is nothing a reload could change.
var ErrNoFederator = errors.New("server: no federator to reload")

// Options say how to run a config's roles. The zero value is lakefed
// serve without reload and without output.
type Options struct {
	// ConfigPath is the file Reload (SIGHUP, POST /api/reload) re-reads.
	// Empty: reloads fail, and POST /api/reload answers 501.
	ConfigPath string
	// Listeners are listeners already open, keyed by the listen address
	// the config gives (listen, storage[i].listen). Start serves on them
	// in place of listening, and owns every one of them from the call on,
	// whether it succeeds or not. The demo and the test harness open
	// port 0, write the addresses they got into the config and hand the
	// listeners over, so no other process can take a port in between.
	Listeners map[string]net.Listener
	// ResultsPath is the results store the dashboard shows and the site
	// tests write, and the caller needs: Start fails when it cannot be
	// opened. Empty: tests.db, else results.DefaultPath(), and a store
	// that cannot be opened costs the dashboard and the tests but not the
	// federator (it is logged).
	ResultsPath string
	// Log receives the roles' logs. Nil: slog.Default().
	Log *slog.Logger
	// Out receives one line per listening role as it starts ("storage
	// http://127.0.0.1:9001/ serving /srv/a"). Nil: discarded.
	Out io.Writer
}

// Server is a running set of roles. Its methods may be called from any
// goroutine.
type Server struct {
	cfg  *config.Config // as started: Reload compares the file with it
	opts Options
	log  *slog.Logger
	out  io.Writer

	runCtx  context.Context // parent of every role's goroutines
	stopRun context.CancelFunc
	errc    chan error // the first failures of running roles

	lnMu      sync.Mutex
	listeners map[string]net.Listener // Options.Listeners not yet taken

	roles   []role // in start order
	started int    // how many of roles have started

	// Set by the roles as they start; read by the roles after them and
	// by the accessors.
	sites     []*Site
	fed       *federation.Federator
	store     *results.Store
	tests     *sitetest.Scheduler
	dash      *web.Dashboard
	front     net.Addr
	cache     *cache.Cache
	cacheAddr net.Addr // the cache's own listener, nil when it shares the front
	auth      *auth.Authorizer
	buffer    *buffer.Buffer
	shared    *shared.Client // the state shared through Redis; nil without a shared section
	// sharedFed is fed for the shared client's subscription, which runs
	// before the federator starts.
	sharedFed atomic.Pointer[federation.Federator]
	// wroteCache is cache for the write hooks (wroteLocal), which run on
	// other goroutines (the shared subscription) from before the cache
	// starts to after it stops.
	wroteCache atomic.Pointer[cache.Cache]
	// sharedBuffer is buffer for the shared client's flush
	// (forgetAllShared), which runs on its own goroutine.
	sharedBuffer atomic.Pointer[buffer.Buffer]
	door         *xrootd.Server // the federation's root:// door
	doorAddr     net.Addr
	cacheDoor    *xrootd.Server // the cache's root:// door
	frontTLS     bool           // the front listener serves HTTPS
	cacheTLS     bool

	tlsMu     sync.Mutex
	reloaders []*auth.Reloader // every listener's certificate, for reloadTLS

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{} // closed when Shutdown begins
}

// Start runs every role cfg names (cfg has been through config.Load or
// SetDefaults and Validate): each storage server and, with a federation
// section, the results store, the federator, the site tests, the
// dashboard and the front listener, in that order. ctx bounds the start
// only: the roles run until Close. On error nothing is left running.
func Start(ctx context.Context, cfg *config.Config, opts Options) (_ *Server, err error) {
	// Tagged: every role's lines about a request carry its ID, whatever
	// logger the caller built (nil: slog.Default()).
	opts.Log = logging.Tagged(opts.Log)
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{
		cfg: cfg, opts: opts, log: opts.Log, out: out,
		runCtx: runCtx, stopRun: stopRun,
		listeners: make(map[string]net.Listener, len(opts.Listeners)),
		closed:    make(chan struct{}),
	}
	for addr, ln := range opts.Listeners {
		s.listeners[addr] = ln
	}
	s.roles = s.plan()
	s.errc = make(chan error, len(s.roles))
	defer func() {
		s.closeUnused()
		if err != nil {
			_ = s.Close()
		}
	}()
	for _, r := range s.roles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.start(ctx, s); err != nil {
			return nil, err
		}
		s.started++
	}
	return s, nil
}

// listen returns the listener handed over for addr, else a new one.
func (s *Server) listen(addr string) (net.Listener, error) {
	s.lnMu.Lock()
	ln, ok := s.listeners[addr]
	delete(s.listeners, addr)
	s.lnMu.Unlock()
	if ok {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// closeUnused closes the handed-over listeners no role took.
func (s *Server) closeUnused() {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	for addr, ln := range s.listeners {
		ln.Close()
		delete(s.listeners, addr)
	}
}

// fail reports a running role's failure on Err; failures beyond the
// first few are logged only, so that no role ever blocks on it.
func (s *Server) fail(err error) {
	select {
	case s.errc <- err:
	default:
		s.log.Error("role failed", "err", err)
	}
}

// Err delivers the failure of a role that stopped serving on its own (a
// listener that broke). A caller such as lakefed serve stops on it.
func (s *Server) Err() <-chan error { return s.errc }

// Federator is the running federator, nil without a federation section.
func (s *Server) Federator() *federation.Federator { return s.fed }

// Store is the results store, nil when there is none (no federation
// section, or it could not be opened). It is open until Close.
func (s *Server) Store() *results.Store { return s.store }

// FederatorURL is the front listener's base URL without a trailing slash
// ("http://127.0.0.1:8080"), "" without a federator.
func (s *Server) FederatorURL() string {
	if s.front == nil {
		return ""
	}
	if s.frontTLS {
		return "https://" + s.front.String()
	}
	return "http://" + s.front.String()
}

// Cache is the running cache, nil without a cache section.
func (s *Server) Cache() *cache.Cache { return s.cache }

// CacheURL is the cache's base URL without a trailing slash: its own
// listener's, else the federator's when it shares it; "" without a cache.
func (s *Server) CacheURL() string {
	switch {
	case s.cache == nil:
		return ""
	case s.cacheAddr != nil && s.cacheTLS:
		return "https://" + s.cacheAddr.String()
	case s.cacheAddr != nil:
		return "http://" + s.cacheAddr.String()
	}
	return s.FederatorURL()
}

// Sites are the storage servers, in the config's order.
func (s *Server) Sites() []*Site { return s.sites }

// Reload re-reads Options.ConfigPath and applies its federation section
// to the running federator; requests in flight keep the old endpoint set.
// It returns the settings that changed but are read only at start
// (config.RestartChanges), each one phrase; they keep their old values
// until a restart. On error the old endpoint list stays.
func (s *Server) Reload(ctx context.Context) (restartNeeded []string, err error) {
	if err := s.reloadTLS(); err != nil {
		return nil, fmt.Errorf("reload: certificates: %w", err)
	}
	if s.fed == nil {
		return nil, ErrNoFederator
	}
	c, err := s.loadFederation(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.fed.Reload(*c); err != nil {
		return nil, err
	}
	return c.RestartNeeded, nil
}

// loadFederation reads the federation section of the config file, with
// RestartNeeded filled against the config the server started with. It is
// the federator's Options.Reload too (POST /api/reload).
func (s *Server) loadFederation(context.Context) (*config.Federation, error) {
	if s.opts.ConfigPath == "" {
		return nil, errors.New("server: no config file to reload")
	}
	c, err := config.Load(s.opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	if c.Federation == nil {
		return nil, fmt.Errorf("config %s: the federation section is gone; a federator cannot reload into none", s.opts.ConfigPath)
	}
	c.Federation.RestartNeeded = config.RestartChanges(s.cfg, c)
	return c.Federation, nil
}

// Close stops every role, letting requests in flight finish for up to
// DrainTimeout. It may be called more than once; every call returns after
// everything has stopped, with what the first found.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops the started roles in the reverse of their start order:
// the front listener stops accepting and drains its requests (until ctx
// is done, then its connections are cut) while the storage servers still
// answer the federator's proxied reads; then the dashboard and the site
// tests stop, the federator closes, the results store closes, and last
// the storage servers drain and close. Later calls wait for the first
// and return its result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		close(s.closed)
		var errs []error
		for i := s.started - 1; i >= 0; i-- {
			errs = append(errs, s.roles[i].stop(ctx))
		}
		s.stopRun()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// newHTTPServer is the server of the front listener and of the cache's
// own, with the limits above, the request IDs and the access log (tagged).
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           httpx.StallHandler(s.tagged(h), s.stallTimeout()),
		ConnContext:       httpx.StallConnContext,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// httpListener is ln as an http.Server serves it: every connection under
// the stall timeout, then in TLS when cfg is set. (The fast path applies
// the stall timeout itself, and takes no TLS.)
func (s *Server) httpListener(ln net.Listener, cfg *tls.Config) net.Listener {
	ln = httpx.SendListener(ln, s.stallTimeout())
	if cfg == nil {
		return ln
	}
	return tls.NewListener(ln, cfg)
}

// stallTimeout is the stall timeout of the federator's and the cache's
// listeners (config stall_timeout).
func (s *Server) stallTimeout() time.Duration {
	return cmp.Or(s.cfg.StallTimeout.D(), httpx.DefaultStallTimeout)
}
