package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
)

// authConfig maps the auth section onto package auth's config.
func authConfig(a *config.Auth) (auth.Config, error) {
	ac := auth.Config{CAFile: a.CAFile, CADir: a.CADir, VOMSDir: a.VOMSDir, ClockSkew: a.ClockSkew.D()}
	for _, is := range a.Issuers {
		ac.Issuers = append(ac.Issuers, auth.Issuer{URL: is.Issuer, Audiences: is.Audiences, Base: is.Base, Kind: auth.TokenKind(is.Kind)})
	}
	actions := func(in []string) ([]auth.Action, error) {
		var out []auth.Action
		for _, s := range in {
			a, err := auth.ParseAction(s)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	}
	for _, r := range a.Rules {
		anon, err := actions(r.Anonymous)
		if err != nil {
			return ac, err
		}
		allow, err := actions(r.Allow)
		if err != nil {
			return ac, err
		}
		ac.Rules = append(ac.Rules, auth.Rule{Prefix: r.Prefix, Anonymous: anon, Identities: r.Identities, Groups: r.Groups,
			VOs: r.VOs, FQANs: r.FQANs, Allow: allow})
	}
	return ac, nil
}

// authRole builds the authorizer every listener's handler passes through
// (first in the plan: the storage servers need it as they start).
type authRole struct{ a *auth.Authorizer }

func (r *authRole) start(ctx context.Context, s *Server) error {
	ac, err := authConfig(s.cfg.Auth)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	a, err := auth.New(ctx, ac, auth.Options{Log: s.log})
	if err != nil {
		return err
	}
	r.a, s.auth = a, a
	return nil
}

func (r *authRole) stop(context.Context) error { return r.a.Close() }

// serverTLS returns the TLS config of a listener with cert and key: one
// that asks for client certificates when the auth section trusts CAs,
// and whose certificate Reload reads again (SIGHUP). nil without a cert.
func (s *Server) serverTLS(cert, key string) (*tls.Config, error) {
	if cert == "" {
		return nil, nil
	}
	var caFile, caDir string
	if s.cfg.Auth != nil {
		caFile, caDir = s.cfg.Auth.CAFile, s.cfg.Auth.CADir
	}
	cfg, rl, err := auth.ServerTLS(cert, key, caFile, caDir)
	if err != nil {
		return nil, err
	}
	s.tlsMu.Lock()
	s.reloaders = append(s.reloaders, rl)
	s.tlsMu.Unlock()
	return cfg, nil
}

// reloadTLS reads every listener's certificate and the trusted CAs again.
func (s *Server) reloadTLS() error {
	s.tlsMu.Lock()
	rls := append([]*auth.Reloader(nil), s.reloaders...)
	s.tlsMu.Unlock()
	var errs []error
	for _, rl := range rls {
		errs = append(errs, rl.Reload())
	}
	if s.auth != nil {
		errs = append(errs, s.auth.Reload())
	}
	return errors.Join(errs...)
}

// guard puts the auth rules in front of h, with exists telling a PUT that
// creates from one that modifies. Without an auth section h is returned.
func (s *Server) guard(h http.Handler, exists auth.ExistsFunc) http.Handler {
	if s.auth == nil {
		return h
	}
	return s.auth.Middleware(h, exists)
}

// existsUnder says whether a path exists below a storage root.
func existsUnder(root string) auth.ExistsFunc {
	return func(_ context.Context, p string) (bool, error) {
		_, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, os.ErrNotExist):
			return false, nil
		}
		return false, err
	}
}

// existsIn says whether a path exists in an endpoint (the federation).
func existsIn(ep endpoint.Endpoint) auth.ExistsFunc {
	return func(ctx context.Context, p string) (bool, error) {
		_, err := ep.Stat(ctx, p)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, endpoint.ErrNotFound):
			return false, nil
		}
		return false, err
	}
}

// tlsListener wraps ln in TLS when cfg is set.
func tlsListener(ln net.Listener, cfg *tls.Config) net.Listener {
	if cfg == nil {
		return ln
	}
	return tls.NewListener(ln, cfg)
}

// guardNamespace is guard for a front listener: the auth rules cover the
// namespace, while the operator's pages keep their own rules (the admin
// section guards POST /api/reload). Only those exact paths pass
// unguarded: every other path, /api/anything included, is a file of the
// namespace and must pass the rules. They pass with their caller's
// identity (auth.WithCaller), so that those showing paths of the
// namespace show only the ones the caller may list (mayList).
func (s *Server) guardNamespace(h http.Handler, exists auth.ExistsFunc) http.Handler {
	if s.auth == nil {
		return h
	}
	guarded, open := s.guard(h, exists), s.withCaller(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOperatorPage(r.URL.Path) && (r.Method == http.MethodGet || r.Method == http.MethodHead ||
			r.Method == http.MethodPost && r.URL.Path == "/api/reload") {
			open.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// withCaller passes h's requests on with their caller's identity
// (auth.WithCaller), for the operator's pages and the dashboard, which
// the auth rules do not guard but whose lists of paths mayList filters.
// Without an auth section h is returned.
func (s *Server) withCaller(h http.Handler) http.Handler {
	if s.auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, s.auth.WithCaller(r))
	})
}

// mayList is the one filter of the operator's pages that list paths of
// the namespace (/api/cache/files, /api/buffer, /api/disagreements, and
// the dashboard's cache and buffer pages):
// whether the caller of r, as guardNamespace found it, may list p under
// the auth rules. Until those pages get rules of their own, they must not
// show what a PROPFIND would refuse. Nil without an auth section:
// everything is open, so everything is shown.
func (s *Server) mayList() func(r *http.Request, p string) bool {
	if s.auth == nil {
		return nil
	}
	return s.auth.MayList
}

// isOperatorPage reports whether p is one of the front listener's own
// pages, outside the namespace.
func isOperatorPage(p string) bool {
	switch p {
	case "/metrics", "/api/endpoints", "/api/health", "/api/disagreements", "/api/reload",
		"/api/buffer", "/api/xroot", "/api/cache", "/api/cache/files", "/api/cache/health":
		return true
	}
	return false
}
