package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/auth"
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
		ns, reg = s.namespace().(xrootd.Namespace), s.fed.Registry() // the Namespace, or the buffer's overlay of it: both have Checksum and Replicas
		if s.buffer != nil {
			ns = s.newBufferedDoor(s.namespace(), s.fed.Namespace())
		}
	}
	opts := xrootd.Options{Log: s.log, Registerer: reg, OutageWait: s.cfg.XrootOutageWait.D(), RequireTLS: s.cfg.XrootTLSRequired}
	if s.auth != nil {
		opts.Authorize = doorAuthorize(s.auth, s.log, what)
	}
	// roots:// with the federator's certificate, when it has one.
	tlsCfg, err := s.serverTLS(s.cfg.TLSCert, s.cfg.TLSKey)
	if err != nil {
		return fmt.Errorf("root:// door: %w", err)
	}
	opts.TLS = doorTLS(tlsCfg)
	ln, err := s.listen(addr)
	if err != nil {
		return fmt.Errorf("root:// door: %w", err)
	}
	r.door = xrootd.New(ns, opts)
	r.done = make(chan struct{})
	if r.cache {
		s.cacheDoor = r.door
	} else {
		s.door, s.doorAddr = r.door, ln.Addr()
	}
	if tlsCfg != nil {
		fmt.Fprintf(s.out, "root:// door root://%s/ (and roots://) to the %s\n", ln.Addr(), what)
	} else {
		fmt.Fprintf(s.out, "root:// door root://%s/ to the %s\n", ln.Addr(), what)
	}
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

// doorAuthorize applies the auth rules to a door's requests: the bearer
// token of the request's authz= CGI (or the connection's) is verified as
// Middleware verifies an Authorization header; without one, the client
// certificate of a roots:// connection is, as Middleware verifies an
// HTTPS client's (VOMS attributes included); and the identity proven
// (anonymous without either) is what Allow judges. Refusals are logged
// at Info with identity, path, action and reason, as Middleware logs its
// own.
func doorAuthorize(a *auth.Authorizer, log *slog.Logger, door string) func(ctx context.Context, token, act, p string) error {
	log = log.With("component", "xrootd", "door", door)
	return func(ctx context.Context, token, act, p string) error {
		var id auth.Identity
		var err error
		if certs := xrootd.PeerCertificates(ctx); token == "" && certs != nil {
			id, err = a.CertIdentity(certs)
		} else {
			id, err = a.Identify(ctx, token)
		}
		if err == nil {
			err = a.Allow(ctx, id, auth.Action(act), p)
		}
		if err != nil {
			log.InfoContext(ctx, "root:// request refused", "identity", id.String(), "path", p, "action", act, "err", err)
			return fmt.Errorf("root:// %s of %s refused: %s", act, p, strings.TrimPrefix(err.Error(), "auth: "))
		}
		return nil
	}
}

// doorTLS is the roots:// door's TLS config: the listener's, except that
// a client certificate that does not verify does not fail the
// handshake. The door's Authorize checks it again (auth.CertIdentity)
// and refuses every request of the connection with the reason, which
// an XRootD client shows, where a failed handshake shows only "TLS
// error": XRootD clients of the 5.5 series send only the leaf of
// X509_USER_PROXY (SSL_CTX_use_certificate_file), so a proxy arrives
// without the certificate it was signed by. Nil stays nil.
func doorTLS(cfg *tls.Config) *tls.Config {
	if cfg == nil || cfg.GetConfigForClient == nil {
		return cfg
	}
	door := cfg.Clone()
	door.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := cfg.GetConfigForClient(h)
		if c != nil {
			c = c.Clone()
			c.VerifyConnection = nil
		}
		return c, err
	}
	return door
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
