package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
)

// cacheConfig maps the cache section onto the cache role's own config.
func cacheConfig(c *config.Cache) cache.Config {
	cc := cache.Config{
		Dir:               c.Dir,
		MaxBytes:          int64(c.MaxBytes),
		MaxInodes:         c.MaxInodes,
		HighWatermark:     c.HighWatermark,
		LowWatermark:      c.LowWatermark,
		BlockSize:         int64(c.BlockSize),
		PrefetchBlocks:    c.PrefetchBlocks,
		RAM:               int64(c.RAM),
		RevalidateAfter:   c.RevalidateAfter.D(),
		MaxFills:          c.MaxFills,
		OriginIdleTimeout: c.OriginIdleTimeout.D(),
		Sendfile:          c.Sendfile,
		Group:             c.Group,
		Self:              c.Self,
	}
	if cc.Self == "" && c.Listen != "" {
		cc.Self = "http://" + c.Listen
	}
	return cc
}

// cacheRole is the read-through cache: on a listener of its own, or on
// the federator's (frontRole routes reads to it).
type cacheRole struct {
	s      *Server
	c      *cache.Cache
	origin endpoint.Endpoint
	hs     *http.Server
	done   chan struct{}
}

func (r *cacheRole) start(ctx context.Context, s *Server) error {
	cs := s.cfg.Cache
	var origin endpoint.Endpoint
	if cs.Origin == config.OriginFederation {
		origin = s.namespace()
	} else {
		ep, err := kinds.New(ctx, endpoint.Config{Name: "origin", URL: cs.Origin}, s.log)
		if err != nil {
			return fmt.Errorf("cache: origin %s: %w", cs.Origin, err)
		}
		origin = ep
		r.origin = ep
	}
	copts := cache.Options{Log: s.log, MayList: s.mayList()}
	if s.shared != nil {
		// Writes elsewhere reach the cache through the shared
		// invalidations (forgetShared) once this process is a member.
		copts.Trusted = s.shared.Trusted
		if len(cs.Group) == 1 && cs.Group[0] == config.GroupShared {
			// The group is whoever registers in Redis under this name.
			copts.Membership = s.shared.Group("cache")
		}
	}
	c, err := cache.New(s.runCtx, cacheConfig(cs), origin, copts)
	if err != nil {
		return err
	}
	if s.fed == nil { // else the federator's /metrics shows them
		if err := s.exportAuth(c.Registry()); err != nil {
			c.Close()
			return err
		}
	}
	r.s, r.c, s.cache = s, c, c
	s.wroteCache.Store(c)
	if cs.Listen == "" {
		fmt.Fprintf(s.out, "cache of %s in %s, on the federator's listener (GET and HEAD)\n", cs.Origin, cs.Dir)
		return nil
	}
	ln, err := s.listen(cs.Listen)
	if err != nil {
		c.Close()
		return fmt.Errorf("cache: %w", err)
	}
	tlsCfg, err := s.serverTLS(s.cfg.TLSCert, s.cfg.TLSKey)
	if err != nil {
		ln.Close()
		c.Close()
		return fmt.Errorf("cache: %w", err)
	}
	s.cacheTLS = tlsCfg != nil
	r.hs = s.newHTTPServer(s.guardNamespace(c.Handler(), nil))
	r.done = make(chan struct{})
	s.cacheAddr = ln.Addr()
	fmt.Fprintf(s.out, "cache %s/ of %s in %s\n", s.CacheURL(), cs.Origin, cs.Dir)
	ln = s.httpListener(ln, tlsCfg)
	go func() {
		defer close(r.done)
		if err := r.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.fail(fmt.Errorf("cache: serve: %w", err))
		}
	}()
	return nil
}

func (r *cacheRole) stop(ctx context.Context) error {
	r.s.wroteCache.Store(nil) // a closed cache forgets nothing more
	if r.hs != nil {
		if err := r.hs.Shutdown(ctx); err != nil {
			r.hs.Close()
		}
		<-r.done
	}
	err := r.c.Close()
	if cl, ok := r.origin.(interface{ Close() error }); ok {
		cl.Close()
	}
	return err
}

// withCache puts a cache sharing the federator's listener in front of
// the namespace: GET and HEAD of files go to the cache, every other
// method to the federator; /api/cache is the cache's, and /metrics shows
// both roles' series.
func withCache(namespace http.Handler, c *cache.Cache, fedRegistry *prometheus.Registry) http.Handler {
	files, api := c.FileHandler(), c.APIHandler()
	metrics := promhttp.HandlerFor(prometheus.Gatherers{fedRegistry, c.Registry()}, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/metrics":
			metrics.ServeHTTP(w, r)
		case p == "/api/cache" || strings.HasPrefix(p, "/api/cache/"):
			api.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/api/"):
			namespace.ServeHTTP(w, r)
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			files.ServeHTTP(w, r)
		default:
			namespace.ServeHTTP(w, r)
		}
	})
}
