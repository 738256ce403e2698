package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/xrootd"
)

// xrootRole is a root:// door: to the federation's namespace
// (listen_xroot) or to the cache (cache.listen_xroot).
type xrootRole struct {
	cache bool // the cache's door, else the federation's
	door  *xrootd.Server
	done  chan struct{}
}

func (r *xrootRole) start(_ context.Context, s *Server) error {
	var ns xrootd.Namespace
	var reg prometheus.Registerer
	addr, what := s.cfg.ListenXroot, "federation"
	if r.cache {
		ns, reg = s.cache.Endpoint(), s.cache.Registry()
		addr, what = s.cfg.Cache.ListenXroot, "cache"
	} else {
		ns, reg = s.fed.Namespace(), s.fed.Registry()
	}
	if s.auth != nil {
		ns = anonymousOnly{ns: ns, a: s.auth}
	}
	ln, err := s.listen(addr)
	if err != nil {
		return fmt.Errorf("root:// door: %w", err)
	}
	r.door = xrootd.New(ns, xrootd.Options{Log: s.log, Registerer: reg})
	r.done = make(chan struct{})
	if r.cache {
		s.cacheDoor = r.door
	} else {
		s.door, s.doorAddr = r.door, ln.Addr()
	}
	fmt.Fprintf(s.out, "root:// door root://%s/ to the %s\n", ln.Addr(), what)
	go func() {
		defer close(r.done)
		if err := r.door.Serve(s.runCtx, ln); err != nil && !errors.Is(err, xrootd.ErrServerClosed) {
			s.fail(fmt.Errorf("root:// door: %w", err))
		}
	}()
	return nil
}

func (r *xrootRole) stop(context.Context) error {
	err := r.door.Close()
	<-r.done
	return err
}

// XrootURL is the federation's root:// door ("root://127.0.0.1:1094"),
// "" without one.
func (s *Server) XrootURL() string {
	if s.doorAddr == nil {
		return ""
	}
	return "root://" + s.doorAddr.String()
}

// serveXrootStats answers /api/xroot: the doors' opens, redirects, bytes
// and errors by class (/api/endpoints stays the list of endpoints its
// clients read).
func (s *Server) serveXrootStats(w http.ResponseWriter, _ *http.Request) {
	out := map[string]xrootd.Stats{}
	if s.door != nil {
		out["federation"] = s.door.Stats()
	}
	if s.cacheDoor != nil {
		out["cache"] = s.cacheDoor.Stats()
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// anonymousOnly applies the auth rules to a door's callers, who prove no
// identity (the door has no token or certificate authentication yet):
// what the rules give anonymous callers, nothing more.
type anonymousOnly struct {
	ns xrootd.Namespace
	a  *auth.Authorizer
}

func (n anonymousOnly) allow(ctx context.Context, act auth.Action, p string) error {
	if err := n.a.Allow(ctx, auth.Identity{Kind: auth.Anonymous}, act, p); err != nil {
		return fmt.Errorf("root:// door: %s %s: %v: %w", act, p, err, endpoint.ErrRefused)
	}
	return nil
}

func (n anonymousOnly) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	if err := n.allow(ctx, auth.Read, p); err != nil {
		if err := n.allow(ctx, auth.List, p); err != nil {
			return endpoint.Info{}, err
		}
	}
	return n.ns.Stat(ctx, p)
}

func (n anonymousOnly) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	if err := n.allow(ctx, auth.List, dir); err != nil {
		return nil, err
	}
	return n.ns.List(ctx, dir)
}

func (n anonymousOnly) Open(ctx context.Context, p string, off, count int64) (io.ReadCloser, error) {
	if err := n.allow(ctx, auth.Read, p); err != nil {
		return nil, err
	}
	return n.ns.Open(ctx, p, off, count)
}

func (n anonymousOnly) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	if err := n.allow(ctx, auth.Create, p); err != nil {
		return err
	}
	if err := n.allow(ctx, auth.Modify, p); err != nil {
		return err
	}
	return n.ns.Put(ctx, p, r, size)
}

func (n anonymousOnly) Checksum(ctx context.Context, p, algo string) (string, error) {
	if err := n.allow(ctx, auth.Read, p); err != nil {
		return "", err
	}
	return n.ns.Checksum(ctx, p, algo)
}

func (n anonymousOnly) Replicas(ctx context.Context, p string) ([]*url.URL, error) {
	if err := n.allow(ctx, auth.Read, p); err != nil {
		return nil, err
	}
	return n.ns.Replicas(ctx, p)
}

// withPath serves one exact path with h, everything else with next.
func withPath(next http.Handler, path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path && r.Method == http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
