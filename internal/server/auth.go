package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/httpx"
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

// exportAuth shows lakefed_auth_refused_total, the refusals on every
// listener of the process, on reg. The roles call it for one registry per
// process, so that a Prometheus summing a job's series counts each
// refusal once. Without an auth section there is nothing to show.
func (s *Server) exportAuth(reg prometheus.Registerer) error {
	if s.auth == nil {
		return nil
	}
	return s.auth.Register(reg)
}

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

// guardSite is guard for a storage site: its metrics page (GET and HEAD
// of metricsPath, "" for none) is an operator page, as on the
// federator's and the cache's listeners, and every other request is
// under the auth rules. Under the rules, Prometheus needed a grant of
// its own on every site, or LakefedDown fired for the site.
func (s *Server) guardSite(h http.Handler, root, metricsPath string) http.Handler {
	guarded, operator := s.guard(h, existsUnder(root)), s.operatorGate(h)
	if metricsPath == "" {
		return guarded
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == metricsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			operator.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
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

// guardNamespace is guard for a front listener: the auth rules cover the
// namespace, while the operator's pages have their own rule
// (operatorGate), and POST /api/reload the admin check of the
// federator's reload handler. Only those exact paths pass outside the
// rules: every other path, /api/anything included, is a file of the
// namespace and must pass them. They pass with their caller's identity
// (auth.WithCaller), so that the admin check knows who calls and the
// pages showing paths of the namespace show only the ones the caller
// may list (mayList).
func (s *Server) guardNamespace(h http.Handler, exists auth.ExistsFunc) http.Handler {
	guarded, withID, operator := s.guard(h, exists), s.withCaller(h), s.operatorGate(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case r.Method == http.MethodPost && p == "/api/reload":
			withID.ServeHTTP(w, r)
		case (p == "/api/health" || p == "/api/cache/health") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			// Liveness probes of load balancers, cache peers and
			// federators above this one: they say "ok" and nothing else.
			h.ServeHTTP(w, r)
		case isOperatorPage(p) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			operator.ServeHTTP(w, r)
		default:
			guarded.ServeHTTP(w, r)
		}
	})
}

// operatorGate lets through to h, with their identity (auth.WithCaller),
// the callers the operator section allows: a client of one of its
// anonymous networks (loopback by default), a caller its identities
// name, or an admin (federation.IsAdmin). Others get 401 (anonymous:
// credentials would help) or 403, logged at Info. Without an auth
// section every caller is anonymous.
func (s *Server) operatorGate(h http.Handler) http.Handler {
	nets := s.cfg.Operator.Networks()
	var adm config.Admin
	if s.cfg.Federation != nil {
		adm = s.cfg.Federation.Admin
	}
	log := s.log.With("component", "operator")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth != nil {
			r = s.auth.WithCaller(r)
		}
		id, _ := auth.IdentityFrom(r.Context())
		if inNetworks(r.RemoteAddr, nets) || id.Kind != auth.Anonymous && (slices.Contains(s.cfg.Operator.Identities, id.Name) || federation.IsAdmin(id, adm)) {
			h.ServeHTTP(w, r)
			return
		}
		code := http.StatusForbidden
		if id.Kind == auth.Anonymous {
			code = http.StatusUnauthorized
			w.Header().Set("WWW-Authenticate", `Bearer realm="lakefed"`)
		}
		log.InfoContext(r.Context(), "operator page refused", "identity", id.String(), "path", r.URL.Path, "remote", r.RemoteAddr, "status", code)
		httpx.WriteError(w, code, fmt.Sprintf("%s may not see the operator's pages from %s (operator: anonymous networks, identities)", id, r.RemoteAddr))
	})
}

// inNetworks reports whether the host:port addr is in one of nets.
func inNetworks(addr string, nets []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
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
